package pipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	workerv1 "github.com/packline/packline/api/worker/v1"
	. "github.com/packline/packline/test/wrappers"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

const retryableMsg = `{"error":{"reason":"RegistryUnavailable","message":"503","permanent":false}}`

var okResult = fmt.Sprintf(`{"digest":%q,"reference":"r.example.com/m@%s","sourceRevision":"abc"}`, digest, digest)

func TestObserve(t *testing.T) {
	pod := func() *PodWrapper { return MakePod("p", "ns", "j") }
	cases := []struct {
		name string
		job  *batchv1.Job
		pods []corev1.Pod
		want Observation
	}{
		{"no job", nil, nil, Observation{State: StateNoJob}},
		{"suspended by kueue", MakeJob("j", "ns").Suspend(true).Obj(), nil,
			Observation{State: StateQueued, Reason: ReasonQueued}},
		{"no pod yet", MakeJob("j", "ns").Suspend(false).Obj(), nil,
			Observation{State: StatePending, Reason: ReasonWaitingForPod}},
		{"image pull backoff", MakeJob("j", "ns").Active().Obj(),
			[]corev1.Pod{*pod().Waiting("ImagePullBackOff", `Back-off pulling image "worker"`).Obj()},
			Observation{State: StatePending, Reason: "ImagePullBackOff"}},
		{"missing secret", MakeJob("j", "ns").Active().Obj(),
			[]corev1.Pod{*pod().Waiting(ReasonConfigError, `secret "push" not found`).Obj()},
			Observation{State: StatePending, Reason: ReasonConfigError}},
		{"unschedulable", MakeJob("j", "ns").Active().Obj(),
			[]corev1.Pod{*pod().Unschedulable("0/3 nodes are available: 3 Insufficient memory.").Obj()},
			Observation{State: StatePending, Reason: ReasonUnschedulable}},
		{"running", MakeJob("j", "ns").Active().Obj(), []corev1.Pod{*pod().Running().Obj()},
			Observation{State: StateRunning, Reason: ReasonRunning}},
		{"pod succeeded, Job not yet updated: the pod's result counts", MakeJob("j", "ns").Active().Obj(), []corev1.Pod{*pod().Terminated(0, okResult).Obj()},
			Observation{State: StateSucceeded, Reason: "Succeeded", Result: &workerv1.Result{
				Digest: digest, Reference: "r.example.com/m@" + digest, SourceRevision: "abc"}}},
		{"pod succeeded without a valid result, Job not yet updated: wait for the Job", MakeJob("j", "ns").Active().Obj(), []corev1.Pod{*pod().Terminated(0, "garbage").Obj()},
			Observation{State: StateRunning, Reason: ReasonRunning}},
		{"pod failed, Job not yet updated: wait for the Job", MakeJob("j", "ns").Active().Obj(), []corev1.Pod{*pod().Terminated(1, retryableMsg).Obj()},
			Observation{State: StateRunning, Reason: ReasonRunning}},
		{"succeeded with result", MakeJob("j", "ns").Complete().Obj(), []corev1.Pod{*pod().Terminated(0, okResult).Obj()},
			Observation{State: StateSucceeded, Reason: "Succeeded", Result: &workerv1.Result{
				Digest: digest, Reference: "r.example.com/m@" + digest, SourceRevision: "abc"}}},
		{"succeeded without result", MakeJob("j", "ns").Complete().Obj(), []corev1.Pod{*pod().Terminated(0, "").Obj()},
			Observation{State: StateFailed, Reason: ReasonInvalidResult, Permanent: true}},
		{"succeeded with malformed result", MakeJob("j", "ns").Complete().Obj(), []corev1.Pod{*pod().Terminated(0, "pushed sha256:abc").Obj()},
			Observation{State: StateFailed, Reason: ReasonInvalidResult, Permanent: true}},
		{"succeeded but pod gone", MakeJob("j", "ns").Complete().Obj(), nil,
			Observation{State: StateFailed, Reason: ReasonInvalidResult, Permanent: true}},
		{"failed permanent result", MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj(),
			[]corev1.Pod{*pod().Terminated(1, `{"error":{"reason":"RegistryAuthDenied","message":"401","permanent":true}}`).Obj()},
			Observation{State: StateFailed, Reason: "RegistryAuthDenied", Permanent: true}},
		{"failed retryable result", MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj(),
			[]corev1.Pod{*pod().Terminated(1, `{"error":{"reason":"RegistryUnavailable","message":"503","permanent":false}}`).Obj()},
			Observation{State: StateFailed, Reason: "RegistryUnavailable"}},
		{"failed crash without result", MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj(),
			[]corev1.Pod{*pod().Terminated(137, "").Obj()},
			Observation{State: StateFailed, Reason: ReasonWorkerCrashed}},
		{"OOMKilled names the memory limit", MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj(),
			[]corev1.Pod{*pod().OOMKilled("64Mi").Obj()},
			Observation{State: StateFailed, Reason: ReasonOOMKilled}},
		{"OOMKilled while the Job controller terminates", MakeJob("j", "ns").Failed(batchv1.JobReasonPodFailurePolicy).Obj(),
			[]corev1.Pod{*pod().OOMKilled("").Obj()},
			Observation{State: StateFailed, Reason: ReasonOOMKilled}},
		{"evicted by the kubelet", MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj(),
			[]corev1.Pod{*pod().Evicted("Usage of EmptyDir volume \"tmp\" exceeds the limit \"1Mi\". ").Obj()},
			Observation{State: StateFailed, Reason: ReasonEvicted}},
		{"evicted before its container state was recorded", MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj(),
			[]corev1.Pod{func() corev1.Pod {
				p := *pod().Evicted("The node was low on resource: memory.").Obj()
				p.Status.ContainerStatuses = nil
				return p
			}()},
			Observation{State: StateFailed, Reason: ReasonEvicted}},
		{"failed with garbage", MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj(),
			[]corev1.Pod{*pod().Terminated(2, "panic: boom").Obj()},
			Observation{State: StateFailed, Reason: ReasonInvalidResult, Permanent: true}},
		{"deadline exceeded", MakeJob("j", "ns").Failed(batchv1.JobReasonDeadlineExceeded).Obj(), nil,
			Observation{State: StateFailed, Reason: workerv1.ReasonDeadlineExceeded}},
		{"dispatched, running on a worker cluster", MakeJob("j", "ns").ManagedBy("kueue.x-k8s.io/multikueue").Active().Obj(), nil,
			Observation{State: StateRunning, Reason: ReasonRunning}},
		{"dispatched, completed: the result stays on the worker cluster", MakeJob("j", "ns").ManagedBy("kueue.x-k8s.io/multikueue").Complete().Obj(), nil,
			Observation{State: StateFailed, Reason: ReasonResultNotMirrored, Permanent: true}},
		{"dispatched, failed on the worker cluster (its pod is not mirrored)", MakeJob("j", "ns").ManagedBy("kueue.x-k8s.io/multikueue").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj(), nil,
			Observation{State: StateFailed, Reason: ReasonFailedOnWorkerCluster}},
		{"dispatched, deadline exceeded on the worker cluster", MakeJob("j", "ns").ManagedBy("kueue.x-k8s.io/multikueue").Failed(batchv1.JobReasonDeadlineExceeded).Obj(), nil,
			Observation{State: StateFailed, Reason: workerv1.ReasonDeadlineExceeded}},
		{"dispatched, active but not ready on the worker cluster", func() *batchv1.Job {
			j := MakeJob("j", "ns").ManagedBy("kueue.x-k8s.io/multikueue").Active().Obj()
			j.Status.Ready = ptr.To[int32](0)
			return j
		}(), nil, Observation{State: StatePending, Reason: ReasonDispatched}},
		{"dispatched, active and ready on the worker cluster", func() *batchv1.Job {
			j := MakeJob("j", "ns").ManagedBy("kueue.x-k8s.io/multikueue").Active().Obj()
			j.Status.Ready = ptr.To[int32](1)
			return j
		}(), nil, Observation{State: StateRunning, Reason: ReasonRunning}},
		{"dispatched, admitted, no status from the worker cluster yet", MakeJob("j", "ns").ManagedBy("kueue.x-k8s.io/multikueue").Obj(), nil,
			Observation{State: StatePending, Reason: ReasonDispatched}},
		{"failed, pod gone", MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj(), nil,
			Observation{State: StateFailed, Reason: ReasonWorkerCrashed}},
		{"newest pod wins", MakeJob("j", "ns").Complete().Obj(), []corev1.Pod{
			*pod().Terminated(1, "garbage").Created(time.Unix(1, 0)).Obj(),
			*MakePod("p2", "ns", "j").Terminated(0, okResult).Created(time.Unix(2, 0)).Obj()},
			Observation{State: StateSucceeded, Reason: "Succeeded", Result: &workerv1.Result{
				Digest: digest, Reference: "r.example.com/m@" + digest, SourceRevision: "abc"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Observe(tc.job, tc.pods)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Observation{}, "Message")); diff != "" {
				t.Errorf("Observe (-want +got):\n%s", diff)
			}
			if got.State != StateNoJob && got.Message == "" {
				t.Error("observation has no message for kubectl describe")
			}
		})
	}
}

func TestObserveMessagesNameTheCause(t *testing.T) {
	o := Observe(MakeJob("j", "ns").Active().Obj(),
		[]corev1.Pod{*MakePod("p", "ns", "j").Unschedulable("0/3 nodes are available: 3 Insufficient memory.").Obj()})
	if !strings.Contains(o.Message, "Insufficient memory") {
		t.Fatalf("message %q hides the scheduler's reason", o.Message)
	}
}

// The messages users read in status for a worker killed from outside:
// they name the field to change, or quote the kubelet.
func TestObserveKilledMessages(t *testing.T) {
	failed := MakeJob("j", "ns").Failed(batchv1.JobReasonBackoffLimitExceeded).Obj()
	cases := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"OOMKilled with a limit", MakePod("p", "ns", "j").OOMKilled("64Mi").Obj(),
			"worker ran out of memory and was killed (OOMKilled, exit code 137): it needs more than spec.resources.limits.memory (64Mi); raise it"},
		{"OOMKilled without a limit", MakePod("p", "ns", "j").OOMKilled("").Obj(),
			"worker ran out of memory and was killed (OOMKilled, exit code 137): it needs more than spec.resources.limits.memory (no limit set); raise it"},
		{"evicted", MakePod("p", "ns", "j").Evicted(`Usage of EmptyDir volume "tmp" exceeds the limit "1Mi". `).Obj(),
			`worker pod p was evicted by the kubelet: Usage of EmptyDir volume "tmp" exceeds the limit "1Mi".`},
		{"crash stays a crash", MakePod("p", "ns", "j").Terminated(137, "").Obj(),
			"worker exited with code 137 (Error) without writing a result"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Observe(failed, []corev1.Pod{*tc.pod}).Message
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	base, cap_ := 10*time.Second, 5*time.Minute
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	var got []time.Duration
	for a := int32(1); a <= 7; a++ {
		got = append(got, Backoff(a, base, cap_))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Backoff (-want +got):\n%s", diff)
	}
}
