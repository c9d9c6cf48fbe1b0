package pipeline

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/packline/packline/api/v1alpha1"
	. "github.com/packline/packline/test/wrappers"
)

// kubeletEvent is a FailedMount event as the kubelet records it on a pod.
func kubeletEvent(pod *corev1.Pod, at time.Time, msg string) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: pod.Name + ".1", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Reason:         ReasonFailedMount, Type: corev1.EventTypeWarning, Message: msg,
		Source:        corev1.EventSource{Component: "kubelet"},
		LastTimestamp: metav1.NewTime(at),
	}
}

func TestMountFailure(t *testing.T) {
	pod := MakePod("p", "ns", "j").Creating().Obj()
	pod.UID = types.UID("uid-p")
	t0 := time.Unix(1_700_000_000, 0)
	setUp := `MountVolume.SetUp failed for volume "push-auth" : secret "push" not found`
	timedOut := `Unable to attach or mount volumes: unmounted volumes=[push-auth], unattached volumes=[], failed to process volumes=[]: context deadline exceeded`
	other := kubeletEvent(pod, t0, setUp)
	other.InvolvedObject.UID = "an-earlier-pod"
	normal := kubeletEvent(pod, t0, setUp)
	normal.Type = corev1.EventTypeNormal
	cases := []struct {
		name   string
		events []corev1.Event
		want   Observation
		ok     bool
	}{
		{"no events", nil, Observation{}, false},
		{"another pod's event", []corev1.Event{other}, Observation{}, false},
		{"not a warning", []corev1.Event{normal}, Observation{}, false},
		{"missing secret", []corev1.Event{kubeletEvent(pod, t0, setUp)},
			Observation{State: StatePending, Reason: ReasonFailedMount, Message: "pod p cannot start: " + setUp}, true},
		{"the SetUp failure names the cause, the later timeout only the volume",
			[]corev1.Event{kubeletEvent(pod, t0, setUp), kubeletEvent(pod, t0.Add(2*time.Minute), timedOut)},
			Observation{State: StatePending, Reason: ReasonFailedMount, Message: "pod p cannot start: " + setUp}, true},
		{"only the timeout", []corev1.Event{kubeletEvent(pod, t0, timedOut)},
			Observation{State: StatePending, Reason: ReasonFailedMount, Message: "pod p cannot start: " + timedOut}, true},
		{"newest SetUp failure wins", []corev1.Event{
			kubeletEvent(pod, t0, setUp),
			kubeletEvent(pod, t0.Add(time.Second), `MountVolume.SetUp failed for volume "push-auth" : references non-existent secret key: .dockerconfigjson`)},
			Observation{State: StatePending, Reason: ReasonFailedMount,
				Message: `pod p cannot start: MountVolume.SetUp failed for volume "push-auth" : references non-existent secret key: .dockerconfigjson`}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MountFailure(pod, tc.events)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MountFailure (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWaitingOnNode: only a bound pod that has started no container can be
// held by a mount, so only then are its events read.
func TestWaitingOnNode(t *testing.T) {
	job := MakeJob("j", "ns").Active().Obj()
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"creating", MakePod("p", "ns", "j").Creating().Obj(), true},
		{"not yet bound", MakePod("p", "ns", "j").Obj(), false},
		{"unschedulable", MakePod("p", "ns", "j").Unschedulable(`0/1 nodes are available: persistentvolumeclaim "data" not found.`).Obj(), false},
		{"running", MakePod("p", "ns", "j").Running().Obj(), false},
		{"config error", MakePod("p", "ns", "j").Waiting(ReasonConfigError, `secret "x" not found`).Obj(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pods := []corev1.Pod{*tc.pod}
			if got := waitingOnNode(Observe(job, pods), pods) != nil; got != tc.want {
				t.Errorf("waitingOnNode = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMountHint: the message names the Secret or PVC and the spec field
// that names it, whichever way the pod reports it.
func TestMountHint(t *testing.T) {
	var m Mounts
	m.Target(v1alpha1.Target{
		PushSecretRef: &corev1.LocalObjectReference{Name: "push"},
		CASecretRef:   &corev1.LocalObjectReference{Name: "ca"},
	}, "r.example.com/m")
	m.Volumes = append(m.Volumes, corev1.Volume{Name: "source-volume", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
	m.Source("source-volume", `PersistentVolumeClaim "data" (spec.source.volume.claimName)`)
	const waits = "the worker pod waits for "
	const rest = "; the run goes on by itself once it exists"
	cases := []struct {
		name string
		o    Observation
		want string
	}{
		{"push secret missing", Observation{Reason: ReasonFailedMount,
			Message: `pod p cannot start: MountVolume.SetUp failed for volume "push-auth" : secret "push" not found`},
			waits + `Secret "push" (spec.target.pushSecretRef, key .dockerconfigjson)` + rest},
		{"push secret of the wrong type", Observation{Reason: ReasonFailedMount,
			Message: `pod p cannot start: MountVolume.SetUp failed for volume "push-auth" : references non-existent secret key: .dockerconfigjson`},
			waits + `Secret "push" (spec.target.pushSecretRef, key .dockerconfigjson)` + rest},
		{"CA secret missing", Observation{Reason: ReasonFailedMount,
			Message: `pod p cannot start: MountVolume.SetUp failed for volume "registry-ca" : secret "ca" not found`},
			waits + `Secret "ca" (spec.target.caSecretRef, key ca.crt)` + rest},
		{"kubelet timed out", Observation{Reason: ReasonFailedMount,
			Message: `pod p cannot start: Unable to attach or mount volumes: unmounted volumes=[source-volume], unattached volumes=[], failed to process volumes=[source-volume]: error processing PVC ns/data: failed to fetch PVC from API server: persistentvolumeclaims "data" not found`},
			waits + `PersistentVolumeClaim "data" (spec.source.volume.claimName)` + rest},
		{"scheduler: PVC missing", Observation{Reason: ReasonUnschedulable,
			Message: `pod p: 0/1 nodes are available: persistentvolumeclaim "data" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`},
			waits + `PersistentVolumeClaim "data" (spec.source.volume.claimName)` + rest},
		{"scheduler: another PVC", Observation{Reason: ReasonUnschedulable,
			Message: `pod p: 0/1 nodes are available: persistentvolumeclaim "llama-workspace" not found.`}, ""},
		{"a volume of the manager's own", Observation{Reason: ReasonFailedMount,
			Message: `pod p cannot start: MountVolume.SetUp failed for volume "tmp" : no space left`}, ""},
		{"insufficient memory", Observation{Reason: ReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient memory."}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, m.MountHint(tc.o)); diff != "" {
				t.Errorf("MountHint (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFailedMountMessage: the status a FailedMount sets names the kubelet's
// cause and the spec field; in the template namespace (a private
// template's run), the admin's Secret name is not shown to the tenant.
func TestFailedMountMessage(t *testing.T) {
	kubelet := `pod p cannot start: MountVolume.SetUp failed for volume "push-auth" : secret "admin-push" not found`
	cases := []struct {
		name      string
		namespace string
		source    string
		want      string
	}{
		{"the tenant's own run", "", "",
			kubelet + `: the worker pod waits for Secret "admin-push" (spec.target.pushSecretRef, key .dockerconfigjson); the run goes on by itself once it exists`},
		{"a private template's run", "packline-system", "the push Secret of ClaimTemplate web spec.pushSecretRef in the template namespace (a platform admin must create it)",
			`volume "push-auth" cannot be mounted: the worker pod waits for the push Secret of ClaimTemplate web spec.pushSecretRef in the template namespace (a platform admin must create it); the run goes on by itself once it exists`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m Mounts
			m.Target(v1alpha1.Target{PushSecretRef: &corev1.LocalObjectReference{Name: "admin-push"}}, "r.example.com/m")
			if tc.source != "" {
				m.Source(VolumePushAuth, tc.source)
			}
			c := &v1alpha1.Claim{}
			s := &scope{obj: c, owner: owner, status: c.GetPipelineStatus(), work: Work{Mounts: m, Namespace: tc.namespace}}
			p := &Pipeline{Config: DefaultConfig()}
			p.apply(s, Observation{State: StatePending, Reason: ReasonFailedMount, Message: kubelet})
			ready := s.status.Conditions[0]
			if ready.Reason != ReasonFailedMount {
				t.Errorf("reason = %s", ready.Reason)
			}
			if diff := cmp.Diff(tc.want, ready.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}
