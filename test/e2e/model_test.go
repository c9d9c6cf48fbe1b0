package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
)

// A model bound into a workload: an Artifact imports the tiny model, and a
// vllm-server Claim names it in values.model. The rendered Deployment, which
// Flux applies, mounts the Artifact's digest-pinned image view as an image
// volume, and the process node, pulling and unpacking it as containerd
// would (an image only: a ModelKit mounts as an empty folder), shows the
// server the model's files. So the binding must name the image view.
func TestModelBoundIntoWorkload(t *testing.T) {
	ctx := context.Background()
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	a := newArtifact(ns, "tiny", "packline/tiny-model").Obj()
	create(t, a)
	waitReady(t, a, a.GetPipelineStatus)

	tpl := &v1alpha1.ClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "vllm-" + ns},
		Spec: v1alpha1.ClaimTemplateSpec{
			Source:       v1alpha1.TemplateSource{URL: repo.URL, Ref: "main", Path: "apps/vllm-server/base"},
			Kinds:        []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}},
			Service:      "vllm-server",
			ValuesSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"model":{"type":"string"}}}`)},
			Parameters: []v1alpha1.ParameterBinding{{Value: "model", Kind: v1alpha1.BindingArtifact,
				Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "vllm-server"}, FieldPath: "/spec/template/spec/volumes/0/image/reference"}},
			Access:           v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sandbox.TenantLabels}},
			RepositoryPrefix: sb.Registry.Host + "/claims",
		},
	}
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	deployer(t, ns)
	c := &v1alpha1.Claim{
		ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: ns},
		Spec: v1alpha1.ClaimSpec{
			TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name},
			Values:      &apiextensionsv1.JSON{Raw: []byte(`{"model":"` + a.Name + `"}`)},
			Target:      &v1alpha1.Target{PlainHTTP: true},
			Delivery:    &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer", Wait: ptr.To(false)}},
		},
	}
	create(t, c)
	waitReady(t, c, c.GetPipelineStatus)

	g := NewWithT(t)
	dep := &appsv1.Deployment{}
	g.Expect(sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vllm-server"}, dep)).To(Succeed())
	vol := dep.Spec.Template.Spec.Volumes[0]
	g.Expect(vol.Image).NotTo(BeNil())
	g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
	g.Expect(a.Status.ImageReference).To(HavePrefix(sb.Registry.Host+"/e2e/"+ns+"/tiny@sha256:"), "the Artifact names its image view")
	g.Expect(a.Status.ImageReference).NotTo(Equal(a.Status.Reference))
	g.Expect(vol.Image.Reference).To(Equal(a.Status.ImageReference), "the Deployment mounts the Artifact's image view by digest: the ModelKit itself mounts empty")

	// The node unpacked the model where the server's /model points.
	waitFor(t, func(g Gomega) {
		var pods corev1.PodList
		g.Expect(sb.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(dep.Spec.Selector.MatchLabels))).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		p := pods.Items[0]
		dir := filepath.Join(sb.Dir, "node", "pods", p.Namespace+"_"+p.Name+"_"+string(p.UID), "volumes", "model")
		for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
			_, err := os.Stat(filepath.Join(dir, f))
			g.Expect(err).NotTo(HaveOccurred(), "the server would not see %s", f)
		}
	}).Should(Succeed(), "logs in %s", logsHint())
}
