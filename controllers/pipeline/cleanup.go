package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/redact"
	"github.com/packline/packline/jobs/spec"
)

// Finalizer holds a resource with deletionPolicy Delete until its cleanup
// Job has removed the pushed artifact (or given up).
const Finalizer = "packline.dev/delete-artifact"

// cleanupInputs labels cleanup Jobs apart from run Jobs.
const cleanupInputs = "cleanup"

// Targeted is an Object whose push target the cleanup Job reuses, so it
// authenticates exactly as the run did and the manager still reads no Secret.
type Targeted interface {
	Object
	GetPushTarget() v1alpha1.Target
}

// CleanupPlacement says where a deleted owner's cleanup Job runs and which
// push target it authenticates with, when that is not the owner's
// namespace and spec.target: a private template's Claims pushed from the
// template namespace with the template's Secret. An empty namespace keeps
// the owner's. A *Blocked error lets the owner go without a cleanup, with
// its message in a CleanupFailed event.
type CleanupPlacement func(ctx context.Context, obj Object) (namespace string, target v1alpha1.Target, err error)

// syncFinalizer adds the finalizer when deletionPolicy is Delete, and drops
// it when the policy changes back.
func (p *Pipeline) syncFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	want := s.obj.GetPipelineSpec().DeletionPolicy == v1alpha1.DeletionDelete
	if want == controllerutil.ContainsFinalizer(s.obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, p.patchFinalizers(ctx, s.obj, func() {
		if want {
			controllerutil.AddFinalizer(s.obj, Finalizer)
		} else {
			controllerutil.RemoveFinalizer(s.obj, Finalizer)
		}
	})
}

// patchFinalizers changes obj's finalizers with a patch that carries the
// resourceVersion: a merge patch replaces the whole list, so without the
// lock a finalizer another controller added meanwhile would be dropped. A
// conflict is an error, and the next reconcile starts from a fresh read.
func (p *Pipeline) patchFinalizers(ctx context.Context, obj client.Object, mutate func()) error {
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	mutate()
	return p.Client.Patch(ctx, obj, patch)
}

// cleanup runs on a deleted resource that holds the finalizer. Its state
// lives in the cleanup Jobs themselves, so a restarted manager picks up
// where the last one stopped. It never blocks deletion for good: after a
// permanent failure or the last retry it warns and lets go.
func (p *Pipeline) cleanup(ctx context.Context, obj Object) (ctrl.Result, error) {
	st := obj.GetPipelineStatus()
	t, ok := obj.(Targeted)
	if st.Reference == "" || !ok {
		return ctrl.Result{}, p.release(ctx, obj, corev1.EventTypeNormal, "NothingToDelete", "nothing was pushed")
	}
	gvk, err := p.Client.GroupVersionKindFor(obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	owner := Owner{GVK: gvk, Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: string(obj.GetUID())}
	ns, target := owner.Namespace, t.GetPushTarget()
	if p.CleanupPlacement != nil {
		pns, ptarget, err := p.CleanupPlacement(ctx, obj)
		var blocked *Blocked
		switch {
		case errors.As(err, &blocked):
			return ctrl.Result{}, p.release(ctx, obj, corev1.EventTypeWarning, "CleanupFailed",
				fmt.Sprintf("could not delete %s (%s: %s); it is left in the registry", st.Reference, blocked.Reason, blocked.Message))
		case err != nil:
			return ctrl.Result{}, err
		case pns != "":
			ns, target = pns, ptarget
		}
	}
	var list batchv1.JobList
	if err := p.Client.List(ctx, &list, client.InNamespace(ns),
		client.MatchingLabels{LabelOwnerUID: owner.UID, LabelInputs: cleanupInputs}); err != nil {
		return ctrl.Result{}, err
	}
	var job *batchv1.Job
	var attempt int32
	for i := range list.Items {
		if ns != owner.Namespace && list.Items[i].Labels[LabelOwnerNamespace] != owner.Namespace {
			continue
		}
		if a, _ := strconv.Atoi(list.Items[i].Labels[LabelAttempt]); int32(a) > attempt {
			attempt, job = int32(a), &list.Items[i]
		}
	}
	if job == nil {
		return ctrl.Result{}, p.createCleanupJob(ctx, owner, ns, target, t, 1)
	}
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return ctrl.Result{}, err
	}
	o := Observe(job, pods.Items)
	switch o.State {
	case StateSucceeded:
		return ctrl.Result{}, p.release(ctx, obj, corev1.EventTypeNormal, "ArtifactDeleted", "deleted "+st.Reference)
	case StateFailed:
		limit := p.Config.DefaultRetryLimit
		if rl := obj.GetPipelineSpec().RetryLimit; rl != nil {
			limit = *rl
		}
		if o.Permanent || attempt > limit {
			return ctrl.Result{}, p.release(ctx, obj, corev1.EventTypeWarning, "CleanupFailed",
				fmt.Sprintf("could not delete %s (%s: %s); it is left in the registry", st.Reference, o.Reason, o.Message))
		}
		failedAt := p.now()
		if c := jobCondition(job, batchv1.JobFailed); c != nil {
			failedAt = c.LastTransitionTime.Time
		}
		if wait := failedAt.Add(Backoff(attempt, p.Config.BackoffBase, p.Config.BackoffCap)).Sub(p.now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, p.createCleanupJob(ctx, owner, ns, target, t, attempt+1)
	}
	return ctrl.Result{}, nil
}

func (p *Pipeline) createCleanupJob(ctx context.Context, owner Owner, ns string, push v1alpha1.Target, obj Targeted, attempt int32) error {
	st := obj.GetPipelineStatus()
	var m Mounts
	target := m.Target(push, "")
	target.Tag = st.Tag
	doc, err := spec.Encode(spec.Delete{Reference: st.Reference, Target: target})
	if err != nil {
		return err
	}
	job := BuildJob(JobParams{
		Owner: owner, Namespace: ns, Generation: obj.GetGeneration(), Attempt: attempt, InputsHash: cleanupInputs,
		Image: p.Config.WorkerImage, Command: "delete", SpecJSON: doc,
		Env: m.Env, Volumes: m.Volumes, Mounts: m.Mounts, EphemeralWorkspace: true,
		Timeout: p.Config.DefaultTimeout, TTLAfterFinished: p.Config.JobTTL,
		ServiceAccountName: p.Config.WorkerServiceAccount,
		Resources:          ptr.To(WorkerResources(&p.Config.WorkerResources, obj.GetPipelineSpec().Resources)),
		TmpSize:            p.Config.WorkerTmpSize,
	})
	if err := p.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating cleanup Job: %w", err)
	}
	return nil
}

// release removes the finalizer, with an event saying what happened.
func (p *Pipeline) release(ctx context.Context, obj Object, eventType, reason, note string) error {
	if err := p.patchFinalizers(ctx, obj, func() { controllerutil.RemoveFinalizer(obj, Finalizer) }); err != nil {
		return client.IgnoreNotFound(err)
	}
	if p.Recorder != nil {
		p.Recorder.Eventf(obj, nil, eventType, reason, "Delete", "%s", redact.String(note))
	}
	return nil
}
