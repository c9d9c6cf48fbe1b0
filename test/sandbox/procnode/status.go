package procnode

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pendingStatus is a bound pod whose containers have not started.
func pendingStatus(st *corev1.PodStatus, pod *corev1.Pod, ip string) {
	st.Phase = corev1.PodPending
	st.HostIP, st.PodIP = "127.0.0.1", ip
	st.HostIPs, st.PodIPs = []corev1.HostIP{{IP: "127.0.0.1"}}, []corev1.PodIP{{IP: ip}}
	setCondition(st, corev1.PodScheduled, corev1.ConditionTrue, "")
	setCondition(st, corev1.PodInitialized, corev1.ConditionTrue, "")
	setCondition(st, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady")
	setCondition(st, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")
	if len(st.ContainerStatuses) != len(pod.Spec.Containers) {
		st.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			})
		}
	}
}

func runningStatus(st *corev1.PodStatus, pod *corev1.Pod, r *podRun) {
	st.Phase = corev1.PodRunning
	st.HostIP, st.PodIP = "127.0.0.1", r.ip
	st.HostIPs, st.PodIPs = []corev1.HostIP{{IP: "127.0.0.1"}}, []corev1.PodIP{{IP: r.ip}}
	st.StartTime = &r.started
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized} {
		setCondition(st, t, corev1.ConditionTrue, "")
	}
	st.ContainerStatuses = nil
	for _, c := range r.procs {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.spec.name, Image: c.spec.image, ImageID: "process://" + c.spec.argv[0],
			ContainerID: fmt.Sprintf("process://%d", c.pid),
			Started:     ptrBool(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: c.started}},
		})
	}
	readiness(st, r)
}

// terminatedStatus reports every container's exit; with restartPolicy Never
// (all packline pods) the pod is Succeeded only if all exited 0.
func terminatedStatus(st *corev1.PodStatus, pod *corev1.Pod, r *podRun) {
	st.Phase = corev1.PodSucceeded
	st.StartTime = &r.started
	st.ContainerStatuses = nil
	for _, c := range r.procs {
		if c.exitCode != 0 {
			st.Phase = corev1.PodFailed
		}
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.spec.name, Image: c.spec.image, ImageID: "process://" + c.spec.argv[0],
			ContainerID: fmt.Sprintf("process://%d", c.pid),
			Started:     ptrBool(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: c.exitCode, Reason: c.reason, Message: c.message,
				StartedAt: c.started, FinishedAt: c.finished,
				ContainerID: fmt.Sprintf("process://%d", c.pid),
			}},
		})
	}
	setCondition(st, corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted")
	setCondition(st, corev1.PodReady, corev1.ConditionFalse, "PodCompleted")
}

func setCondition(st *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, reason string) {
	now := metav1.Now()
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type == t {
			if c.Status != s {
				c.LastTransitionTime = now
			}
			// A message belongs to the reason it came with (unschedulable).
			c.Status, c.Reason, c.Message = s, reason, ""
			return
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now})
}

func ptrBool(b bool) *bool { return &b }
