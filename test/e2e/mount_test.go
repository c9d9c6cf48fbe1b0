package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// TestMissingMountReported: a run whose push Secret (a volume) or source
// PVC does not exist says so in status within 30 s, naming it and its
// field: from the node's FailedMount event for the Secret, from the
// scheduler's Unschedulable condition for the PVC. Once the Secret exists,
// the node mounts it and the run goes on with no edit.
func TestMissingMountReported(t *testing.T) {
	ns := newNamespace(t)
	within30s := func(a *v1alpha1.Artifact, reason string, want ...string) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
			ready := condition(&a.Status, "Ready")
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(reason), "message %q", ready.Message)
			for _, w := range want {
				g.Expect(ready.Message).To(ContainSubstring(w))
			}
		}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "logs in %s", logsHint())
	}

	t.Run("push Secret", func(t *testing.T) {
		a := newArtifact(ns, "no-push-secret", "packline/tiny-model").PushSecret("absent-push").Obj()
		create(t, a)
		within30s(a, "FailedMount",
			`MountVolume.SetUp failed for volume "push-auth" : secret "absent-push" not found`,
			`Secret "absent-push" (spec.target.pushSecretRef, key .dockerconfigjson)`)
		create(t, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "absent-push", Namespace: ns},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
		})
		waitReady(t, a, a.GetPipelineStatus)
	})
	t.Run("source PVC", func(t *testing.T) {
		a := newArtifact(ns, "no-pvc", "packline/tiny-model").Volume("absent-models").Obj()
		create(t, a)
		within30s(a, "Unschedulable",
			`persistentvolumeclaim "absent-models" not found`,
			`PersistentVolumeClaim "absent-models" (spec.source.volume.claimName)`)
	})
}
