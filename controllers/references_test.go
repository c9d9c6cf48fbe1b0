package controllers_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

// Without a verified seal, nothing says that who asked for an Artifact or a
// Claim may use the Secrets, PVCs and Artifacts it names: with the webhooks
// off, or for a resource from before the webhook was installed, such a
// resource stalls with EntitlementUnverified and runs nothing, while one
// that names nothing runs.
func TestReferencesFailClosedWithoutSeal(t *testing.T) {
	stalled := func(g Gomega, o pipeline.Object, ns, name string, texts ...string) {
		g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, o)).To(Succeed())
		st := apimeta.FindStatusCondition(o.GetPipelineStatus().Conditions, v1alpha1.ConditionStalled)
		g.Expect(st).NotTo(BeNil(), "not stalled")
		g.Expect(st.Reason).To(Equal(controllers.ReasonEntitlementUnverified))
		for _, text := range texts {
			g.Expect(st.Message).To(ContainSubstring(text))
		}
		g.Expect(jobsOf(g, ns, name)).To(BeEmpty())
	}
	t.Run("webhooks off", func(t *testing.T) {
		startManagerWith(t, nil)
		ns := newNamespace(t)
		create(t, wrappers.MakeArtifact("push", ns).PushSecret("prod-registry").Obj())
		create(t, wrappers.MakeArtifact("volume", ns).Volume("prod-models").Obj())
		create(t, wrappers.MakeArtifact("token", ns).HFToken("prod-hf").CASecret("prod-ca").Obj())
		create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
		create(t, wrappers.MakeClaim("claim", ns, ns+"-tpl").PushSecret("prod-registry").Obj())
		create(t, wrappers.MakeArtifact("plain", ns).Obj())
		eventually(t, func(g Gomega) {
			stalled(g, &v1alpha1.Artifact{}, ns, "push", "spec.target.pushSecretRef names objects that only a user entitled to them may use",
				"--enable-webhooks=false", "enable the webhook, then change the Artifact's spec or delete and re-create it")
			stalled(g, &v1alpha1.Artifact{}, ns, "volume", "spec.source.volume.claimName names")
			stalled(g, &v1alpha1.Artifact{}, ns, "token", "spec.source.huggingFace.tokenSecretRef, spec.target.caSecretRef name")
			stalled(g, &v1alpha1.Claim{}, ns, "claim", "spec.target.pushSecretRef names", "who asked for this Claim cannot be verified")
		})
		waitJob(t, ns, "plain", 1, 1)
	})
	t.Run("from before the webhook", func(t *testing.T) {
		startManagerWith(t, []controllers.Option{controllers.WithRequesterSealer(entitlement.NewSealer([]byte("k")))})
		ns := newNamespace(t)
		create(t, wrappers.MakeArtifact("push", ns).PushSecret("prod-registry").Obj())
		eventually(t, func(g Gomega) {
			stalled(g, &v1alpha1.Artifact{}, ns, "push", "spec.target.pushSecretRef names", "no packline.dev/requester annotation",
				"change the Artifact's spec, or delete and re-create it, so that the admission webhook records who asks")
		})
	})
	t.Run("seals not trusted yet", func(t *testing.T) {
		sealer := entitlement.NewSealer([]byte("k")).WithTrust(func() error { return errAnotherWebhookConfig })
		startManagerWith(t, []controllers.Option{controllers.WithRequesterSealer(sealer)})
		ns := newNamespace(t)
		create(t, wrappers.MakeArtifact("push", ns).PushSecret("prod-registry").Obj())
		eventually(t, func(g Gomega) {
			a := getArtifact(g, client.ObjectKey{Namespace: ns, Name: "push"})
			r := apimeta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.Reason).To(Equal(controllers.ReasonEntitlementUnverified))
			g.Expect(r.Message).To(ContainSubstring("seals are not trusted: objectSelector set"))
			g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhasePending))
		})
	})
}

type staticError string

func (e staticError) Error() string { return string(e) }

const errAnotherWebhookConfig = staticError("objectSelector set")
