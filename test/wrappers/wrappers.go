// Package wrappers has fluent builders of Jobs and Pods in the states the
// Job controller and the kubelet put them in, for table tests and for
// envtest suites that play those components' part.
package wrappers

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// JobWrapper builds a Job.
type JobWrapper struct{ batchv1.Job }

// MakeJob starts a Job builder.
func MakeJob(name, ns string) *JobWrapper {
	return &JobWrapper{batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}}
}

// Obj returns the Job.
func (w *JobWrapper) Obj() *batchv1.Job { return &w.Job }

// Suspend sets spec.suspend.
func (w *JobWrapper) Suspend(s bool) *JobWrapper { w.Spec.Suspend = ptr.To(s); return w }

// ManagedBy hands the Job to another controller (spec.managedBy).
func (w *JobWrapper) ManagedBy(c string) *JobWrapper { w.Spec.ManagedBy = ptr.To(c); return w }

// Active marks one running pod, as the Job controller does.
func (w *JobWrapper) Active() *JobWrapper {
	w.Status.Active = 1
	w.Status.StartTime = ptr.To(metav1.Now())
	return w
}

// Complete sets the conditions the Job controller writes on success.
func (w *JobWrapper) Complete() *JobWrapper {
	now := metav1.Now()
	if w.Status.StartTime == nil {
		w.Status.StartTime = &now
	}
	w.Status.Active, w.Status.Succeeded, w.Status.Ready = 0, 1, ptr.To[int32](0)
	w.Status.CompletionTime = &now
	w.Status.Conditions = append(w.Status.Conditions,
		cond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
		cond(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"))
	return w
}

// Failed sets the conditions the Job controller writes on failure, with
// reason BackoffLimitExceeded or DeadlineExceeded.
func (w *JobWrapper) Failed(reason string) *JobWrapper {
	now := metav1.Now()
	if w.Status.StartTime == nil {
		w.Status.StartTime = &now
	}
	w.Status.Active, w.Status.Failed, w.Status.Ready = 0, 1, ptr.To[int32](0)
	w.Status.Conditions = append(w.Status.Conditions,
		cond(batchv1.JobFailureTarget, reason, "Job failed"),
		cond(batchv1.JobFailed, reason, "Job failed"))
	return w
}

func cond(t batchv1.JobConditionType, reason, msg string) batchv1.JobCondition {
	now := metav1.Now()
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now}
}

// PodWrapper builds a worker Pod.
type PodWrapper struct{ corev1.Pod }

// MakePod starts a Pod builder for a Job's pod.
func MakePod(name, ns, job string) *PodWrapper {
	return &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{batchv1.JobNameLabel: job},
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0))},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "worker", Image: "worker"}}},
	}}
}

// Obj returns the Pod.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.Pod }

// ControlledBy sets the controller owner reference the Job controller gives
// the pods it makes (packline's cache keeps only such pods).
func (w *PodWrapper) ControlledBy(job *batchv1.Job) *PodWrapper {
	w.Pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
	return w
}

// Labels adds labels.
func (w *PodWrapper) Labels(l map[string]string) *PodWrapper {
	for k, v := range l {
		w.Pod.Labels[k] = v
	}
	return w
}

// Created sets the creation time.
func (w *PodWrapper) Created(t time.Time) *PodWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Unschedulable is what the scheduler writes when no node fits.
func (w *PodWrapper) Unschedulable(msg string) *PodWrapper {
	w.Status.Phase = corev1.PodPending
	w.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.Now()}}
	return w
}

// Waiting is what the kubelet writes for a container that cannot start.
func (w *PodWrapper) Waiting(reason, msg string) *PodWrapper {
	w.Status.Phase = corev1.PodPending
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", Image: "worker",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	return w
}

// Creating is what the kubelet writes for a bound pod whose volumes are
// not set up yet: a mount it cannot make keeps it here, and only the pod's
// FailedMount events say why.
func (w *PodWrapper) Creating() *PodWrapper {
	w.Status.Phase = corev1.PodPending
	w.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", Image: "worker",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	return w
}

// Running is what the kubelet writes for a started container.
func (w *PodWrapper) Running() *PodWrapper {
	w.Status.Phase = corev1.PodRunning
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", Image: "worker", Ready: true, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	return w
}

// Terminated is what the kubelet writes when the container exits, with the
// termination message it read from the container.
func (w *PodWrapper) Terminated(exitCode int32, message string) *PodWrapper {
	w.Status.Phase = corev1.PodSucceeded
	reason := "Completed"
	if exitCode != 0 {
		w.Status.Phase, reason = corev1.PodFailed, "Error"
	}
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", Image: "worker",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: exitCode, Reason: reason, Message: message, StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}
	return w
}

// OOMKilled is what the kubelet writes when the kernel killed the worker
// container for exceeding limit (its memory limit, "" for none).
func (w *PodWrapper) OOMKilled(limit string) *PodWrapper {
	w.Terminated(137, "")
	w.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
	if limit != "" {
		// The kubelet records the applied limits in the container status,
		// which is what the manager's cache keeps (not the spec).
		w.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}
	}
	return w
}

// Evicted is what the kubelet's eviction manager writes on the pod it
// evicts: phase Failed, reason Evicted and its message, and (as seen on
// a real node) the container killed with exit code 137, reason Error.
func (w *PodWrapper) Evicted(msg string) *PodWrapper {
	w.Terminated(137, "")
	w.Status.Reason, w.Status.Message = "Evicted", msg
	return w
}

// DeepCopyObject is not a runtime.Object's: call Obj() (see api.go).
func (w *JobWrapper) DeepCopyObject(mustCallObj) {}

// DeepCopyObject is not a runtime.Object's: call Obj() (see api.go).
func (w *PodWrapper) DeepCopyObject(mustCallObj) {}
