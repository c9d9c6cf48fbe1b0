package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

const sigDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// TestArtifactSigningStatus drives a signed Artifact through a signature
// push that fails after the artifact push: status shows the pushed digest
// and Signed=False, the next attempt is told the digest (it only signs),
// and its success sets status.signature and Signed=True.
func TestArtifactSigningStatus(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "signed"}
	a := wrappers.MakeArtifact(key.Name, ns).Obj()
	a.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "cosign-key"}}
	create(t, a)

	job := waitJob(t, ns, key.Name, 1, 1)
	pod := job.Spec.Template.Spec
	var mounted bool
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "cosign-key" {
			mounted = true
		}
	}
	g := NewWithT(t)
	g.Expect(mounted).To(BeTrue(), "the signing key Secret is not mounted")
	var doc workerv1.Artifact
	g.Expect(workerv1.DecodeSpec([]byte(envOf(pod.Containers[0])[workerv1.EnvSpec]), &doc)).To(Succeed())
	g.Expect(doc.Signing).NotTo(BeNil())
	g.Expect(doc.Signing.Resource).To(Equal(workerv1.Resource{Kind: "Artifact", Namespace: ns, Name: key.Name, UID: string(getArtifact(g, key).UID), Generation: 1}))
	g.Expect(envOf(pod.Containers[0])).NotTo(HaveKey(workerv1.EnvPushedDigest))

	ref := "registry.example.com/acme/tiny@" + digest
	runJob(t, job, 1, fmt.Sprintf(`{"error":{"reason":"SignaturePushFailed","message":"%s is pushed, but attaching its signature failed: connection refused","permanent":false,"pushed":{"digest":%q,"reference":%q,"sourceRevision":"c0ffee"}}}`, ref, digest, ref))
	eventually(t, func(g Gomega) {
		got := getArtifact(g, key)
		g.Expect(got.Status.Phase).To(Equal(v1alpha1.PhaseRetrying))
		g.Expect(got.Status.Digest).To(Equal(digest))
		signed := condition(got, v1alpha1.ConditionSigned)
		g.Expect(signed).NotTo(BeNil())
		g.Expect(signed.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(signed.Reason).To(Equal("SignaturePushFailed"))
		g.Expect(condition(got, v1alpha1.ConditionReady).Message).To(ContainSubstring("the next attempt only attaches its signature"))
	})

	job = waitJob(t, ns, key.Name, 1, 2)
	env := envOf(job.Spec.Template.Spec.Containers[0])
	g.Expect(env).To(HaveKeyWithValue(workerv1.EnvPushedDigest, digest))
	g.Expect(env).To(HaveKeyWithValue(workerv1.EnvPushedRevision, "c0ffee"))
	runJob(t, job, 0, fmt.Sprintf(`{"digest":%q,"reference":%q,"sourceRevision":"c0ffee","signature":%q,"attestation":%q}`, digest, ref, sigDigest, sigDigest))
	eventually(t, func(g Gomega) {
		got := getArtifact(g, key)
		g.Expect(got.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(got.Status.Signature).To(Equal(sigDigest))
		g.Expect(got.Status.Attestation).To(Equal(sigDigest))
		signed := condition(got, v1alpha1.ConditionSigned)
		g.Expect(signed).NotTo(BeNil())
		g.Expect(signed.Status).To(Equal(metav1.ConditionTrue))
	})
}

// A wrong password stalls at once with a message that names the Secret
// and says how to fix it.
func TestArtifactSigningKeyFailureStalls(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "badkey"}
	a := wrappers.MakeArtifact(key.Name, ns).Obj()
	a.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "cosign-key"}}
	create(t, a)
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 1,
		`{"error":{"reason":"SigningKeyWrongPassword","message":"spec.signing.keySecretRef (Secret \"cosign-key\"): signing key password is wrong","permanent":true}}`)
	eventually(t, func(g Gomega) {
		got := getArtifact(g, key)
		g.Expect(got.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		stalled := condition(got, v1alpha1.ConditionStalled)
		g.Expect(stalled.Reason).To(Equal("SigningKeyWrongPassword"))
		g.Expect(stalled.Message).To(ContainSubstring("cosign.password"))
		g.Expect(stalled.Message).To(ContainSubstring("packline.dev/requestedAt"))
		g.Expect(condition(got, v1alpha1.ConditionSigned).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(got.Status.Digest).To(BeEmpty())
	})
}

// ClaimWork with signing: a profile's key moves the render to the template
// namespace (where that Secret is), overrides the Claim's, and refuses the
// fields such a Claim may not set; a Claim's own key stays in its
// namespace.
func TestClaimWorkSigning(t *testing.T) {
	tpl := wrappers.MakeClaimTemplate("tpl").Open().Obj()
	tpl.Spec.PushSecretRef = &corev1.LocalObjectReference{Name: "tpl-push"}
	profile := v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: "lab"}, Spec: v1alpha1.EnvironmentProfileSpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"site": "lab"}},
		Signing:           &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "platform-cosign"}}}}
	own := &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "team-cosign"}}
	private := wrappers.MakeClaimTemplate("tpl").Open().Obj()
	private.Spec.Source.SecretRef = &corev1.LocalObjectReference{Name: "repo-creds"}

	for _, tc := range []struct {
		name       string
		tpl        *v1alpha1.ClaimTemplate
		signing    *v1alpha1.SigningSpec
		target     *v1alpha1.Target
		labels     map[string]string
		wantNS     string
		wantSecret string
		wantField  string
		wantReason string
		wantMsg    string
	}{
		{name: "profile signs", tpl: tpl, labels: map[string]string{"site": "lab"},
			wantNS: "packline-system", wantSecret: "platform-cosign", wantField: "EnvironmentProfile lab spec.signing.keySecretRef"},
		{name: "claim's own key", tpl: tpl, signing: own, wantSecret: "team-cosign", wantField: `spec.signing.keySecretRef (Secret "team-cosign")`},
		{name: "profile signs, claim sets its own key", tpl: tpl, signing: own, labels: map[string]string{"site": "lab"},
			wantReason: claims.ReasonTargetNotAllowed, wantMsg: "spec.signing: not allowed, because EnvironmentProfile lab signs"},
		{name: "profile signs, claim picks a push Secret", tpl: tpl, labels: map[string]string{"site": "lab"},
			target:     &v1alpha1.Target{PushSecretRef: &corev1.LocalObjectReference{Name: "mine"}},
			wantReason: claims.ReasonTargetNotAllowed, wantMsg: "spec.target.pushSecretRef: not allowed"},
		{name: "private template, claim's own key", tpl: private, signing: own,
			wantReason: claims.ReasonTargetNotAllowed, wantMsg: "spec.signing: not allowed, because ClaimTemplate tpl reads a private repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := wrappers.MakeClaim("ide", "team-a", "tpl").Obj()
			c.Spec.Signing, c.Spec.Target = tc.signing, tc.target
			work, err := controllers.ClaimWork(c, controllers.ClaimInputs{Template: tc.tpl, TemplateNamespace: "packline-system",
				NamespaceLabels: tc.labels, Profiles: []v1alpha1.EnvironmentProfile{profile}})
			if tc.wantReason != "" {
				var blocked *pipeline.Blocked
				g.Expect(errors.As(err, &blocked)).To(BeTrue(), "err = %v", err)
				g.Expect(blocked.Reason).To(Equal(tc.wantReason))
				g.Expect(blocked.Message).To(ContainSubstring(tc.wantMsg))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(work.Namespace).To(Equal(tc.wantNS))
			doc := work.Spec.(workerv1.Claim)
			g.Expect(doc.Signing).NotTo(BeNil())
			g.Expect(doc.Signing.KeyField).To(Equal(tc.wantField))
			g.Expect(doc.Signing.Template).To(Equal("tpl"))
			var secrets []string
			for _, v := range work.Mounts.Volumes {
				if v.Secret != nil && v.Name == "signing-key" {
					secrets = append(secrets, v.Secret.SecretName)
				}
			}
			g.Expect(secrets).To(Equal([]string{tc.wantSecret}))
			if tc.wantNS != "" {
				g.Expect(doc.Signing.Profile).To(Equal("lab"))
				g.Expect(work.Mounts.Env).To(ContainElement(HaveField("Value", workerv1.PushAuthDir)), "the template's push Secret is mounted")
				for reason, h := range work.Hints {
					g.Expect(strings.Contains(h, "platform-cosign")).To(BeFalse(), "hint %s names the admin's Secret: %s", reason, h)
				}
			}
		})
	}
}

// An EnvironmentProfile that signs, through the manager: the Claim of a
// public template renders in the template namespace with the profile's
// key and the template's push Secret, and its deletionPolicy Delete cleanup
// runs there too (the tenant namespace never holds that run).
func TestProfileSignedClaimRunsInTemplateNamespace(t *testing.T) {
	s := startPrivate(t)
	tenant := newNamespace(t)
	ctx := context.Background()
	ns := &corev1.Namespace{}
	g := NewWithT(t)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: tenant}, ns)).To(Succeed())
	ns.Labels = map[string]string{"signing-test": tenant}
	g.Expect(env.Client.Update(ctx, ns)).To(Succeed())
	profile := &v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: "signs-" + tenant}, Spec: v1alpha1.EnvironmentProfileSpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"signing-test": tenant}},
		Signing:           &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "platform-cosign"}}}}
	create(t, profile)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, profile) })
	tpl := wrappers.MakeClaimTemplate(tenant + "-public").Open().Obj()
	tpl.Spec.PushSecretRef = &corev1.LocalObjectReference{Name: s.pushSecret}
	tpl.Spec.PushPlainHTTP = true
	create(t, tpl)

	c := wrappers.MakeClaim("signed", tenant, tpl.Name).Obj()
	c.Spec.DeletionPolicy = v1alpha1.DeletionDelete
	c.Spec.Target = &v1alpha1.Target{Tag: "v1", PlainHTTP: true}
	create(t, c)
	job := waitJob(t, s.tplNS, c.Name, 1, 1)
	g.Expect(volume(job, "signing-key")).NotTo(BeNil())
	g.Expect(volume(job, "signing-key").Secret.SecretName).To(Equal("platform-cosign"))
	g.Expect(volume(job, "push-auth").Secret.SecretName).To(Equal(s.pushSecret))
	g.Expect(volume(job, "template-auth")).To(BeNil(), "a public template needs no repository credential")

	repo := "registry.example.com/claims/" + tenant + "/signed"
	runJob(t, job, 0, fmt.Sprintf(`{"digest":%q,"reference":"%s@%s","sourceRevision":"c0ffee","tag":"v1","signature":%q,"attestation":%q}`,
		digest, repo, digest, sigDigest, sigDigest))
	key := client.ObjectKeyFromObject(c)
	eventually(t, func(g Gomega) {
		got := getClaim(g, key)
		g.Expect(got.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(got.Status.Signature).To(Equal(sigDigest))
		g.Expect(jobsOf(g, tenant, c.Name)).To(BeEmpty())
	})

	g.Expect(env.Client.Delete(ctx, getClaim(g, key))).To(Succeed())
	cleanup := waitCleanupJob(t, s.tplNS, c.Name)
	g.Expect(volume(cleanup, "push-auth").Secret.SecretName).To(Equal(s.pushSecret))
	g.Expect(volume(cleanup, "signing-key")).To(BeNil(), "deleting needs no signing key")
}

// A digest written into status (claims/status and artifacts/status are
// tenant-writable) is never what a sign-only retry signs: only what an
// earlier attempt's own pod reported pushing is. Here attempt 1 fails
// before pushing, with a forged status.digest in place: attempt 2 pushes
// and signs afresh.
func TestForgedStatusDigestIsNotSigned(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "forged"}
	a := wrappers.MakeArtifact(key.Name, ns).Obj()
	a.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "cosign-key"}}
	create(t, a)
	job := waitJob(t, ns, key.Name, 1, 1)

	forged := "sha256:" + strings.Repeat("f", 64)
	g := NewWithT(t)
	NewWithT(t).Eventually(func() error {
		got := getArtifact(g, key)
		got.Status.Digest, got.Status.Reference = forged, "registry.example.com/acme/tiny@"+forged
		return env.Client.Status().Update(context.Background(), got)
	}).WithTimeout(20 * time.Second).Should(Succeed())
	runJob(t, job, 1, retryable)
	eventually(t, func(g Gomega) {
		got := getArtifact(g, key)
		g.Expect(got.Status.Phase).To(Or(Equal(v1alpha1.PhaseRetrying), Equal(v1alpha1.PhasePending)))
		g.Expect(got.Status.Digest).To(Equal(forged), "the forged digest is still in status when attempt 2 starts")
	})
	next := waitJob(t, ns, key.Name, 1, 2)
	g.Expect(envOf(next.Spec.Template.Spec.Containers[0])).NotTo(HaveKey(workerv1.EnvPushedDigest))
}
