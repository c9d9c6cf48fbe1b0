package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/packline/packline/api/v1alpha1"
)

var (
	runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "packline_runs_total",
		Help: "Finished pipeline runs by kind and result (succeeded, failed).",
	}, []string{"kind", "result"})
	runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "packline_run_duration_seconds",
		Help:    "Time from a run's first attempt to its end, by kind and result.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 16), // 1s .. ~9h
	}, []string{"kind", "result"})
	retriesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "packline_retries_total",
		Help: "Failed attempts that were scheduled for a retry, by kind.",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(runsTotal, runDuration, retriesTotal)
}

// recordPhase counts a phase transition.
func recordPhase(kind string, st *v1alpha1.PipelineStatus) {
	switch st.Phase {
	case v1alpha1.PhaseRetrying:
		retriesTotal.WithLabelValues(kind).Inc()
	case v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed:
		res := "succeeded"
		if st.Phase == v1alpha1.PhaseFailed {
			res = "failed"
		}
		runsTotal.WithLabelValues(kind, res).Inc()
		if st.StartTime != nil && st.CompletionTime != nil {
			runDuration.WithLabelValues(kind, res).Observe(st.CompletionTime.Sub(st.StartTime.Time).Seconds())
		}
	}
}
