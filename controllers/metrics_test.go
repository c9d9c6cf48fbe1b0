package controllers_test

import (
	"testing"

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

// metricDelta reads a metric now, and returns how much it has moved since.
func metricDelta(t *testing.T, name string, labels map[string]string) func() float64 {
	t.Helper()
	before := metricValue(t, name, labels)
	return func() float64 { return metricValue(t, name, labels) - before }
}
