package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/sandbox"
)

// The registry goes down while a worker is mid-run: the push fails with a
// retryable error, the controller retries with backoff, and the Artifact
// becomes Ready once the registry is back.
func TestRegistryOutageMidRunRetriesUntilReady(t *testing.T) {
	release := sb.HF.Hold()
	defer release()
	ns := newNamespace(t)
	a := newArtifact(ns, "outage", "packline/tiny-model").Obj()
	a.Spec.RetryLimit = ptr.To[int32](20)
	create(t, a)
	waitRunningPod(t, ns, a.Name)

	sb.Registry.Stop()
	restarted := false
	defer func() {
		if !restarted {
			_ = sb.Registry.Start()
		}
	}()
	release()
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(a.Status.Attempts).To(BeNumerically(">=", 2), "phase %s", a.Status.Phase)
		g.Expect(isTrue(&a.Status, "Ready")).To(BeFalse())
		g.Expect(isTrue(&a.Status, "Stalled")).To(BeFalse(), "an unreachable registry is not a permanent failure")
	}).Should(Succeed())

	NewWithT(t).Expect(sb.Registry.Start()).To(Succeed())
	restarted = true
	waitReady(t, a, a.GetPipelineStatus)
	g := NewWithT(t)
	g.Expect(a.Status.Attempts).To(BeNumerically(">=", 2))
	_, err := sb.Pull(context.Background(), a.Status.Reference)
	g.Expect(err).NotTo(HaveOccurred())
	// Each attempt had its own Job, one per attempt number.
	seen := map[string]bool{}
	for _, j := range ownedJobs(g, ns, a.Name) {
		key := j.Labels["packline.dev/generation"] + "/" + j.Labels["packline.dev/attempt"]
		g.Expect(seen[key]).To(BeFalse(), "two Jobs for generation/attempt %s", key)
		seen[key] = true
	}
	g.Expect(len(seen)).To(BeNumerically(">=", 2))
}

// Wrong credentials are a permanent failure: Stalled, with a message that
// names the Secret to fix. The right ones, through the same mounted
// DOCKER_CONFIG path, push.
func TestRegistryCredentials(t *testing.T) {
	reg, err := sandbox.StartRegistry(sandbox.RegistryOptions{
		Dir: filepath.Join(t.TempDir(), "auth-registry"), Bin: registryBin, Users: map[string]string{"alice": "right-password"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	ns := newNamespace(t)
	secret := func(name, password string) *corev1.Secret {
		auth := base64.StdEncoding.EncodeToString([]byte("alice:" + password))
		cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
		}
	}
	create(t, secret("push-wrong", "wrong-password"))
	create(t, secret("push-right", "right-password"))
	artifact := func(name, secret string) *v1alpha1.Artifact {
		a := newArtifact(ns, name, "packline/tiny-model").Obj()
		a.Spec.Target.Repository = reg.Host + "/e2e/" + name
		a.Spec.Target.PushSecretRef = &corev1.LocalObjectReference{Name: secret}
		return a
	}
	wrong, right := artifact("wrong-creds", "push-wrong"), artifact("right-creds", "push-right")
	create(t, wrong)
	create(t, right)

	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(wrong), wrong)).To(Succeed())
		stalled := condition(&wrong.Status, "Stalled")
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Message).To(ContainSubstring("push-wrong"))
	}).Should(Succeed())
	g := NewWithT(t)
	g.Expect(wrong.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
	g.Expect(wrong.Status.Attempts).To(Equal(int32(1)), "an auth failure must not be retried")
	g.Expect(wrong.Status.Conditions).NotTo(ContainElement(HaveField("Message", ContainSubstring("wrong-password"))))

	waitReady(t, right, right.GetPipelineStatus)
}
