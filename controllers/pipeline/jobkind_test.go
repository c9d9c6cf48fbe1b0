package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/packline/packline/api/v1alpha1"
	. "github.com/packline/packline/test/wrappers"
)

// jobShape is what a Job kind decides about its Job.
type jobShape struct {
	Kind, Command, Queue, ManagedBy string
	Deadline                        int64
	Ephemeral                       bool
	Memory, Image, Account, TTL     string
}

func shapeOf(j *batchv1.Job) jobShape {
	c := j.Spec.Template.Spec.Containers[0]
	s := jobShape{
		Kind: j.Labels[LabelJobKind], Command: c.Args[0], Queue: j.Labels[QueueLabel],
		Ephemeral: j.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim == nil,
		Memory:    c.Resources.Limits.Memory().String(), Image: c.Image, Account: j.Spec.Template.Spec.ServiceAccountName,
	}
	if j.Spec.ManagedBy != nil {
		s.ManagedBy = *j.Spec.ManagedBy
	}
	if j.Spec.ActiveDeadlineSeconds != nil {
		s.Deadline = *j.Spec.ActiveDeadlineSeconds
	}
	if j.Spec.TTLSecondsAfterFinished != nil {
		s.TTL = (time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second).String()
	}
	return s
}

// TestNewJobKinds: every kind's Job comes from one builder, with the
// manager's Config copied once and the kind's row of jobKinds: its label,
// worker command, deadline, workspace and whether it may be queued.
func TestNewJobKinds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WorkerImage, cfg.WorkerServiceAccount, cfg.JobManagedBy = "worker:1", "packline-worker", "kueue.x-k8s.io/multikueue"
	cfg.DefaultTimeout = 7 * time.Minute
	owner := Owner{GVK: v1alpha1.GroupVersion.WithKind("Artifact"), Name: "a", Namespace: "ns", UID: "u"}
	big := &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}
	base := func() JobParams {
		return JobParams{Owner: owner, Generation: 1, Attempt: 1, InputsHash: "abcdef", Command: "artifact", SpecJSON: "{}",
			Timeout: time.Hour, QueueName: "q"}
	}
	want := func(kind, cmd string, deadline time.Duration, ephemeral bool) jobShape {
		return jobShape{Kind: kind, Command: cmd, Deadline: int64(deadline / time.Second), Ephemeral: ephemeral,
			Memory: "2Gi", Image: "worker:1", Account: "packline-worker", TTL: "1h0m0s"}
	}
	run := want("run", "artifact", time.Hour, false)
	run.Queue, run.ManagedBy, run.Memory = "q", "kueue.x-k8s.io/multikueue", "4Gi"
	cases := []struct {
		kind      JobKind
		overrides []*corev1.ResourceRequirements
		want      jobShape
	}{
		{JobRun, []*corev1.ResourceRequirements{nil, big}, run},
		// Capped by the manager's default timeout (7m) under its own 10m.
		{JobCleanup, nil, want("cleanup", "delete", 7*time.Minute, true)},
		{JobVerify, nil, want("verify", "verify", verifyTimeout, true)},
		{JobResolve, nil, want("resolve", "resolve", verifyTimeout, true)},
		{JobTemplateCheck, nil, want("template-check", "claim", 7*time.Minute, true)},
	}
	for _, tc := range cases {
		t.Run(string(tc.kind), func(t *testing.T) {
			job := cfg.NewJob(tc.kind, base(), tc.overrides...)
			if diff := cmp.Diff(tc.want, shapeOf(job)); diff != "" {
				t.Errorf("Job (-want +got):\n%s", diff)
			}
			if got := KindOf(job); got != tc.kind {
				t.Errorf("KindOf = %q, want %q", got, tc.kind)
			}
			if got := job.Spec.Template.Labels[LabelJobKind]; got != string(tc.kind) {
				t.Errorf("pod label %s = %q, want %q", LabelJobKind, got, tc.kind)
			}
		})
	}
}

func TestNewJobUnknownKindPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewJob of an unknown kind did not panic")
		}
	}()
	DefaultConfig().NewJob("backup", JobParams{})
}

// TestRetryClock: one clock for the run's status.nextAttemptTime, the
// cleanup and the template check: backoff after the failure the Job
// recorded, else after the fallback.
func TestRetryClock(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failed := MakeJob("j", "ns").Failed("BackoffLimitExceeded").Obj()
	for i := range failed.Status.Conditions {
		failed.Status.Conditions[i].LastTransitionTime = metav1.NewTime(t0)
	}
	running := MakeJob("j", "ns").Active().Obj()
	cases := []struct {
		name     string
		job      *batchv1.Job
		fallback time.Time
		wait     time.Duration
		now      time.Time
		want     time.Duration
	}{
		{"backoff still running", failed, t0.Add(time.Hour), 10 * time.Second, t0.Add(4 * time.Second), 6 * time.Second},
		{"backoff over", failed, t0.Add(time.Hour), 10 * time.Second, t0.Add(11 * time.Second), 0},
		{"exactly due", failed, t0, 10 * time.Second, t0.Add(10 * time.Second), 0},
		{"no Failed condition: from the fallback", running, t0.Add(time.Minute), 20 * time.Second, t0.Add(time.Minute), 20 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Until(tc.now, RetryAt(FailedAt(tc.job, tc.fallback), tc.wait))
			if got != tc.want {
				t.Errorf("wait = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestTransitionStepEvents: the steps' own events go through Transition
// too, so every phase write is a row here.
func TestTransitionStepEvents(t *testing.T) {
	conflict := &StepError{Reason: ReasonWorkspaceConflict, Err: errors.New("PVC a-workspace is not this run's"), Stall: true}
	rejected := &StepError{Reason: ReasonJobRejected, Err: errors.New("quota")}
	cases := []struct {
		name string
		run  Run
		ev   Event
		want Next
	}{
		{"waiting from any phase is Pending", Run{Phase: v1alpha1.PhaseRunning}, Waited(ReasonServiceAccountMissing, "no sa"),
			Next{Phase: v1alpha1.PhasePending, Action: ActionProgress, Reason: ReasonServiceAccountMissing, Message: "no sa"}},
		{"waiting before a phase", Run{}, Waited(ReasonNamespaceMissing, "no ns"),
			Next{Phase: v1alpha1.PhasePending, Action: ActionProgress, Reason: ReasonNamespaceMissing, Message: "no ns"}},
		{"stalling fails the run", Run{Phase: v1alpha1.PhasePending}, Stalled("EntitlementDenied", "denied"),
			Next{Phase: v1alpha1.PhaseFailed, Action: ActionFail, Reason: "EntitlementDenied", Message: "denied"}},
		{"a new attempt is Pending", Run{Phase: v1alpha1.PhaseRetrying, Attempts: 1}, AttemptStarted(2),
			Next{Phase: v1alpha1.PhasePending, Action: ActionStart, Attempt: 2}},
		{"a step error keeps the phase", Run{Phase: v1alpha1.PhaseRunning}, StepFailed(rejected),
			Next{Phase: v1alpha1.PhaseRunning, Action: ActionProgress, Reason: ReasonJobRejected, Message: "quota"}},
		{"a step error before a phase is Pending", Run{}, StepFailed(errors.New("boom")),
			Next{Phase: v1alpha1.PhasePending, Action: ActionProgress, Reason: ReasonReconcileError, Message: "boom"}},
		{"a stalling step error keeps the phase, Stalled", Run{Phase: v1alpha1.PhasePending}, StepFailed(conflict),
			Next{Phase: v1alpha1.PhasePending, Action: ActionStall, Reason: ReasonWorkspaceConflict, Message: "PVC a-workspace is not this run's"}},
		{"a succeeded run's result stands", Run{Phase: v1alpha1.PhaseSucceeded}, StepFailed(rejected),
			Next{Phase: v1alpha1.PhaseSucceeded, Action: ActionNone}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Transition(tc.run, tc.ev, RetryPolicy{})); diff != "" {
				t.Errorf("Transition (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMarkReadiness(t *testing.T) {
	type conds map[string]metav1.ConditionStatus
	cases := []struct {
		name string
		r    Readiness
		want conds
	}{
		{"ready", Readiness{Ready: true, Reason: "Delivered"}, conds{v1alpha1.ConditionReady: metav1.ConditionTrue}},
		{"in progress", Readiness{Reason: "Delivering"},
			conds{v1alpha1.ConditionReady: metav1.ConditionFalse, v1alpha1.ConditionReconciling: metav1.ConditionTrue}},
		{"stalled", Readiness{Stalled: true, Reason: "DeliveryConflict"},
			conds{v1alpha1.ConditionReady: metav1.ConditionFalse, v1alpha1.ConditionStalled: metav1.ConditionTrue}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// From the opposite state, so each case clears what it must.
			st := &v1alpha1.PipelineStatus{}
			setStalled(st, "Before", "before")
			setProgress(st, "Before", "before")
			MarkReadiness(st, tc.r)
			got := conds{}
			for _, c := range st.Conditions {
				got[c.Type] = c.Status
				if c.Reason != tc.r.Reason {
					t.Errorf("%s reason = %q, want %q", c.Type, c.Reason, tc.r.Reason)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLowestRequeue(t *testing.T) {
	r := func(d time.Duration) ctrl.Result { return ctrl.Result{RequeueAfter: d} }
	cases := []struct{ a, b, want ctrl.Result }{
		{r(0), r(5), r(5)},
		{r(5), r(0), r(5)},
		{r(5), r(3), r(3)},
		{r(3), r(5), r(3)},
		{r(0), r(0), r(0)},
	}
	for _, tc := range cases {
		if got := lowestRequeue(tc.a, tc.b); got != tc.want {
			t.Errorf("lowestRequeue(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
