package pipeline

import (
	"context"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The run engine's one Job lifecycle. Every Job packline makes (a run's
// attempt, a deletion's cleanup, a periodic verification, a dispatched
// attempt's result read, a ClaimTemplate's check render) is built by
// NewJob, created by CreateJob, read back by ObserveJob, and retried on the
// clock of RetryAt. What differs between the kinds is one row of jobKinds.

// JobKind is what a Job does, in its LabelJobKind label.
type JobKind string

const (
	// JobRun is an attempt of an Artifact's or a Claim's run.
	JobRun JobKind = "run"
	// JobCleanup deletes a deleted owner's pushed tag (deletionPolicy Delete).
	JobCleanup JobKind = "cleanup"
	// JobVerify checks a succeeded run's push (spec.verifyInterval).
	JobVerify JobKind = "verify"
	// JobResolve reads a dispatched attempt's result from the registry.
	JobResolve JobKind = "resolve"
	// JobTemplateCheck renders a ClaimTemplate once, pushing nothing.
	JobTemplateCheck JobKind = "template-check"
)

// jobKindSpec is what one kind of Job fixes, whoever asks for it.
type jobKindSpec struct {
	// command is the worker subcommand; empty takes the caller's (a run's
	// is the Work's: "artifact" or "claim").
	command string
	// timeout bounds an attempt; zero takes the caller's (a run's is
	// spec.timeout, else the manager's default).
	timeout time.Duration
	// underDefault caps timeout at the manager's --default-timeout too.
	underDefault bool
	// workspace mounts the run's workspace PVC; the other kinds get an
	// emptyDir, since they may run after the PVC was freed.
	workspace bool
	// queued kinds may go to Kueue (and be dispatched); the others run here.
	queued bool
}

// jobKinds: the one place that says how the kinds differ.
var jobKinds = map[JobKind]jobKindSpec{
	JobRun:           {workspace: true, queued: true},
	JobCleanup:       {command: "delete", timeout: cleanupTimeout, underDefault: true},
	JobVerify:        {command: "verify", timeout: verifyTimeout},
	JobResolve:       {command: "resolve", timeout: verifyTimeout},
	JobTemplateCheck: {command: "claim", timeout: checkTimeout, underDefault: true},
}

// checkTimeout bounds one template check render: a clone and a kustomize build.
const checkTimeout = 10 * time.Minute

// NewJob builds a Job of kind from the manager's Config, copied here once,
// and the caller's p (owner, placement, attempt, inputs, worker document,
// mounts). overrides layer over the manager's worker resources (see
// WorkerResources). It is pure.
func (c Config) NewJob(kind JobKind, p JobParams, overrides ...*corev1.ResourceRequirements) *batchv1.Job {
	k, ok := jobKinds[kind]
	if !ok {
		panic(fmt.Sprintf("pipeline: unknown Job kind %q", kind))
	}
	p.Kind = kind
	p.Image = c.WorkerImage
	p.TTLAfterFinished = c.JobTTL
	p.ServiceAccountName = c.WorkerServiceAccount
	p.TmpSize = c.WorkerTmpSize
	p.Resources = ptr.To(WorkerResources(append([]*corev1.ResourceRequirements{&c.WorkerResources}, overrides...)...))
	p.EphemeralWorkspace = !k.workspace
	if k.command != "" {
		p.Command = k.command
	}
	if k.timeout > 0 {
		p.Timeout = k.timeout
		if k.underDefault {
			p.Timeout = min(c.DefaultTimeout, k.timeout)
		}
	}
	if k.queued {
		p.ManagedBy = c.JobManagedBy
	} else {
		p.QueueName, p.PriorityClass, p.ManagedBy, p.DispatchedWorkspace = "", "", "", nil
	}
	return BuildJob(p)
}

// KindOf is a Job's kind, from its label; "" for a Job made before the
// label existed.
func KindOf(j *batchv1.Job) JobKind { return JobKind(j.Labels[LabelJobKind]) }

// CreateJob creates job. AlreadyExists means a Job of that deterministic
// name is there: ours when the cache lagged, which callers that find their
// Jobs by label then see; else someone else's, which is never adopted (a
// tenant who may create Jobs could have made it to be read as ours): a
// stalling ReasonJobConflict. Any other refusal is a StepError naming the
// Job.
func CreateJob(ctx context.Context, c client.Client, job *batchv1.Job) error {
	err := c.Create(ctx, job)
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return &StepError{Reason: ReasonJobRejected, Err: fmt.Errorf("creating %s Job %s/%s: %w", KindOf(job), job.Namespace, job.Name, err)}
	}
	found := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), found); err != nil {
		// Not in the cache yet: the next reconcile sees it, and asks again.
		return client.IgnoreNotFound(err)
	}
	if !sameMaker(job, found) {
		return &StepError{Reason: ReasonJobConflict, Stall: true, Err: fmt.Errorf(
			"%s Job %s/%s already exists and was not made for this run (owner UID %q, not %q): packline neither adopts nor deletes it; delete it",
			KindOf(job), found.Namespace, found.Name, found.Labels[LabelOwnerUID], job.Labels[LabelOwnerUID])}
	}
	return nil
}

// sameMaker says found was made as want is: for the same owner (its UID
// label) and, when want has one, under the same controller reference.
func sameMaker(want, found *batchv1.Job) bool {
	if found.Labels[LabelOwnerUID] != want.Labels[LabelOwnerUID] {
		return false
	}
	if ref := metav1.GetControllerOf(want); ref != nil {
		got := metav1.GetControllerOf(found)
		return got != nil && got.UID == ref.UID
	}
	return true
}

// ObserveJob lists job's own pods (JobPods), in name order, and observes
// them. events, when set, reads the kubelet's FailedMount events of a pod
// still creating its containers (see MountFailure); requeue is then set,
// since a failed mount changes no status a watch sees.
func ObserveJob(ctx context.Context, pods client.Reader, events client.Reader, job *batchv1.Job) (o Observation, requeue time.Duration, err error) {
	list, err := JobPods(ctx, pods, job)
	if err != nil {
		return Observation{}, 0, err
	}
	return observePods(ctx, events, job, list)
}

// observePods is ObserveJob on the Job's pods already listed (the run's
// observe also reads its worker's progress from them).
func observePods(ctx context.Context, events client.Reader, job *batchv1.Job, list []corev1.Pod) (o Observation, requeue time.Duration, err error) {
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	o = Observe(job, list)
	pod := waitingOnNode(o, list)
	if pod == nil || events == nil {
		return o, 0, nil
	}
	evs, err := podEvents(ctx, events, pod)
	if err != nil {
		return o, 0, err
	}
	if mo, ok := MountFailure(pod, evs); ok {
		o = mo
	}
	return o, mountPoll, nil
}

// observeJob is ObserveJob with the manager's cache for pods and its
// uncached reader for events (the manager caches no events).
func (p *Pipeline) observeJob(ctx context.Context, job *batchv1.Job) (Observation, time.Duration, error) {
	return ObserveJob(ctx, p.Client, p.APIReader, job)
}

// RetryAt is the one retry clock: the attempt after a failed one may start
// wait (Transition's backoff) after the failure. failedAt is when the
// failure was seen: the failed Job's Failed condition when it has one
// (FailedAt), so that a restarted manager keeps the same clock.
func RetryAt(failedAt time.Time, wait time.Duration) time.Time { return failedAt.Add(wait) }

// FailedAt is when job failed: its Failed condition's time, else fallback.
func FailedAt(job *batchv1.Job, fallback time.Time) time.Time {
	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		return c.LastTransitionTime.Time
	}
	return fallback
}

// Until is how long from now until at; zero once at has come.
func Until(now, at time.Time) time.Duration {
	return max(at.Sub(now), 0)
}
