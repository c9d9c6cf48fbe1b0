package pipeline

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// workspaceCached reports whether the cache already holds this run's
// workspace, made for this owner: then ensureWorkspace has nothing to do.
// Without the check every reconcile of a run (each Job and pod update) sent
// a create that the API server refused with AlreadyExists, a full admission
// round trip each time. A cache that lags still gets AlreadyExists.
func (p *Pipeline) workspaceCached(ctx context.Context, s *scope) bool {
	pvc := &corev1.PersistentVolumeClaim{}
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace(), Name: WorkspaceName(s.owner.Name)}, pvc)
	return err == nil && pvc.Labels[LabelOwnerUID] == s.owner.UID && pvc.Labels[LabelInstance] == p.Config.Instance && pvc.DeletionTimestamp.IsZero()
}

// startWorkspace creates the workspace PVC while the reconcile goes on to
// create the Job; finish waits for it before the status patch. The two
// creates are independent (the Job's pod simply waits for its claim), so a
// new run costs two round trips to the API server (both creates, then the
// status patch) instead of three, which is most of a reconcile's time
// when thousands of resources arrive at once. A refused workspace is still
// reported in status (finish), and retried by the next reconcile, which
// then finds no workspace in the cache and creates it in line.
func (p *Pipeline) startWorkspace(ctx context.Context, s *scope, params WorkspaceParams) {
	pvc := BuildWorkspace(params)
	uid := s.owner.UID
	done := make(chan error, 1)
	go func() {
		err := p.Client.Create(ctx, pvc)
		switch {
		case apierrors.IsAlreadyExists(err):
			err = p.takeOverWorkspace(ctx, client.ObjectKeyFromObject(pvc), uid)
		case err != nil:
			err = &StepError{Reason: ReasonWorkspaceRejected, Err: fmt.Errorf("creating workspace PVC %s/%s: %w", pvc.Namespace, pvc.Name, err)}
		}
		done <- err
	}()
	s.workspace = done
}

// awaitWorkspace returns the result of startWorkspace, if one was started.
func (s *scope) awaitWorkspace() error {
	if s.workspace == nil {
		return nil
	}
	err := <-s.workspace
	s.workspace = nil
	return err
}
