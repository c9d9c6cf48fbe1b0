package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// shellJob is a Job whose pod runs script with /bin/sh on the process node,
// with a Secret and a ConfigMap as env and volume.
func shellJob(ns, name, image, script string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: image, Command: []string{"/bin/sh", "-c", script},
					Env: []corev1.EnvVar{
						{Name: "GREETING", Value: "hello"},
						{Name: "SECRET_VALUE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "token"}}},
						{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "mode"}}},
						{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "MESSAGE", Value: "$(GREETING) from $(POD)"},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "app", MountPath: "/etc/app", ReadOnly: true},
						{Name: "scratch", MountPath: "/scratch"},
					},
				}},
				Volumes: []corev1.Volume{
					{Name: "app", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: "app", Items: []corev1.KeyToPath{{Key: "token", Path: "nested/token.txt"}}}}},
					{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
			}},
		},
	}
}

func appConfig(t *testing.T, ns string) {
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Data: map[string][]byte{"token": []byte("s3cr3t")}})
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Data: map[string]string{"mode": "fast"}})
}

func jobPod(g Gomega, ns, job string) *corev1.Pod {
	var pods corev1.PodList
	g.Expect(sb.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	return &pods.Items[0]
}

func jobHas(g Gomega, ns, name string, cond batchv1.JobConditionType) {
	j := &batchv1.Job{}
	g.Expect(sb.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j)).To(Succeed())
	g.Expect(j.Status.Conditions).To(ContainElement(And(HaveField("Type", cond), HaveField("Status", corev1.ConditionTrue))))
}

// The node resolves env (valueFrom, fieldRef, $(VAR)), materialises Secret
// items as files, and reports the termination message and exit code.
func TestProcessNodeRunsPodsLikeAKubelet(t *testing.T) {
	ns := newNamespace(t)
	appConfig(t, ns)
	create(t, shellJob(ns, "ok", shellImage,
		`printf '%s|%s|%s|%s' "$MESSAGE" "$SECRET_VALUE" "$MODE" "$(cat "$APP_DIR/nested/token.txt")" > "$TERM_LOG"`))
	create(t, shellJob(ns, "fails", shellImage, `echo broken > "$TERM_LOG"; exit 3`))

	waitFor(t, func(g Gomega) { jobHas(g, ns, "ok", batchv1.JobComplete) }).Should(Succeed())
	waitFor(t, func(g Gomega) { jobHas(g, ns, "fails", batchv1.JobFailed) }).Should(Succeed())
	g := NewWithT(t)
	ok := jobPod(g, ns, "ok")
	g.Expect(ok.Status.Phase).To(Equal(corev1.PodSucceeded))
	term := ok.Status.ContainerStatuses[0].State.Terminated
	g.Expect(term).NotTo(BeNil())
	g.Expect(term.Message).To(Equal("hello from " + ok.Name + "|s3cr3t|fast|s3cr3t"))
	failed := jobPod(g, ns, "fails")
	g.Expect(failed.Status.Phase).To(Equal(corev1.PodFailed))
	term = failed.Status.ContainerStatuses[0].State.Terminated
	g.Expect(term.ExitCode).To(Equal(int32(3)))
	g.Expect(term.Reason).To(Equal("Error"))
	g.Expect(strings.TrimSpace(term.Message)).To(Equal("broken"))
}

// Deleting a running pod kills its process (and anything it forked).
func TestProcessNodeKillsDeletedPod(t *testing.T) {
	ns := newNamespace(t)
	appConfig(t, ns)
	create(t, shellJob(ns, "sleeper", shellImage, `sleep 300 & echo $! > "$SCRATCH/pid"; wait`))
	var pod *corev1.Pod
	waitFor(t, func(g Gomega) {
		pod = jobPod(g, ns, "sleeper")
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "status %+v", pod.Status.ContainerStatuses)
	}).Should(Succeed())
	var pid int
	waitFor(t, func(g Gomega) {
		b, err := os.ReadFile(filepath.Join(sb.Dir, "node", "pods", ns+"_"+pod.Name+"_"+string(pod.UID), "volumes", "scratch", "pid"))
		g.Expect(err).NotTo(HaveOccurred())
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed())
	NewWithT(t).Expect(alive(pid)).To(BeTrue(), "the pod's process runs")

	NewWithT(t).Expect(sb.Client.Delete(context.Background(), pod)).To(Succeed())
	waitFor(t, func(g Gomega) {
		err := sb.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod still there: %v", err)
	}).Should(Succeed())
	NewWithT(t).Expect(alive(pid)).To(BeFalse(), "process %d outlived its pod", pid)
}

// alive: the process exists and is not a zombie. The killed sleep is
// reparented to PID 1, which in a container may never reap it.
func alive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// An image the node has no binary for stays Pending with ImagePullBackOff
// and a Warning event, as on a real node.
func TestProcessNodeUnknownImage(t *testing.T) {
	ns := newNamespace(t)
	appConfig(t, ns)
	create(t, shellJob(ns, "unknown", "example.com/not-here:1", "true"))
	var pod *corev1.Pod
	waitFor(t, func(g Gomega) {
		pod = jobPod(g, ns, "unknown")
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
		g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
		w := pod.Status.ContainerStatuses[0].State.Waiting
		g.Expect(w).NotTo(BeNil())
		g.Expect(w.Reason).To(Equal("ImagePullBackOff"))
	}).Should(Succeed())
	waitFor(t, func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(sb.Client.List(context.Background(), &evs, client.InNamespace(ns))).To(Succeed())
		g.Expect(evs.Items).To(ContainElement(And(
			HaveField("Regarding.Name", pod.Name),
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Note", ContainSubstring("example.com/not-here:1")))))
	}).Should(Succeed())
}

// A worker image the node cannot pull shows up in the Artifact's status,
// from the pod's real ImagePullBackOff, instead of a silent Pending.
func TestUnpullableWorkerImageIsReported(t *testing.T) {
	const image = "example.com/missing/worker:0"
	sb.StopManager()
	g := NewWithT(t)
	g.Expect(sb.StartManager("--worker-image=" + image)).To(Succeed())
	defer func() {
		sb.StopManager()
		g.Expect(sb.StartManager()).To(Succeed())
	}()
	ns := newNamespace(t)
	a := newArtifact(ns, "no-image", "packline/tiny-model").Obj()
	create(t, a)
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		ready := condition(&a.Status, "Ready")
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal("ImagePullBackOff"))
		g.Expect(ready.Message).To(ContainSubstring(image))
	}).Should(Succeed())
}

// A Secret volume whose Secret does not exist: as the kubelet (the real
// node's TestMissingPushSecretNamedFromFailedMount shows it), the process
// node says so only in a FailedMount event, and the container waits as
// ContainerCreating with no message.
func TestProcessNodeMissingSecretVolume(t *testing.T) {
	ns := newNamespace(t)
	appConfig(t, ns)
	j := shellJob(ns, "no-secret", shellImage, "true")
	j.Spec.Template.Spec.Volumes = append(j.Spec.Template.Spec.Volumes, corev1.Volume{Name: "creds",
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent"}}})
	create(t, j)
	waitFor(t, func(g Gomega) {
		var events corev1.EventList
		g.Expect(sb.Client.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
		var mounts []string
		for _, e := range events.Items {
			if e.Reason == "FailedMount" {
				mounts = append(mounts, e.Message)
			}
		}
		g.Expect(mounts).To(ContainElement(`MountVolume.SetUp failed for volume "creds" : secret "absent" not found`))
		p := jobPod(g, ns, j.Name)
		g.Expect(p.Status.ContainerStatuses).To(ConsistOf(HaveField("State.Waiting", Equal(&corev1.ContainerStateWaiting{Reason: "ContainerCreating"}))))
	}).Should(Succeed())
}
