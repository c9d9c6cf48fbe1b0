package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/packline/packline/api/redact"
	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// Finalizer holds a resource with deletionPolicy Delete until its cleanup
// Job has removed the pushed artifact (or given up).
const Finalizer = "packline.dev/delete-artifact"

// cleanupInputs labels cleanup Jobs apart from run Jobs.
const cleanupInputs = "cleanup"

// cleanupTimeout bounds a cleanup attempt: deleting a manifest takes
// seconds, and a hung attempt must not hold a deletion for spec.timeout.
const cleanupTimeout = 10 * time.Minute

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
	owner := Owner{GVK: gvk, Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: string(obj.GetUID()), Instance: p.Config.Instance}
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
		// A cache that has not yet seen the finalizer go (after a give-up
		// deleted the last cleanup Job) must not start the cleanup again.
		if live, err := p.stillHeld(ctx, obj); !live || err != nil {
			return ctrl.Result{}, err
		}
		return p.startCleanup(ctx, obj, owner, ns, target, 1)
	}
	o, _, err := p.observeJob(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if o.State == StatePending {
		// Whatever holds the pod (a missing Secret or PVC, a volume it
		// cannot mount, an image, no node), the deletion waits at most
		// CleanupGiveUp; giveUpIfStuck requeues until then.
		return p.giveUpIfStuck(ctx, obj, job, o, ns != owner.Namespace, target)
	}
	// The same state machine as the run's; the cleanup's state is its Jobs,
	// so it keeps no phase, and its backoff counts from the Job's failure.
	next := Transition(Run{Attempts: attempt}, Observed(o), p.retryPolicy(obj.GetPipelineSpec()))
	switch next.Action {
	case ActionSucceed:
		return ctrl.Result{}, p.release(ctx, obj, corev1.EventTypeNormal, "ArtifactDeleted", "deleted "+st.Reference)
	case ActionFail:
		return ctrl.Result{}, p.release(ctx, obj, corev1.EventTypeWarning, "CleanupFailed",
			fmt.Sprintf("could not delete %s (%s: %s); it is left in the registry", st.Reference, o.Reason, o.Message))
	case ActionRetry:
		if wait := Until(p.now(), RetryAt(FailedAt(job, p.now()), next.Wait)); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return p.startCleanup(ctx, obj, owner, ns, target, attempt+1)
	}
	return ctrl.Result{}, nil
}

// startCleanup creates a cleanup Job. When the API server refuses it for
// good (a namespace being deleted, a quota, an admission policy), waiting
// would hold the owner forever, so it warns and lets go instead.
func (p *Pipeline) startCleanup(ctx context.Context, obj Object, owner Owner, ns string, target v1alpha1.Target, attempt int32) (ctrl.Result, error) {
	err := p.createCleanupJob(ctx, owner, ns, target, obj.(Targeted), attempt)
	if err != nil && refused(err) {
		return ctrl.Result{}, p.release(ctx, obj, corev1.EventTypeWarning, "CleanupFailed",
			fmt.Sprintf("could not delete %s: %v; it is left in the registry", obj.GetPipelineStatus().Reference, err))
	}
	return ctrl.Result{}, err
}

// stillHeld reads obj past the cache: does it still exist with Finalizer?
func (p *Pipeline) stillHeld(ctx context.Context, obj Object) (bool, error) {
	live := obj.DeepCopyObject().(client.Object)
	if err := p.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return controllerutil.ContainsFinalizer(live, Finalizer), nil
}

// refused is an API error that retrying the same request cannot fix.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// giveUpIfStuck lets the owner go once its cleanup pod has been unable to
// start for CleanupGiveUp: the kubelet would retry until the Job's deadline
// (hours), and a deletion must not wait on that. Deleting a tag takes
// seconds once the pod runs, so any pod not started by then is stuck,
// whether the kubelet says why (a missing Secret, an image), the scheduler
// does (no node, a missing PVC), or only the pod's events do (a volume it
// cannot mount). remote: the pod runs in the template namespace with an
// admin's Secrets, whose names the owner's event must not show.
func (p *Pipeline) giveUpIfStuck(ctx context.Context, obj Object, job *batchv1.Job, o Observation, remote bool, target v1alpha1.Target) (ctrl.Result, error) {
	if wait := job.CreationTimestamp.Add(p.Config.CleanupGiveUp).Sub(p.now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	var m Mounts
	m.Target(target, "")
	if ref := m.MountSource(o); ref != "" {
		if remote {
			o.Message = fmt.Sprintf("the cleanup pod cannot mount volume %q", blockedVolume(o, m))
		} else {
			o.Message += "; it waits for " + ref
		}
	}
	if err := p.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("deleting stuck cleanup Job: %w", err)
	}
	return ctrl.Result{}, p.release(ctx, obj, corev1.EventTypeWarning, "CleanupFailed",
		fmt.Sprintf("could not delete %s: the cleanup pod did not start within %s (%s: %s); it is left in the registry",
			obj.GetPipelineStatus().Reference, p.Config.CleanupGiveUp, o.Reason, o.Message))
}

func (p *Pipeline) createCleanupJob(ctx context.Context, owner Owner, ns string, push v1alpha1.Target, obj Targeted, attempt int32) error {
	st := obj.GetPipelineStatus()
	var m Mounts
	target := m.Target(push, "")
	target.Tag = st.Tag
	doc, err := workerv1.EncodeSpec(workerv1.Delete{Reference: st.Reference, Target: target})
	if err != nil {
		return err
	}
	resources := obj.GetPipelineSpec().Resources
	if ns != "" && ns != owner.Namespace {
		// An admin run's cleanup: the platform's quota (see BoundAdminSpec).
		resources = capResources(resources, p.Config.WorkerResources)
	}
	return CreateJob(ctx, p.Client, p.Config.NewJob(JobCleanup, JobParams{
		Owner: owner, Namespace: ns, Generation: obj.GetGeneration(), Attempt: attempt, InputsHash: cleanupInputs,
		SpecJSON: doc, Env: m.Env, Volumes: m.Volumes, Mounts: m.Mounts,
	}, resources))
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
