package pipeline

import (
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// State is what one attempt's Job says about the run.
type State string

const (
	StateNoJob     State = "NoJob"
	StateQueued    State = "Queued"
	StatePending   State = "Pending"
	StateRunning   State = "Running"
	StateSucceeded State = "Succeeded"
	StateFailed    State = "Failed"
)

// Reasons the controller itself reports (the worker's come in its result).
const (
	ReasonInvalidResult = "InvalidResult"
	ReasonWorkerCrashed = "WorkerCrashed"
	ReasonUnschedulable = "Unschedulable"
	ReasonWaitingForPod = "WaitingForPod"
	ReasonQueued        = "Queued"
	ReasonRunning       = "Running"
	// ReasonServiceAccountMissing: --worker-service-account is not in the namespace.
	ReasonServiceAccountMissing = "ServiceAccountMissing"
	// ReasonConfigError is the kubelet's: a Secret (or key) the pod
	// references is missing. The kubelet retries, so the run goes on by
	// itself once it exists.
	ReasonConfigError = "CreateContainerConfigError"
	// ReasonResultNotMirrored: a Job dispatched to a worker cluster
	// completed, but the pod holding its result stays there.
	ReasonResultNotMirrored = "ResultNotMirrored"
	// ReasonDispatched: a queued Job was admitted and handed to
	// MultiKueue (spec.managedBy), whose copy on a worker cluster has not
	// reported a running pod yet.
	ReasonDispatched = "Dispatched"
	// ReasonFailedOnWorkerCluster: a dispatched Job failed on its worker
	// cluster (its conditions are mirrored; its pod is not).
	ReasonFailedOnWorkerCluster = "FailedOnWorkerCluster"
	// ReasonRerunRequested: packline.dev/requestedAt asked for a new attempt.
	ReasonRerunRequested = "RerunRequested"
	// ReasonOOMKilled: the worker container used more memory than
	// spec.resources.limits.memory and the kernel killed it.
	ReasonOOMKilled = "OOMKilled"
	// ReasonEvicted: the kubelet evicted the worker pod, e.g. for writing
	// more than the sizeLimit of its /tmp emptyDir (--worker-tmp-size), or
	// under node pressure.
	ReasonEvicted = "Evicted"
)

// Observation is the pure reading of a Job and its Pods.
type Observation struct {
	State   State
	Reason  string
	Message string
	// Permanent is set on failures that a new attempt cannot fix.
	Permanent bool
	// Result is the parsed termination message of a successful run.
	Result *workerv1.Result
	// Pushed is the artifact a failed run pushed before failing (its
	// signature could not be attached).
	Pushed *workerv1.Pushed
}

// Observe reads one attempt. It is a pure function so that every case the
// Job controller and kubelet can produce is a row in a table test.
func Observe(job *batchv1.Job, pods []corev1.Pod) Observation {
	if job == nil {
		return Observation{State: StateNoJob}
	}
	pod, term := workerTermination(pods)
	if c := jobCondition(job, batchv1.JobComplete); c != nil {
		if pod == nil && dispatched(job) {
			return Observation{State: StateFailed, Reason: ReasonResultNotMirrored, Permanent: true,
				Message: fmt.Sprintf("Job completed on a worker cluster (spec.managedBy %s), but its pod, whose termination message carries the digest, is not mirrored to this cluster: see docs/how-to/worker-clusters-multikueue.md", *job.Spec.ManagedBy)}
		}
		return observeSucceeded(pod, term)
	}
	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		if pod == nil && dispatched(job) {
			return observeFailedRemote(job, c)
		}
		return observeFailed(c, evictedOr(pods, pod), term)
	}
	if c := jobCondition(job, batchv1.JobFailureTarget); c != nil {
		if pod == nil && dispatched(job) {
			return observeFailedRemote(job, c)
		}
		// The Job controller is still terminating pods; the verdict is known.
		return observeFailed(c, evictedOr(pods, pod), term)
	}
	if job.Spec.Suspend != nil && *job.Spec.Suspend {
		return Observation{State: StateQueued, Reason: ReasonQueued, Message: "Job is suspended, waiting for admission by its queue"}
	}
	if o, ok := podSucceeded(pod, term); ok {
		return o
	}
	if len(pods) == 0 && dispatched(job) {
		// status.ready (mirrored with the rest) tells a running pod from
		// one that is pending there, or whose node went down; a status
		// without it (a Job controller before 1.29) counts as running.
		if job.Status.Active > 0 && (job.Status.Ready == nil || *job.Status.Ready > 0) {
			return Observation{State: StateRunning, Reason: ReasonRunning,
				Message: fmt.Sprintf("running on a worker cluster (spec.managedBy %s)", *job.Spec.ManagedBy)}
		}
		if job.Status.Active > 0 {
			return Observation{State: StatePending, Reason: ReasonDispatched,
				Message: fmt.Sprintf("handed to %s; on the worker cluster its pod is not running (Job status: %d active, 0 ready): not started yet, or its node is down", *job.Spec.ManagedBy, job.Status.Active)}
		}
		// Admitted here; the copy on the worker cluster has not reported
		// an active pod yet (nor will a pod ever appear on this cluster).
		return Observation{State: StatePending, Reason: ReasonDispatched,
			Message: fmt.Sprintf("admitted and handed to %s, which runs it on a worker cluster; waiting for its status there", *job.Spec.ManagedBy)}
	}
	return observeActive(pods)
}

// observeFailedRemote reads a dispatched Job that failed on a worker
// cluster: only its mirrored conditions are here; the worker's exit and
// result stay with its pod on that cluster. So the failure cannot be told
// permanent (bad input) from transient (a node lost mid-run), and is
// retried like a crash, up to spec.retryLimit.
func observeFailedRemote(job *batchv1.Job, c *batchv1.JobCondition) Observation {
	if c.Reason == batchv1.JobReasonDeadlineExceeded {
		return Observation{State: StateFailed, Reason: workerv1.ReasonDeadlineExceeded,
			Message: "attempt ran longer than spec.timeout (Job activeDeadlineSeconds) on a worker cluster"}
	}
	return Observation{State: StateFailed, Reason: ReasonFailedOnWorkerCluster,
		Message: fmt.Sprintf("Job failed on a worker cluster (spec.managedBy %s): %s: %s; the worker pod, with its exit and result, is on that cluster only", *job.Spec.ManagedBy, c.Reason, c.Message)}
}

// podSucceeded reads a worker pod that succeeded with a valid success
// result before its Job says Complete: the Job controller records pod
// completions in batches (about a second), and the pod's own verdict is
// the run's (backoffLimit 0, one completion). Anything less than a valid
// success waits for the Job's condition, as before.
func podSucceeded(pod *corev1.Pod, term *corev1.ContainerStateTerminated) (Observation, bool) {
	if pod == nil || term == nil || term.ExitCode != 0 || pod.Status.Phase != corev1.PodSucceeded {
		return Observation{}, false
	}
	o := observeSucceeded(pod, term)
	return o, o.State == StateSucceeded
}

// dispatched reports a Job that another controller runs elsewhere
// (MultiKueue): only its mirrored status is seen here, never its pods.
func dispatched(job *batchv1.Job) bool {
	return job.Spec.ManagedBy != nil && *job.Spec.ManagedBy != batchv1.JobControllerName
}

func observeSucceeded(pod *corev1.Pod, term *corev1.ContainerStateTerminated) Observation {
	if pod == nil || term == nil {
		return Observation{State: StateFailed, Reason: ReasonInvalidResult, Permanent: true,
			Message: "Job completed but no finished worker pod is left to read its result from"}
	}
	r, err := workerv1.ParseResult([]byte(term.Message))
	if err != nil {
		return Observation{State: StateFailed, Reason: ReasonInvalidResult, Permanent: true,
			Message: fmt.Sprintf("pod %s: invalid result in termination message: %v", pod.Name, err)}
	}
	if r.Failed() {
		// Exit code 0 with an error result: trust the result, not the code.
		return Observation{State: StateFailed, Reason: r.Error.Reason, Message: r.Error.Message, Permanent: r.Error.Permanent, Pushed: r.Error.Pushed}
	}
	return Observation{State: StateSucceeded, Reason: "Succeeded", Message: "pushed " + r.Reference, Result: &r}
}

func observeFailed(c *batchv1.JobCondition, pod *corev1.Pod, term *corev1.ContainerStateTerminated) Observation {
	if c.Reason == batchv1.JobReasonDeadlineExceeded {
		return Observation{State: StateFailed, Reason: workerv1.ReasonDeadlineExceeded,
			Message: "attempt ran longer than spec.timeout (Job activeDeadlineSeconds)"}
	}
	if o, ok := observeKilled(pod, term); ok {
		return o
	}
	if term == nil {
		return Observation{State: StateFailed, Reason: ReasonWorkerCrashed,
			Message: fmt.Sprintf("Job failed (%s: %s) and no worker exit was recorded", c.Reason, c.Message)}
	}
	if term.Message == "" {
		// A crash or OOM kill leaves no result; another attempt may pass.
		return Observation{State: StateFailed, Reason: ReasonWorkerCrashed,
			Message: fmt.Sprintf("worker exited with code %d (%s) without writing a result", term.ExitCode, term.Reason)}
	}
	r, err := workerv1.ParseResult([]byte(term.Message))
	if err != nil {
		return Observation{State: StateFailed, Reason: ReasonInvalidResult, Permanent: true,
			Message: fmt.Sprintf("worker exited with code %d and an invalid result: %v", term.ExitCode, err)}
	}
	if !r.Failed() {
		return Observation{State: StateFailed, Reason: ReasonInvalidResult, Permanent: true,
			Message: fmt.Sprintf("worker exited with code %d but reported success", term.ExitCode)}
	}
	return Observation{State: StateFailed, Reason: r.Error.Reason, Message: r.Error.Message, Permanent: r.Error.Permanent, Pushed: r.Error.Pushed}
}

// observeKilled names what killed the worker when it was not its own
// failure: the kernel's OOM killer (the container's terminated reason
// OOMKilled) or the kubelet's eviction (the pod's reason Evicted). Both
// leave no result, and "exit code 137" alone tells a user nothing.
// Neither is permanent: an eviction under node pressure may pass on
// another attempt, and spec.resources may be raised meanwhile.
func observeKilled(pod *corev1.Pod, term *corev1.ContainerStateTerminated) (Observation, bool) {
	if pod != nil && pod.Status.Reason == ReasonEvicted {
		return Observation{State: StateFailed, Reason: ReasonEvicted,
			Message: fmt.Sprintf("worker pod %s was evicted by the kubelet: %s", pod.Name, strings.TrimSpace(pod.Status.Message))}, true
	}
	if term != nil && term.Reason == ReasonOOMKilled && term.Message == "" {
		limit := memoryLimit(pod)
		return Observation{State: StateFailed, Reason: ReasonOOMKilled,
			Message: fmt.Sprintf("worker ran out of memory and was killed (OOMKilled, exit code %d): it needs more than spec.resources.limits.memory (%s); raise it", term.ExitCode, limit)}, true
	}
	return Observation{}, false
}

// memoryLimit is the worker container's memory limit as the kubelet
// applied it (its container status: the manager's cache keeps no pod
// spec), else as the spec says, else "no limit set".
func memoryLimit(pod *corev1.Pod) string {
	if pod == nil {
		return "no limit set"
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == workerContainer && cs.Resources != nil {
			if q, ok := cs.Resources.Limits[corev1.ResourceMemory]; ok {
				return q.String()
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == workerContainer {
			return q.String()
		}
	}
	return "no limit set"
}

// evictedOr returns the newest evicted pod, else pod: an evicted worker
// may have no terminated container state to find it by.
func evictedOr(pods []corev1.Pod, pod *corev1.Pod) *corev1.Pod {
	if len(pods) > 0 {
		if p := newestPod(pods); p.Status.Reason == ReasonEvicted {
			return p
		}
	}
	return pod
}

// observeActive explains why a started Job has not finished: most useful is
// naming what blocks the pod (image pull, scheduling).
func observeActive(pods []corev1.Pod) Observation {
	if len(pods) == 0 {
		return Observation{State: StatePending, Reason: ReasonWaitingForPod, Message: "waiting for the Job to create its pod"}
	}
	pod := newestPod(pods)
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && (isImageProblem(w.Reason) || w.Reason == ReasonConfigError) {
			return Observation{State: StatePending, Reason: w.Reason, Message: fmt.Sprintf("pod %s: %s", pod.Name, w.Message)}
		}
		if cs.State.Running != nil {
			return Observation{State: StateRunning, Reason: ReasonRunning, Message: "worker pod " + pod.Name + " is running"}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return Observation{State: StatePending, Reason: ReasonUnschedulable, Message: fmt.Sprintf("pod %s: %s", pod.Name, c.Message)}
		}
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		return Observation{State: StateRunning, Reason: ReasonRunning, Message: "worker pod " + pod.Name + " is running"}
	case corev1.PodSucceeded, corev1.PodFailed:
		// The worker is done; the Job controller has not recorded it yet.
		// Stay Running rather than flicker back to Pending.
		return Observation{State: StateRunning, Reason: ReasonRunning,
			Message: fmt.Sprintf("worker pod %s %s; waiting for the Job to record it", pod.Name, strings.ToLower(string(pod.Status.Phase)))}
	}
	return Observation{State: StatePending, Reason: ReasonWaitingForPod, Message: fmt.Sprintf("pod %s is %s", pod.Name, podPhase(pod))}
}

func isImageProblem(reason string) bool {
	switch reason {
	case "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull":
		return true
	}
	return false
}

// workerTermination returns the newest pod whose worker container terminated.
func workerTermination(pods []corev1.Pod) (*corev1.Pod, *corev1.ContainerStateTerminated) {
	sorted := append([]corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool {
		return sorted[j].CreationTimestamp.Before(&sorted[i].CreationTimestamp)
	})
	for i := range sorted {
		for _, cs := range sorted[i].Status.ContainerStatuses {
			if cs.Name == workerContainer && cs.State.Terminated != nil {
				return &sorted[i], cs.State.Terminated
			}
		}
	}
	return nil, nil
}

func newestPod(pods []corev1.Pod) *corev1.Pod {
	newest := &pods[0]
	for i := range pods[1:] {
		if newest.CreationTimestamp.Before(&pods[i+1].CreationTimestamp) {
			newest = &pods[i+1]
		}
	}
	return newest
}

func podPhase(p *corev1.Pod) string {
	if p.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(p.Status.Phase)
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}
