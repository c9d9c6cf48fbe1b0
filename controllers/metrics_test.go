package controllers_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metricValue sums a counter, or a histogram's sample count, from
// controller-runtime's registry where every label matches.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			if m.GetCounter() != nil {
				sum += m.GetCounter().GetValue()
			}
			if m.GetHistogram() != nil {
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// TestMetrics runs one failing-then-stalled Artifact and one successful one
// and reads the counters they must have moved.
func TestMetrics(t *testing.T) {
	art := map[string]string{"kind": "Artifact"}
	ok := map[string]string{"kind": "Artifact", "result": "succeeded"}
	failed := map[string]string{"kind": "Artifact", "result": "failed"}
	retries0 := metricValue(t, "packline_retries_total", art)
	ok0 := metricValue(t, "packline_runs_total", ok)
	failed0 := metricValue(t, "packline_runs_total", failed)
	hist0 := metricValue(t, "packline_run_duration_seconds", art)

	t.Run("retries then stalls", TestArtifactRetriesThenStalls)
	t.Run("succeeds", TestArtifactSucceeds)

	g := NewWithT(t)
	g.Expect(metricValue(t, "packline_retries_total", art) - retries0).To(BeNumerically(">=", 2))
	g.Expect(metricValue(t, "packline_runs_total", ok) - ok0).To(BeNumerically(">=", 1))
	g.Expect(metricValue(t, "packline_runs_total", failed) - failed0).To(BeNumerically(">=", 1))
	g.Expect(metricValue(t, "packline_run_duration_seconds", art) - hist0).To(BeNumerically(">=", 2))
}
