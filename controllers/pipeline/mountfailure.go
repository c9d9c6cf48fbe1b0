package pipeline

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReasonFailedMount is the kubelet's event reason for a volume it cannot
// set up: a Secret, a key of one, or a PVC that does not exist. The pod
// stays in ContainerCreating, and its status says nothing more: only the
// pod's events name the cause. The kubelet retries, so the run goes on by
// itself once the object exists.
const ReasonFailedMount = "FailedMount"

// mountPoll is how often a pod still creating its containers is looked at
// again: a failed mount changes no pod status, so no watch brings it back.
const mountPoll = 10 * time.Second

// creating reports whether pod is on a node that has not started any of
// its containers yet: where a volume it cannot mount holds it.
func creating(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
		return false
	}
	scheduled := false
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			scheduled = true
		}
	}
	if !scheduled {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return false
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "ContainerCreating" && w.Reason != "" {
			return false
		}
	}
	return true
}

// waitingOnNode is an observation of a pod that may be held by a volume
// mount (see creating); only its events can tell.
func waitingOnNode(o Observation, pods []corev1.Pod) *corev1.Pod {
	if o.State != StatePending || o.Reason != ReasonWaitingForPod || len(pods) == 0 {
		return nil
	}
	if pod := newestPod(pods); creating(pod) {
		return pod
	}
	return nil
}

// MountFailure reads the kubelet's FailedMount events of pod, which is
// still creating its containers. The newest SetUp failure wins, since it
// names the cause (`MountVolume.SetUp failed for volume "push-auth" :
// secret "push" not found`); else the newest event (`Unable to attach or
// mount volumes: unmounted volumes=[source-volume], ...`, for a PVC the
// kubelet cannot process, or its two-minute wait timing out).
func MountFailure(pod *corev1.Pod, events []corev1.Event) (Observation, bool) {
	var mine []corev1.Event
	for _, e := range events {
		if e.Reason == ReasonFailedMount && e.Type == corev1.EventTypeWarning && e.InvolvedObject.UID == pod.UID {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		return Observation{}, false
	}
	sort.SliceStable(mine, func(i, j int) bool { return eventTime(mine[j]).Before(eventTime(mine[i])) })
	// A SetUp failure says why; the later timeout only which volumes.
	best := mine[0]
	for _, e := range mine {
		if strings.HasPrefix(e.Message, "MountVolume.SetUp failed") {
			best = e
			break
		}
	}
	return Observation{State: StatePending, Reason: ReasonFailedMount,
		Message: fmt.Sprintf("pod %s cannot start: %s", pod.Name, best.Message)}, true
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

var (
	// The kubelet's messages name the pod's volume:
	// `MountVolume.SetUp failed for volume "NAME" : ...` and
	// `Unable to attach or mount volumes: unmounted volumes=[NAME ...], ...`.
	forVolume        = regexp.MustCompile(`for volume "([^"]+)"`)
	unmountedVolumes = regexp.MustCompile(`unmounted volumes=\[([^\] ]+)`)
	// The scheduler's, the claim: `persistentvolumeclaim "NAME" not found`.
	claimNotFound = regexp.MustCompile(`persistentvolumeclaim "([^"]+)" not found`)
)

// blockedVolume names the pod volume an observation says cannot be set
// up: from the kubelet's FailedMount message, or from the scheduler's
// "persistentvolumeclaim not found", through the volumes of m.
func blockedVolume(o Observation, m Mounts) string {
	switch o.Reason {
	case ReasonFailedMount:
		for _, re := range []*regexp.Regexp{forVolume, unmountedVolumes} {
			if s := re.FindStringSubmatch(o.Message); s != nil {
				return s[1]
			}
		}
	case ReasonUnschedulable:
		if s := claimNotFound.FindStringSubmatch(o.Message); s != nil {
			for _, v := range m.Volumes {
				if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == s[1] {
					return v.Name
				}
			}
		}
	}
	return ""
}

// MountHint tells the user which object of the spec a pod that cannot
// mount a volume waits for, and by which field (see Mounts.Sources); ""
// when the observation is not about one of m's volumes.
func (m Mounts) MountHint(o Observation) string {
	ref := m.MountSource(o)
	if ref == "" {
		return ""
	}
	return fmt.Sprintf("the worker pod waits for %s; the run goes on by itself once it exists", ref)
}

// MountSource is the object, and the field naming it, of the volume an
// observation says cannot be set up; "" if none of m's.
func (m Mounts) MountSource(o Observation) string {
	return m.Sources[blockedVolume(o, m)]
}

// +kubebuilder:rbac:groups="",resources=events,verbs=list

// podEvents lists the FailedMount events of pod, past the cache: the
// manager caches no events, and a pod in ContainerCreating is rare and
// short-lived enough that one filtered list per look costs little.
func podEvents(ctx context.Context, r client.Reader, pod *corev1.Pod) ([]corev1.Event, error) {
	var list corev1.EventList
	sel := fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)),
		fields.OneTermEqualSelector("reason", ReasonFailedMount))
	if err := r.List(ctx, &list, client.InNamespace(pod.Namespace), client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing events of pod %s: %w", pod.Name, err)
	}
	return list.Items, nil
}
