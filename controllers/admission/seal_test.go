package admission_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/admission"
	"github.com/packline/packline/test/wrappers"
)

// A caller that is not the API server (any pod that reaches the webhook
// port) gets no TLS session from the webhook server, so no seal for the
// user it names; the API server, which presents its webhook client
// certificate, still gets its writes sealed.
func TestUnauthenticatedCallerGetsNoSeal(t *testing.T) {
	startWebhooks(t)
	ns := tenantNamespace(t)
	claim := wrappers.MakeClaim("forged", ns, "any").Obj()
	raw, _ := json.Marshal(claim)
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("1"), Operation: admissionv1.Create, Namespace: ns, Name: claim.Name,
			Kind:     metav1.GroupVersionKind{Group: "packline.dev", Version: "v1alpha1", Kind: "Claim"},
			Resource: metav1.GroupVersionResource{Group: "packline.dev", Version: "v1alpha1", Resource: "claims"},
			UserInfo: authenticationv1.UserInfo{Username: "system:admin", Groups: []string{"system:masters"}},
			Object:   runtime.RawExtension{Raw: raw}},
	}
	body, _ := json.Marshal(review)
	wh := env.Webhook()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(wh.LocalServingCAData)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := hc.Post(fmt.Sprintf("https://%s:%d%s", wh.LocalServingHost, wh.LocalServingPort, admission.MutateClaimPath), "application/json", bytes.NewReader(body))
	if err == nil {
		var got admissionv1.AdmissionReview
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		t.Fatalf("an unauthenticated caller was answered (%s, patch %q): it must not get a TLS session", resp.Status, got.Response.Patch)
	}
	t.Logf("refused: %v", err)

	// Through the API server, the same webhook seals.
	grant(t, ns, "alice", writeClaims())
	a := wrappers.MakeArtifact("sealed", ns).Obj()
	NewWithT(t).Expect(as(t, "alice").Create(context.Background(), a)).To(Succeed())
	got := &v1alpha1.Artifact{}
	NewWithT(t).Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(a), got)).To(Succeed())
	NewWithT(t).Expect(got.Annotations[v1alpha1.AnnotationRequester]).To(ContainSubstring(`"username":"alice"`))
	NewWithT(t).Expect(got.Annotations[v1alpha1.AnnotationRequesterSeal]).To(HavePrefix("v2.created."))
}

// A seal copied onto a re-created object of the same name and spec (one
// that reached etcd without the mutating webhook) is refused: the seal is
// bound to the object it was issued for. While the webhook configurations
// are gone, no seal is trusted at all.
func TestReplayedSealRefused(t *testing.T) {
	startManager(t, true)
	ctx := context.Background()
	ns := tenantNamespace(t)
	grant(t, ns, "alice", writeClaims(), getSecret("push-ok"))
	alice := as(t, "alice")
	a := wrappers.MakeArtifact("model", ns).PushSecret("push-ok").Obj()
	NewWithT(t).Expect(alice.Create(ctx, a)).To(Succeed())
	// A spec change binds the seal to the object's UID.
	stored := &v1alpha1.Artifact{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), stored)).To(Succeed())
		stored.Spec.Target.Tag = "v2"
		g.Expect(alice.Update(ctx, stored)).To(Succeed())
	}).WithTimeout(20 * time.Second).Should(Succeed())
	NewWithT(t).Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), stored)).To(Succeed())
	NewWithT(t).Expect(stored.Annotations[v1alpha1.AnnotationRequesterSeal]).To(HavePrefix("v2.uid."))
	sealed := stored.DeepCopy()

	// The object is deleted, and re-created with the same annotations
	// while the webhook configurations are gone.
	NewWithT(t).Expect(env.Client.Delete(ctx, stored)).To(Succeed())
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(a), &v1alpha1.Artifact{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	restore := removeWebhookConfigurations(t)
	NewWithT(t).Eventually(lastGuard.Err).WithTimeout(10*time.Second).Should(MatchError(ContainSubstring("not found")), "the manager sees the configurations gone")
	replay := wrappers.MakeArtifact("model", ns).PushSecret("push-ok").Tag("v2").Obj()
	replay.Annotations = map[string]string{
		v1alpha1.AnnotationRequester:     sealed.Annotations[v1alpha1.AnnotationRequester],
		v1alpha1.AnnotationRequesterSeal: sealed.Annotations[v1alpha1.AnnotationRequesterSeal],
	}
	NewWithT(t).Expect(env.Client.Create(ctx, replay)).To(Succeed())
	NewWithT(t).Expect(replay.Annotations[v1alpha1.AnnotationRequesterSeal]).To(Equal(sealed.Annotations[v1alpha1.AnnotationRequesterSeal]), "the webhook ran")
	condition := func(g Gomega, typ string) *metav1.Condition {
		got := &v1alpha1.Artifact{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(replay), got)).To(Succeed())
		c := apimeta.FindStatusCondition(got.Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil())
		return c
	}
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, v1alpha1.ConditionReady)
		g.Expect(c.Reason).To(Equal(controllers.ReasonEntitlementUnverified))
		g.Expect(c.Message).To(ContainSubstring("seals are not trusted: reading MutatingWebhookConfiguration mutating-webhook-configuration"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	restore()
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, v1alpha1.ConditionStalled)
		g.Expect(c.Reason).To(Equal(controllers.ReasonEntitlementUnverified))
		g.Expect(c.Message).To(ContainSubstring("spec.target.pushSecretRef names"))
		g.Expect(c.Message).To(ContainSubstring("the seal does not match"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	var jobs batchv1.JobList
	NewWithT(t).Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
	for _, j := range jobs.Items {
		for _, o := range j.OwnerReferences {
			if o.UID == replay.UID {
				t.Errorf("the replayed Artifact ran Job %s", j.Name)
			}
		}
	}
}

// removeWebhookConfigurations deletes envtest's webhook configurations and
// returns a function that puts them back as they were.
func removeWebhookConfigurations(t *testing.T) (restore func()) {
	t.Helper()
	ctx := context.Background()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g := NewWithT(t)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "mutating-webhook-configuration"}, m)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "validating-webhook-configuration"}, v)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, m.DeepCopy())).To(Succeed())
	g.Expect(env.Client.Delete(ctx, v.DeepCopy())).To(Succeed())
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		for _, o := range []client.Object{m, v} {
			o.SetResourceVersion("")
			o.SetUID("")
			o.SetManagedFields(nil)
			if err := env.Client.Create(ctx, o); err != nil {
				t.Errorf("restoring %s: %v", o.GetName(), err)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}

// An explicit "" for a field the schema defaults reaches the schema as it
// was written, and is refused there, naming the field, rather than as a
// requester annotation the user never wrote.
func TestEmptyDefaultedFieldNamesTheField(t *testing.T) {
	startWebhooks(t)
	ns := tenantNamespace(t)
	grant(t, ns, "alice", writeClaims())
	for _, field := range []string{"compression", "format", "deletionPolicy"} {
		t.Run(field, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("packline.dev/v1alpha1")
			u.SetKind("Artifact")
			u.SetNamespace(ns)
			u.SetName("empty-" + strings.ToLower(field))
			a := wrappers.MakeArtifact("x", ns).Obj()
			spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&a.Spec)
			if err != nil {
				t.Fatal(err)
			}
			spec[field] = ""
			u.Object["spec"] = spec
			err = as(t, "alice").Create(context.Background(), u)
			g := NewWithT(t)
			g.Expect(err).To(HaveOccurred())
			t.Logf("refused: %v", err)
			g.Expect(err.Error()).To(ContainSubstring("spec." + field))
			g.Expect(err.Error()).NotTo(ContainSubstring(v1alpha1.AnnotationRequester))
		})
	}
	t.Run("exposure.type", func(t *testing.T) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "packline.dev/v1alpha1", "kind": "Claim",
			"metadata": map[string]any{"name": "empty-exposure", "namespace": ns},
			"spec":     map[string]any{"templateRef": map[string]any{"name": "t"}, "exposure": map[string]any{"type": ""}},
		}}
		err := as(t, "alice").Create(context.Background(), u)
		g := NewWithT(t)
		g.Expect(err).To(HaveOccurred())
		t.Logf("refused: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("spec.exposure.type"))
		g.Expect(err.Error()).NotTo(ContainSubstring(v1alpha1.AnnotationRequester))
	})
}

// A value the schema lets through but the Go types refuse is refused
// naming its field.
func TestDecodeErrorNamesTheField(t *testing.T) {
	startWebhooks(t)
	ns := tenantNamespace(t)
	grant(t, ns, "alice", writeClaims())
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "packline.dev/v1alpha1", "kind": "Claim",
		"metadata": map[string]any{"name": "soon", "namespace": ns},
		"spec": map[string]any{"templateRef": map[string]any{"name": "t"},
			"delivery": map[string]any{"flux": map[string]any{"interval": "soon"}}},
	}}
	err := as(t, "alice").Create(context.Background(), u)
	g := NewWithT(t)
	g.Expect(err).To(HaveOccurred())
	t.Logf("refused: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.delivery.flux.interval"))
}

// generateName is supported: the seal covers the prefix the API server
// generates the name from.
func TestGenerateName(t *testing.T) {
	startWebhooks(t)
	ns := tenantNamespace(t)
	grant(t, ns, "alice", writeClaims())
	a := wrappers.MakeArtifact("", ns).Obj()
	a.GenerateName = "run-"
	g := NewWithT(t)
	g.Expect(as(t, "alice").Create(context.Background(), a)).To(Succeed())
	g.Expect(a.Name).To(HavePrefix("run-"))
	g.Expect(a.Annotations[v1alpha1.AnnotationRequesterSeal]).To(HavePrefix("v2.created."))
}
