package pipeline

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const templateNS = "packline-system"

// madeJob is a Job as BuildJob makes it and the API server returns it.
func madeJob(o Owner, ns string) *batchv1.Job {
	j := BuildJob(JobParams{Owner: o, Namespace: ns, Generation: 1, Attempt: 1, InputsHash: "abc", Image: "w", Command: "artifact",
		SpecJSON: `{"big":"spec"}`, QueueName: "q", Timeout: time.Hour})
	j.UID, j.ResourceVersion = "job-uid", "7"
	j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate}}
	j.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "keep": "me"}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended"}}
	return j
}

func TestJobTransform(t *testing.T) {
	job, _, _ := ChildTransforms(templateNS)
	remote := owner
	trimmed := func(j *batchv1.Job) *batchv1.Job {
		out := j.DeepCopy()
		out.ManagedFields = nil
		out.Annotations = map[string]string{"keep": "me"}
		out.Spec = batchv1.JobSpec{Suspend: ptr.To(true)}
		return out
	}
	stubOf := func(j *batchv1.Job) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: j.Namespace, UID: j.UID, ResourceVersion: j.ResourceVersion}}
	}
	cases := []struct {
		name string
		in   func() *batchv1.Job
		want func(*batchv1.Job) *batchv1.Job
	}{
		{"made by the pipeline: trimmed", func() *batchv1.Job { return madeJob(owner, "") }, trimmed},
		{"in the template namespace, no owner reference: trimmed", func() *batchv1.Job { return madeJob(remote, templateNS) }, trimmed},
		{"labels copied, no owner reference: stub", func() *batchv1.Job {
			j := madeJob(owner, "")
			j.OwnerReferences = nil
			return j
		}, stubOf},
		{"owner-namespace label outside the template namespace: stub", func() *batchv1.Job {
			j := madeJob(remote, templateNS)
			j.Namespace = "tenant"
			return j
		}, stubOf},
		{"owner reference to another owner than the labels say: stub", func() *batchv1.Job {
			j := madeJob(owner, "")
			j.OwnerReferences[0].UID = "someone-else"
			return j
		}, stubOf},
		{"owner reference of another kind: stub", func() *batchv1.Job {
			j := madeJob(owner, "")
			j.OwnerReferences[0].APIVersion = "apps/v1"
			return j
		}, stubOf},
		{"not controller: stub", func() *batchv1.Job {
			j := madeJob(owner, "")
			j.OwnerReferences[0].Controller = nil
			return j
		}, stubOf},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			want := tc.want(in)
			got, err := job(in)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("transform (-want +got):\n%s", d)
			}
			// client-go may apply a transform to its own output.
			again, _ := job(got)
			if d := cmp.Diff(want, again); d != "" {
				t.Errorf("not idempotent (-want +got):\n%s", d)
			}
		})
	}
}

func TestPodTransform(t *testing.T) {
	_, pod, _ := ChildTransforms(templateNS)
	made := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "j-x", Namespace: "ml", UID: "pod-uid", ResourceVersion: "3",
				Labels:          map[string]string{LabelOwnerUID: owner.UID, batchv1.JobNameLabel: "j", batchv1.ControllerUidLabel: "job-uid"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: types.UID("job-uid"), Controller: ptr.To(true)}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "w", Env: []corev1.EnvVar{{Name: "SPEC", Value: "big"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, HostIP: "10.0.0.1", Reason: "Evicted", Message: `Usage of EmptyDir volume "tmp" exceeds the limit "4Mi". `,
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", Image: "w", ImageID: "sha256:x", ContainerID: "c://1",
					Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("12Mi")}},
					State:     corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: `{"error":{}}`}}}}},
		}
	}
	trimmed := func(p *corev1.Pod) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, Labels: p.Labels, OwnerReferences: p.OwnerReferences},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: p.Status.Reason, Message: p.Status.Message, Conditions: p.Status.Conditions,
				ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", State: p.Status.ContainerStatuses[0].State, Resources: p.Status.ContainerStatuses[0].Resources}}},
		}
	}
	stubOf := func(p *corev1.Pod) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion}}
	}
	cases := []struct {
		name string
		in   func() *corev1.Pod
		want func(*corev1.Pod) *corev1.Pod
	}{
		{"the Job controller's: trimmed", made, trimmed},
		{"labels copied onto a bare pod: stub", func() *corev1.Pod { p := made(); p.OwnerReferences = nil; return p }, stubOf},
		{"controlled by another Job than its label: stub", func() *corev1.Pod { p := made(); p.OwnerReferences[0].Name = "other"; return p }, stubOf},
		{"controller-uid label disagrees: stub", func() *corev1.Pod { p := made(); p.Labels[batchv1.ControllerUidLabel] = "x"; return p }, stubOf},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			want := tc.want(in)
			got, _ := pod(in)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("transform (-want +got):\n%s", d)
			}
			again, _ := pod(got)
			if d := cmp.Diff(want, again); d != "" {
				t.Errorf("not idempotent (-want +got):\n%s", d)
			}
		})
	}
}

func TestWorkspaceTransform(t *testing.T) {
	_, _, pvc := ChildTransforms(templateNS)
	made := func() *corev1.PersistentVolumeClaim {
		c := BuildWorkspace(WorkspaceParams{Owner: owner})
		c.UID, c.ResourceVersion = "pvc-uid", "9"
		c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "manager"}}
		c.Status.Phase = corev1.ClaimBound
		return c
	}
	c := made()
	got, _ := pvc(c)
	want := made()
	want.ManagedFields, want.Spec, want.Status = nil, corev1.PersistentVolumeClaimSpec{}, corev1.PersistentVolumeClaimStatus{}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("own workspace (-want +got):\n%s", d)
	}
	copied := made()
	copied.OwnerReferences = nil
	got, _ = pvc(copied)
	if d := cmp.Diff(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, UID: "pvc-uid", ResourceVersion: "9"}}, got); d != "" {
		t.Errorf("copied labels (-want +got):\n%s", d)
	}
}

func TestTrimOwned(t *testing.T) {
	in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x",
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}, Data: map[string]string{"k": "v"}}
	got, _ := TrimOwned(in)
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{"a": "b"}}, Data: map[string]string{"k": "v"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
