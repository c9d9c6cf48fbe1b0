package pipeline

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	. "github.com/packline/packline/test/wrappers"
)

const sigDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// recordSigning: what a finished attempt leaves in status (PushedBy, not
// status, tells the next attempt what was pushed).
func TestRecordSigning(t *testing.T) {
	pushed := &workerv1.Pushed{Digest: digest, Reference: "r.example.com/m@" + digest, SourceRevision: "abc"}
	type want struct {
		signature, digest string
		signed            metav1.ConditionStatus // "" means no condition
		reason            string
	}
	for _, tc := range []struct {
		name  string
		phase v1alpha1.Phase
		o     Observation
		want  want
	}{
		{name: "signed", phase: v1alpha1.PhaseSucceeded,
			o:    Observation{State: StateSucceeded, Result: &workerv1.Result{Digest: digest, Reference: "r@" + digest, Signature: sigDigest, Attestation: sigDigest}},
			want: want{signature: sigDigest, signed: metav1.ConditionTrue, reason: "Signed"}},
		{name: "unsigned run", phase: v1alpha1.PhaseSucceeded,
			o: Observation{State: StateSucceeded, Result: &workerv1.Result{Digest: digest, Reference: "r@" + digest}}},
		{name: "signature push failed after the push", phase: v1alpha1.PhaseRetrying,
			o:    Observation{State: StateFailed, Reason: workerv1.ReasonSignaturePush, Message: "registry went away", Pushed: pushed},
			want: want{digest: digest, signed: metav1.ConditionFalse, reason: workerv1.ReasonSignaturePush}},
		{name: "wrong password before anything was pushed", phase: v1alpha1.PhaseFailed,
			o:    Observation{State: StateFailed, Reason: workerv1.ReasonSigningKeyPassword, Message: "cannot decrypt", Permanent: true},
			want: want{signed: metav1.ConditionFalse, reason: workerv1.ReasonSigningKeyPassword}},
		{name: "other failure", phase: v1alpha1.PhaseRetrying,
			o: Observation{State: StateFailed, Reason: workerv1.ReasonRegistryFailed, Message: "503"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &v1alpha1.PipelineStatus{}
			recordSigning(st, tc.o)
			st.Phase = tc.phase
			got := want{signature: st.Signature, digest: st.Digest}
			if tc.o.State == StateSucceeded {
				got.digest = "" // apply records a success's digest, not recordSigning
			}
			if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSigned); c != nil {
				got.signed, got.reason = c.Status, c.Reason
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// PushedBy reads what a failed attempt pushed from the termination message
// of the Job's own pod, never from status (a tenant writes status.digest
// with claims/status or artifacts/status) and never from a pod that only
// carries the Job's name label.
func TestPushedBy(t *testing.T) {
	pushed := &workerv1.Pushed{Digest: digest, Reference: "r.example.com/m@" + digest, SourceRevision: "abc"}
	msg := fmt.Sprintf(`{"error":{"reason":"SignaturePushFailed","message":"attaching failed","permanent":false,"pushed":{"digest":%q,"reference":%q,"sourceRevision":"abc"}}}`,
		pushed.Digest, pushed.Reference)
	failed := func() *batchv1.Job {
		j := MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj()
		j.UID = "job-uid"
		return j
	}
	ownPod := func(uid types.UID, message string) corev1.Pod {
		p := MakePod("p", "ns", "j").Terminated(1, message).Obj()
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: uid, Controller: ptrBool(true)}}
		return *p
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		pods []corev1.Pod
		want *workerv1.Pushed
	}{
		{"the Job's own pod reports the push", failed(), []corev1.Pod{ownPod("job-uid", msg)}, pushed},
		{"a pod that only carries the Job's name label", failed(), []corev1.Pod{ownPod("someone-else", msg)}, nil},
		{"a pod with no controller", failed(), []corev1.Pod{*MakePod("p", "ns", "j").Terminated(1, msg).Obj()}, nil},
		{"failed before pushing", failed(), []corev1.Pod{ownPod("job-uid", retryableMsg)}, nil},
		{"no pod left", failed(), nil, nil},
		{"still running", func() *batchv1.Job { j := MakeJob("j", "ns").Active().Obj(); j.UID = "job-uid"; return j }(),
			[]corev1.Pod{ownPod("job-uid", msg)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PushedBy(tc.job, tc.pods)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The Job tells the worker what the provenance records, and which digest
// an earlier attempt pushed.
func TestBuildJobSigningEnv(t *testing.T) {
	env := func(job []corev1.EnvVar) map[string]string {
		m := map[string]string{}
		for _, e := range job {
			m[e.Name] = e.Value
		}
		return m
	}
	plain := env(BuildJob(jobParams(nil)).Spec.Template.Spec.Containers[0].Env)
	if plain[workerv1.EnvWorkerImage] != "worker:v1" || plain[workerv1.EnvInvocation] == "" {
		t.Errorf("provenance env: image %q invocation %q", plain[workerv1.EnvWorkerImage], plain[workerv1.EnvInvocation])
	}
	if _, ok := plain[workerv1.EnvPushedDigest]; ok {
		t.Errorf("%s set on a first attempt", workerv1.EnvPushedDigest)
	}
	resumed := env(BuildJob(jobParams(func(p *JobParams) {
		p.Pushed = &workerv1.Pushed{Digest: digest, Reference: "r@" + digest, SourceRevision: "abc"}
	})).Spec.Template.Spec.Containers[0].Env)
	if resumed[workerv1.EnvPushedDigest] != digest || resumed[workerv1.EnvPushedRevision] != "abc" {
		t.Errorf("resumed attempt env: %v", resumed)
	}
}

// The signing key Secret is mounted by its two keys only, optional, so a
// missing Secret is the worker's SigningKeyMissing, not a stuck pod.
func TestSigningKeyMount(t *testing.T) {
	var m Mounts
	m.SigningKey("cosign")
	want := corev1.Volume{Name: "signing-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "cosign", DefaultMode: ptrMode(0o440), Optional: ptrBool(true),
		Items: []corev1.KeyToPath{{Key: "cosign.key", Path: "cosign.key"}, {Key: "cosign.password", Path: "cosign.password"}},
	}}}
	if diff := cmp.Diff([]corev1.Volume{want}, m.Volumes); diff != "" {
		t.Errorf("volume (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{{Name: "signing-key", MountPath: workerv1.SigningKeyDir, ReadOnly: true}}, m.Mounts); diff != "" {
		t.Errorf("mount (-want +got):\n%s", diff)
	}
}

func ptrBool(b bool) *bool { return &b }
