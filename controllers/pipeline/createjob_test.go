package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// TestCreateJobNeverAdopts: a Job of the deterministic name that exists
// already is taken as ours only when it was made for the same owner; a
// look-alike (another owner's UID, or no controller reference to ours)
// stalls the step with JobConflict instead of being read as ours.
func TestCreateJobNeverAdopts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WorkerImage = "worker:1"
	owner := Owner{GVK: v1alpha1.GroupVersion.WithKind("Artifact"), Name: "a", Namespace: "ns", UID: "u"}
	verifyJob := func(o Owner) *batchv1.Job {
		return cfg.NewJob(JobVerify, JobParams{Owner: o, Generation: 1, Attempt: 1, InputsHash: "abcdef", Command: "verify", SpecJSON: "{}"})
	}
	other := owner
	other.UID = "someone-else"
	noController := verifyJob(owner)
	noController.SetOwnerReferences(nil)
	cases := []struct {
		name     string
		existing []client.Object
		want     *StepError
	}{
		{name: "no Job yet: created"},
		{name: "ours already (the cache lagged)", existing: []client.Object{verifyJob(owner)}},
		{name: "another owner's Job of the name", existing: []client.Object{verifyJob(other)},
			want: &StepError{Reason: ReasonJobConflict, Stall: true}},
		{name: "our labels, no controller reference to us", existing: []client.Object{noController},
			want: &StepError{Reason: ReasonJobConflict, Stall: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.existing...)
			err := CreateJob(context.Background(), e.c, verifyJob(owner))
			var got *StepError
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("error %v is not a StepError", err)
			}
			if got != nil {
				got = &StepError{Reason: got.Reason, Stall: got.Stall}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CreateJob (-want +got):\n%s", diff)
			}
		})
	}
}
