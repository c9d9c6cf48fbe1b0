package pipeline

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// ReasonReadingResult: a dispatched attempt completed and its result is
// being read from the registry.
const ReasonReadingResult = "ReadingResult"

// resolveInputs labels the Jobs that read a dispatched run's result. Run
// hashes are hex, so the "r" never collides with a run's Job.
func resolveInputs(run string) string { return "r" + short(run, 15) }

func isResolveJob(j *batchv1.Job) bool { return strings.HasPrefix(j.Labels[LabelInputs], "r") }

// dispatched reports whether this run's Jobs are handed to another
// cluster (--job-managed-by on a queued run).
func (p *Pipeline) dispatched(s *scope) bool {
	return p.Config.JobManagedBy != "" && p.runSpec(s).QueueName != ""
}

// resultFromRegistry stands in for the termination message of an attempt
// that ran on another cluster (MultiKueue mirrors the Job's status, not its
// pods): a small Job on this cluster, with the run's own credentials, reads
// the pushed manifest the target tag now names, and its result becomes the
// attempt's. Someone pushing the same tag between the two would be read
// instead; the manifest's revision annotation is reported with it.
func (p *Pipeline) resultFromRegistry(ctx context.Context, s *scope) (Observation, error) {
	attempt := attemptOf(s.job)
	for _, j := range s.resolveJobs {
		if attemptOf(j) != attempt {
			continue
		}
		// Only the end matters here: no mount events to read.
		o, _, err := ObserveJob(ctx, p.Client, nil, j)
		if err != nil {
			return Observation{}, err
		}
		switch o.State {
		case StateSucceeded, StateFailed:
			return o, nil
		}
		return Observation{State: StateRunning, Reason: ReasonReadingResult,
			Message: fmt.Sprintf("the attempt ran on a worker cluster; Job %s reads its result from the registry: %s", j.Name, o.Message)}, nil
	}
	target, ok := workTarget(s.work.Spec)
	if !ok {
		return Observation{State: StateFailed, Reason: ReasonResultNotMirrored, Permanent: true,
			Message: "the attempt ran on a worker cluster, and this kind's result cannot be read back from the registry"}, nil
	}
	doc, err := workerv1.EncodeSpec(workerv1.Resolve{Target: target})
	if err != nil {
		return Observation{}, err
	}
	job := p.buildResolveJob(s, int32(attempt), doc)
	if err := CreateJob(ctx, p.Client, job); err != nil {
		return Observation{}, err
	}
	return Observation{State: StateRunning, Reason: ReasonReadingResult,
		Message: "the attempt ran on a worker cluster; Job " + job.Name + " reads its result from the registry"}, nil
}

// buildResolveJob is the Job that reads attempt's result from the
// registry. It mounts the run's push credentials and nothing else: not the
// source's Secrets or PVC, nor the signing key, which reading a manifest
// has no use for, and whose absence (a source PVC deleted since the run)
// must not hold the result.
func (p *Pipeline) buildResolveJob(s *scope, attempt int32, doc string) *batchv1.Job {
	m := s.work.Mounts.TargetOnly()
	// Not a queued kind (see jobKinds), so it runs here.
	return p.Config.NewJob(JobResolve, JobParams{
		Owner: s.owner, Namespace: s.namespace(), Generation: s.obj.GetGeneration(), Attempt: attempt,
		InputsHash: resolveInputs(s.work.InputsHash),
		SpecJSON:   doc, Env: m.Env, Volumes: m.Volumes, Mounts: m.Mounts,
	}, p.runSpec(s).Resources)
}

// workTarget is the push target of a run's worker document.
func workTarget(doc any) (workerv1.Target, bool) {
	switch d := doc.(type) {
	case workerv1.Artifact:
		return d.Target, true
	case workerv1.Claim:
		return d.Target, true
	}
	return workerv1.Target{}, false
}
