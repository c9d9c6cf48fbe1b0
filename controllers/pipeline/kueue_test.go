package pipeline

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func workload(conds ...map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(WorkloadGVK)
	u.SetName("job-a-g1-a1-1f2e3")
	var cs []any
	for _, c := range conds {
		cs = append(cs, c)
	}
	if cs != nil {
		_ = unstructured.SetNestedSlice(u.Object, cs, "status", "conditions")
	}
	return u
}

func TestQueuedBy(t *testing.T) {
	queued := Observation{State: StateQueued, Reason: ReasonQueued, Message: "Job is suspended, waiting for admission by its queue"}
	quota := map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending",
		"message": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 250m more needed"}
	for _, tc := range []struct {
		name string
		in   Observation
		wl   *unstructured.Unstructured
		want Observation
	}{
		{name: "no workload yet", in: queued, wl: nil, want: queued},
		{name: "not queued: untouched", in: Observation{State: StateRunning, Reason: ReasonRunning}, wl: workload(quota),
			want: Observation{State: StateRunning, Reason: ReasonRunning}},
		{name: "insufficient quota", in: queued, wl: workload(quota), want: Observation{State: StateQueued, Reason: ReasonQuotaNotReserved,
			Message: "queued by Kueue: Workload job-a-g1-a1-1f2e3 Pending: couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 250m more needed"}},
		{name: "quota reserved, admission checks pending", in: queued, wl: workload(
			map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq"},
			map[string]any{"type": "Admitted", "status": "False", "reason": "NoChecks", "message": "The workload has not all checks ready"}),
			want: Observation{State: StateQueued, Reason: ReasonWaitingForAdmission,
				Message: "queued by Kueue: Workload job-a-g1-a1-1f2e3 has quota reserved, waiting for admission (NoChecks: The workload has not all checks ready)"}},
		{name: "quota reserved, MultiKueue check pending, no Admitted condition (Kueue v0.17)", in: queued, wl: withChecks(workload(
			map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq"}),
			map[string]any{"name": "multikueue", "state": "Pending", "message": `The workload got reservation on "worker"`},
			map[string]any{"name": "other", "state": "Ready", "message": "fine"}),
			want: Observation{State: StateQueued, Reason: ReasonWaitingForAdmission,
				Message: `queued by Kueue: Workload job-a-g1-a1-1f2e3 has quota reserved, waiting for admission checks: multikueue (Pending: The workload got reservation on "worker")`}},
		{name: "quota reserved, a check without message", in: queued, wl: withChecks(workload(
			map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq"}),
			map[string]any{"name": "multikueue", "state": "Pending"}),
			want: Observation{State: StateQueued, Reason: ReasonWaitingForAdmission,
				Message: `queued by Kueue: Workload job-a-g1-a1-1f2e3 has quota reserved, waiting for admission checks: multikueue (Pending)`}},
		{name: "quota reserved, nothing else said", in: queued, wl: workload(
			map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq"}),
			want: Observation{State: StateQueued, Reason: ReasonWaitingForAdmission,
				Message: `queued by Kueue: Workload job-a-g1-a1-1f2e3 has quota reserved, waiting for admission`}},
		{name: "workload without conditions", in: queued, wl: workload(), want: Observation{State: StateQueued, Reason: ReasonQueued,
			Message: "Job is suspended, waiting for admission by its queue (Kueue Workload job-a-g1-a1-1f2e3)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, QueuedBy(tc.in, tc.wl)); d != "" {
				t.Errorf("QueuedBy (-want +got):\n%s", d)
			}
		})
	}
}

// withChecks sets a Workload's status.admissionChecks.
func withChecks(wl *unstructured.Unstructured, checks ...map[string]any) *unstructured.Unstructured {
	var l []any
	for _, c := range checks {
		l = append(l, c)
	}
	_ = unstructured.SetNestedSlice(wl.Object, l, "status", "admissionChecks")
	return wl
}

func TestBuildJobPriorityClass(t *testing.T) {
	p := jobParams(nil)
	p.QueueName, p.PriorityClass = "team-a", "urgent"
	if got := BuildJob(p).Labels[PriorityClassLabel]; got != "urgent" {
		t.Errorf("queued Job: %s = %q, want urgent", PriorityClassLabel, got)
	}
	p.QueueName = ""
	if got, ok := BuildJob(p).Labels[PriorityClassLabel]; ok {
		t.Errorf("Job without a queue carries %s=%q; Kueue does not manage it", PriorityClassLabel, got)
	}
}

// The cache keeps of a Workload what QueuedBy reads, and is idempotent.
func TestTrimWorkload(t *testing.T) {
	quota := map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient quota"}
	wl := workload(quota)
	wl.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "u1"}})
	_ = unstructured.SetNestedField(wl.Object, map[string]any{"podSets": []any{map[string]any{"name": "main", "count": int64(1)}}}, "spec")
	_ = unstructured.SetNestedField(wl.Object, map[string]any{"podSetAssignments": []any{}}, "status", "admission")
	want := workload(quota)
	want.SetOwnerReferences(wl.GetOwnerReferences())
	for range 2 {
		got, _ := TrimOwned(wl)
		if d := cmp.Diff(want.Object, got.(*unstructured.Unstructured).Object); d != "" {
			t.Fatalf("trimmed Workload (-want +got):\n%s", d)
		}
	}
	if got := QueuedBy(Observation{State: StateQueued}, wl); got.Reason != ReasonQuotaNotReserved {
		t.Errorf("QueuedBy on a trimmed Workload: reason %q", got.Reason)
	}
}
