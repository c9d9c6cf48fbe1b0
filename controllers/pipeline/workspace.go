package pipeline

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/packline/packline/api/v1alpha1"
)

// ReasonWorkspaceConflict: a PVC of the workspace's name exists, and packline
// did not make it for this resource. The run neither mounts nor deletes it.
const ReasonWorkspaceConflict = "WorkspaceConflict"

// workspaceKey is where the run's workspace PVC is.
func (s *scope) workspaceKey() client.ObjectKey {
	return client.ObjectKey{Namespace: s.namespace(), Name: WorkspaceName(RunBase(s.owner, s.namespace()))}
}

// OwnsWorkspace reports whether pvc was made for owner o, by what a tenant
// cannot forge on a PVC it does not control:
//
//   - In o's namespace, a controller owner reference to o's UID. Labels are
//     no proof there: anyone who may create PVCs in the namespace writes
//     any label. An owner reference is writable too, but only by someone
//     who creates the PVC after o exists (the UID is assigned then) and
//     points it at o on purpose: a PVC made for anything else (another
//     app's data volume that happens to be named <o>-workspace) never
//     carries it. And whoever forges one controls that PVC already: what
//     packline then does to it (mount it, delete it) that principal could
//     do itself.
//   - In another namespace (the template namespace of an admin run, where
//     tenants create nothing), no owner reference can point back, so the
//     owner-uid and owner-namespace labels, which only admins and packline
//     write there.
//
// An HMAC annotation would prove no more: the forger in o's namespace
// could copy a valid one from o's real workspace of an earlier run.
func OwnsWorkspace(o Owner, pvc *corev1.PersistentVolumeClaim) bool {
	return ownsChild(o, pvc)
}

// ownsChild is OwnsWorkspace's test for any child (a Job too).
func ownsChild(o Owner, obj metav1.Object) bool {
	if obj.GetNamespace() == o.Namespace {
		ref := metav1.GetControllerOfNoCopy(obj)
		return ref != nil && string(ref.UID) == o.UID && ref.Kind == o.GVK.Kind && ref.APIVersion == o.GVK.GroupVersion().String()
	}
	return obj.GetLabels()[LabelOwnerUID] == o.UID && obj.GetLabels()[LabelOwnerNamespace] == o.Namespace
}

// workspaceCached reports whether the cache already holds this run's
// workspace, made for this owner by this instance: then ensureWorkspace has
// nothing to do. Without the check every reconcile of a run (each Job and
// pod update) sent a create that the API server refused with
// AlreadyExists, a full admission round trip each time.
func (p *Pipeline) workspaceCached(ctx context.Context, s *scope) bool {
	pvc := &corev1.PersistentVolumeClaim{}
	err := p.Client.Get(ctx, s.workspaceKey(), pvc)
	return err == nil && OwnsWorkspace(s.owner, pvc) && pvc.Labels[LabelInstance] == p.Config.Instance && pvc.DeletionTimestamp.IsZero()
}

// ensureWorkspace creates the workspace PVC while the run is in progress.
// It creates and never adopts: a PVC of the name that OwnsWorkspace does
// not accept stalls the run with WorkspaceConflict. It runs before the Job
// is created, never alongside: a Job mounts its workspace by name, so
// it may exist only once the PVC of that name is known to be the run's.
func (p *Pipeline) ensureWorkspace(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.status.Phase == v1alpha1.PhaseSucceeded || s.status.Phase == v1alpha1.PhaseFailed {
		return ctrl.Result{}, nil
	}
	params := p.workspaceParams(s)
	if p.dispatched(s) || p.workspaceCached(ctx, s) {
		// A dispatched Job brings its own workspace (DispatchedWorkspace).
		return ctrl.Result{}, nil
	}
	key := s.workspaceKey()
	err := p.Client.Create(ctx, BuildWorkspace(params))
	switch {
	case apierrors.IsNotFound(err) && s.remote():
		// The namespace itself is missing (the manager's
		// --template-namespace); say so rather than fail every reconcile.
		return ctrl.Result{}, &Waiting{Reason: ReasonNamespaceMissing, RetryAfter: p.Config.BackoffCap,
			Message: fmt.Sprintf("namespace %s, where this run must go (the manager's --template-namespace), does not exist: a platform admin must create it", params.Namespace)}
	case apierrors.IsAlreadyExists(err):
		err := p.existingWorkspace(ctx, s, key)
		var se *StepError
		if errors.As(err, &se) && se.Reason == ReasonWorkspaceConflict {
			// Not a reconcile error: nothing packline watches says when the
			// PVC is gone, so look again after the longest backoff, rather
			// than after an error backoff that grows to a quarter hour.
			p.reportStepError(s, err)
			s.stop = true
			return ctrl.Result{RequeueAfter: p.Config.BackoffCap}, nil
		}
		return ctrl.Result{}, err
	case err != nil:
		return ctrl.Result{}, &StepError{Reason: ReasonWorkspaceRejected, Err: fmt.Errorf("creating workspace PVC %s/%s: %w", key.Namespace, key.Name, err)}
	}
	return ctrl.Result{}, nil
}

// existingWorkspace decides about a workspace whose create found the name
// taken: the run goes on only with a PVC made for its owner (relabelled for
// this instance if the owner's previous instance made it, see takeOver).
// It reads past the cache, which holds only PVCs packline labelled.
func (p *Pipeline) existingWorkspace(ctx context.Context, s *scope, key client.ObjectKey) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := p.APIReader.Get(ctx, key, pvc); err != nil {
		// Gone since the create (NotFound): the next reconcile creates it;
		// the Job must not be made before then.
		return fmt.Errorf("reading existing workspace PVC %s/%s: %w", key.Namespace, key.Name, err)
	}
	if !OwnsWorkspace(s.owner, pvc) {
		return workspaceConflict(s, pvc)
	}
	if !pvc.DeletionTimestamp.IsZero() {
		// The previous run's, being freed: the pod waits for it to go, and
		// the next reconcile creates the new one.
		return nil
	}
	return p.takeOver(ctx, pvc)
}

// workspaceConflict is the stalled run's error: it names the PVC, which
// is in a namespace the reader of the message can see (the owner's), or
// the template namespace (then it says only that). A PVC whose controller
// is a deleted predecessor of the same kind and name is the garbage
// collector's to remove: the run waits for it (Reconciling, not Stalled),
// still neither mounting nor deleting it.
func workspaceConflict(s *scope, pvc *corev1.PersistentVolumeClaim) error {
	kind := s.owner.GVK.Kind
	if ref := metav1.GetControllerOfNoCopy(pvc); ref != nil && ref.Kind == kind && ref.Name == s.owner.Name &&
		ref.APIVersion == s.owner.GVK.GroupVersion().String() {
		return &StepError{Reason: ReasonWorkspaceConflict, Err: fmt.Errorf(
			"workspace PVC %s/%s belongs to an earlier %s of the same name (uid %s); waiting for it to be garbage-collected",
			pvc.Namespace, pvc.Name, kind, ref.UID)}
	}
	if s.remote() {
		return &StepError{Reason: ReasonWorkspaceConflict, Stall: true, Err: fmt.Errorf(
			"workspace PVC %s in the template namespace exists but was not made for this %s: packline neither mounts nor deletes it; a platform admin must remove it",
			pvc.Name, kind)}
	}
	return &StepError{Reason: ReasonWorkspaceConflict, Stall: true, Err: fmt.Errorf(
		"workspace PVC %s/%s exists but was not made for this %s (it has no controller owner reference to it): packline neither mounts nor deletes a PVC it did not create; delete or rename that PVC, or give this %s another name",
		pvc.Namespace, pvc.Name, kind, kind)}
}

// ownWorkspace returns the run's workspace if it exists and OwnsWorkspace
// accepts it, else nil: from the cache, else (a previous instance's, which
// this instance's cache does not hold) from the API server.
func (p *Pipeline) ownWorkspace(ctx context.Context, s *scope) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	err := p.Client.Get(ctx, s.workspaceKey(), pvc)
	if apierrors.IsNotFound(err) {
		err = p.APIReader.Get(ctx, s.workspaceKey(), pvc)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !OwnsWorkspace(s.owner, pvc) || !pvc.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	return pvc, nil
}

// deleteWorkspace deletes a PVC that OwnsWorkspace accepted, with a UID
// precondition: if the name was freed and taken by another PVC since the
// check, the API server refuses, and that PVC stays.
func (p *Pipeline) deleteWorkspace(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	err := p.Client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// releaseWorkspace frees the workspace once the run succeeded, unless the
// reclaim policy is Retain. A failed run keeps it, for inspection and for
// resumable downloads on the next run. It runs at the end of every
// reconcile, so a failed delete is retried even after status says Succeeded.
func (p *Pipeline) releaseWorkspace(ctx context.Context, s *scope) error {
	if s.status.Phase != v1alpha1.PhaseSucceeded {
		return nil
	}
	if ws := p.runSpec(s).Workspace; ws != nil && ws.ReclaimPolicy == v1alpha1.ReclaimRetain {
		return nil
	}
	pvc, err := p.ownWorkspace(ctx, s)
	if err != nil || pvc == nil {
		return err
	}
	if err := p.deleteWorkspace(ctx, pvc); err != nil {
		return fmt.Errorf("freeing workspace: %w", err)
	}
	return nil
}

// loadWorkspaces finds the owner's workspace PVCs outside the run's
// namespace: left behind when a template turned private or public.
func (p *Pipeline) loadWorkspaces(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.blocked != nil {
		// No run, so no namespace to keep a workspace in: leave them.
		return ctrl.Result{}, nil
	}
	var list corev1.PersistentVolumeClaimList
	if err := p.Client.List(ctx, &list, client.MatchingFields{IndexOwnerUID: s.owner.UID}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing workspaces: %w", err)
	}
	for _, pvc := range list.Items {
		// Before RunBase, a run in another namespace named its workspace
		// after its owner alone: those go too.
		named := pvc.Name == WorkspaceName(RunBase(s.owner, pvc.Namespace)) || pvc.Name == WorkspaceName(s.owner.Name)
		if named && pvc.Namespace != s.namespace() && OwnsWorkspace(s.owner, &pvc) && pvc.DeletionTimestamp.IsZero() {
			s.staleWorkspaces = append(s.staleWorkspaces, pvc)
		}
	}
	return ctrl.Result{}, nil
}

// deleteStaleWorkspaces deletes the workspaces loadWorkspaces found.
func (p *Pipeline) deleteStaleWorkspaces(ctx context.Context, s *scope) (ctrl.Result, error) {
	for i := range s.staleWorkspaces {
		pvc := &s.staleWorkspaces[i]
		if err := p.deleteWorkspace(ctx, pvc); err != nil {
			return ctrl.Result{}, fmt.Errorf("deleting workspace %s/%s: %w", pvc.Namespace, pvc.Name, err)
		}
		logf.FromContext(ctx).Info("deleted workspace of an earlier run in another namespace", "namespace", pvc.Namespace)
	}
	return ctrl.Result{}, nil
}
