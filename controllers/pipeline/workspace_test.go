package pipeline

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// OwnsWorkspace accepts only a PVC packline made for the owner: labels a
// tenant can write are no proof in the owner's namespace.
func TestOwnsWorkspace(t *testing.T) {
	made := BuildWorkspace(WorkspaceParams{Owner: owner})
	remote := BuildWorkspace(WorkspaceParams{Owner: owner, Namespace: "packline-system"})
	withRefs := func(pvc *corev1.PersistentVolumeClaim, refs ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
		pvc = pvc.DeepCopy()
		pvc.OwnerReferences = refs
		return pvc
	}
	ref := owner.ref()
	notController := ref
	notController.Controller = ptr.To(false)
	otherUID := ref
	otherUID.UID = "someone-else"
	otherKind := ref
	otherKind.Kind = "ConfigMap"
	foreignRemote := remote.DeepCopy()
	foreignRemote.Labels[LabelOwnerNamespace] = "team-b"
	for _, tc := range []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want bool
	}{
		{"made for the owner", made, true},
		{"a foreign PVC of the name, no labels", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: made.Name, Namespace: "ml"}}, false},
		{"a foreign PVC with copied labels", withRefs(made), false},
		{"owner reference that is not the controller", withRefs(made, notController), false},
		{"controller reference to another UID", withRefs(made, otherUID), false},
		{"controller reference to another kind with the UID", withRefs(made, otherKind), false},
		{"template namespace, labelled for the owner", remote, true},
		{"template namespace, another tenant's", foreignRemote, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, OwnsWorkspace(owner, tc.pvc)); diff != "" {
				t.Errorf("OwnsWorkspace (-want +got):\n%s", diff)
			}
		})
	}
}
