package pipeline

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	. "github.com/packline/packline/test/wrappers"
)

// OwnPods keeps only the pods the Job controls, by UID: a tenant's pod
// with the Job's labels (and a termination message of its choice) is not
// read, whatever else it copies.
func TestOwnPods(t *testing.T) {
	job := MakeJob("j", "ml").Obj()
	job.UID = "job-uid"
	pod := func(name string, refs ...metav1.OwnerReference) corev1.Pod {
		p := MakePod(name, "ml", "j").Labels(map[string]string{batchv1.ControllerUidLabel: "job-uid"}).Obj()
		p.OwnerReferences = refs
		return *p
	}
	ref := func(uid types.UID, mut func(*metav1.OwnerReference)) metav1.OwnerReference {
		r := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: uid, Controller: ptr.To(true)}
		if mut != nil {
			mut(&r)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{"the Job's own pod", []corev1.Pod{pod("own", ref("job-uid", nil))}, []string{"own"}},
		{"labels only", []corev1.Pod{pod("forged")}, nil},
		{"controller reference to another Job of the name", []corev1.Pod{pod("forged", ref("earlier-uid", nil))}, nil},
		{"owner reference to the Job, not as controller", []corev1.Pod{pod("forged", ref("job-uid", func(r *metav1.OwnerReference) { r.Controller = nil }))}, nil},
		{"controller reference with the UID but another kind", []corev1.Pod{pod("forged", ref("job-uid", func(r *metav1.OwnerReference) { r.Kind = "ReplicaSet"; r.APIVersion = "apps/v1" }))}, nil},
		{"own and forged together", []corev1.Pod{pod("forged"), pod("own", ref("job-uid", nil))}, []string{"own"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range OwnPods(job, tc.pods) {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("OwnPods (-want +got):\n%s", diff)
			}
		})
	}
}

// ours accepts a Job in the owner's namespace only with a controller
// reference to the owner: labels a tenant writes on its own Job are no
// proof (see OwnsWorkspace).
func TestOursJobs(t *testing.T) {
	s := &scope{owner: owner}
	made := BuildJob(jobParams(nil))
	remote := BuildJob(jobParams(func(p *JobParams) { p.Namespace = "packline-system" }))
	labelsOnly := made.DeepCopy()
	labelsOnly.OwnerReferences = nil
	otherTenant := remote.DeepCopy()
	otherTenant.Labels[LabelOwnerNamespace] = "team-b"
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		want bool
	}{
		{"made for the owner", made, true},
		{"the owner's labels, no controller reference", labelsOnly, false},
		{"template namespace, labelled for the owner", remote, true},
		{"template namespace, another tenant's", otherTenant, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, s.ours(tc.job)); diff != "" {
				t.Errorf("ours (-want +got):\n%s", diff)
			}
		})
	}
}
