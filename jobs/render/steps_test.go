package render_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/render"
)

// The worker prints each step as a progress line, which status.progress.step
// of the Claim shows: clone, render, push, in that order.
func TestRunReportsSteps(t *testing.T) {
	srv := serveFixture(t)
	host := inProcessRegistry(t)
	c := pushClaim(srv.URL, host, "claims/team-a/steps", "v1", map[string]any{"replicas": 2}, t)
	var steps []workerv1.Step
	_, err := render.Run(context.Background(), c, render.Options{WorkDir: t.TempDir(), Step: func(s workerv1.Step) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	want := []workerv1.Step{workerv1.StepClone, workerv1.StepRender, workerv1.StepPush}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}
