package pipeline

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A child in another namespace than its owner's carries no owner reference
// (the API server would accept it, but the garbage collector treats a
// cross-namespace owner reference as absent and could delete the child at
// once) and is labelled with the owner's namespace instead, Job, pod
// template and PVC alike. In the owner's namespace nothing changes.
func TestChildrenInAnotherNamespace(t *testing.T) {
	cases := []struct {
		name, ns      string
		wantNamespace string
		wantRef       bool
	}{
		{"owner's namespace by default", "", "ml", true},
		{"owner's namespace named", "ml", "ml", true},
		{"template namespace", "packline-system", "packline-system", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := BuildJob(jobParams(func(p *JobParams) { p.Namespace = tc.ns }))
			pvc := BuildWorkspace(WorkspaceParams{Owner: owner, Namespace: tc.ns})
			for what, o := range map[string]metav1.Object{"Job": job, "PVC": pvc} {
				if o.GetNamespace() != tc.wantNamespace {
					t.Errorf("%s namespace = %q, want %q", what, o.GetNamespace(), tc.wantNamespace)
				}
				if got := len(o.GetOwnerReferences()) == 1; got != tc.wantRef {
					t.Errorf("%s owner references = %+v, want one: %v", what, o.GetOwnerReferences(), tc.wantRef)
				}
				if o.GetLabels()[LabelOwnerUID] != owner.UID || o.GetLabels()[LabelOwnerName] != owner.Name {
					t.Errorf("%s lost its owner labels: %v", what, o.GetLabels())
				}
			}
			wantLabel := ""
			if !tc.wantRef {
				wantLabel = "ml"
			}
			for what, labels := range map[string]map[string]string{"Job": job.Labels, "pod template": job.Spec.Template.Labels, "PVC": pvc.Labels} {
				if got := labels[LabelOwnerNamespace]; got != wantLabel {
					t.Errorf("%s %s label = %q, want %q", what, LabelOwnerNamespace, got, wantLabel)
				}
			}
			if claim := job.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim; claim == nil || claim.ClaimName != pvc.Name {
				t.Errorf("Job mounts workspace %+v, want %s (same namespace as the Job)", claim, pvc.Name)
			}
		})
	}
}
