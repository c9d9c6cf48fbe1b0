package entitlement

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
)

func claim(values string) *v1alpha1.Claim {
	return &v1alpha1.Claim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "team-a"},
		Spec: v1alpha1.ClaimSpec{TemplateRef: v1alpha1.TemplateReference{Name: "t"},
			Values: &apiextensionsv1.JSON{Raw: []byte(values)}}}
}

// A seal verifies only for the same kind, object, requester and spec, with
// JSON key order and spacing not mattering, and only on the object it was
// bound to: a re-created object of the same name and spec (a new UID, a
// later creationTimestamp) does not take it.
func TestSealVerify(t *testing.T) {
	s := NewSealer([]byte("k"))
	alice := Requester{Username: "alice", Groups: []string{"dev"}}
	sealedAt := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	stored := func() *v1alpha1.Claim {
		c := claim(`{"a":1,"b":[1,2]}`)
		c.UID = "uid-1"
		c.CreationTimestamp = metav1.NewTime(sealedAt.Add(2 * time.Second))
		return c
	}
	// On create the webhook sees neither UID nor creationTimestamp.
	creating := claim(`{"a":1,"b":[1,2]}`)
	onCreate, err := s.Seal("Claim", creating, creating.Spec, alice, BindCreation(creating, sealedAt))
	if err != nil {
		t.Fatal(err)
	}
	c := stored()
	onUpdate, err := s.Seal("Claim", c, c.Spec, alice, BindUID())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		kind   string
		seal   map[string]string
		mutate func(*v1alpha1.Claim)
		sealer *Sealer
		want   error
	}{
		{name: "as sealed", kind: "Claim"},
		{name: "same values, other key order and spacing", kind: "Claim", mutate: func(c *v1alpha1.Claim) { c.Spec.Values.Raw = []byte(`{ "b": [1,2], "a": 1 }`) }},
		{name: "other values", kind: "Claim", mutate: func(c *v1alpha1.Claim) { c.Spec.Values.Raw = []byte(`{"a":2,"b":[1,2]}`) }, want: ErrBadSeal},
		{name: "other kind", kind: "Artifact", want: ErrBadSeal},
		{name: "other name", kind: "Claim", mutate: func(c *v1alpha1.Claim) { c.Name = "d" }, want: ErrBadSeal},
		{name: "other namespace", kind: "Claim", mutate: func(c *v1alpha1.Claim) { c.Namespace = "team-b" }, want: ErrBadSeal},
		{name: "requester rewritten", kind: "Claim", mutate: func(c *v1alpha1.Claim) {
			c.Annotations[v1alpha1.AnnotationRequester] = Requester{Username: "admin"}.Encode()
		}, want: ErrBadSeal},
		{name: "no requester", kind: "Claim", mutate: func(c *v1alpha1.Claim) { c.Annotations = nil }, want: ErrNoRequester},
		{name: "other key", kind: "Claim", sealer: NewSealer([]byte("other")), want: ErrBadSeal},
		{name: "creation seal replayed onto a re-created object", kind: "Claim", mutate: func(c *v1alpha1.Claim) {
			c.UID, c.CreationTimestamp = "uid-2", metav1.NewTime(sealedAt.Add(time.Hour))
		}, want: ErrReplayedSeal},
		{name: "creation seal, creation time within the clock skew", kind: "Claim", mutate: func(c *v1alpha1.Claim) {
			c.CreationTimestamp = metav1.NewTime(sealedAt.Add(-30 * time.Second))
		}},
		{name: "creation seal with its time rewritten", kind: "Claim", mutate: func(c *v1alpha1.Claim) {
			c.Annotations[v1alpha1.AnnotationRequesterSeal] = strings.Replace(c.Annotations[v1alpha1.AnnotationRequesterSeal],
				fmt.Sprint(sealedAt.Unix()), fmt.Sprint(sealedAt.Add(time.Hour).Unix()), 1)
			c.CreationTimestamp = metav1.NewTime(sealedAt.Add(time.Hour))
		}, want: ErrBadSeal},
		{name: "update seal", kind: "Claim", seal: onUpdate},
		{name: "update seal replayed onto a re-created object", kind: "Claim", seal: onUpdate, mutate: func(c *v1alpha1.Claim) { c.UID = "uid-2" }, want: ErrBadSeal},
		{name: "seal of an earlier version (no binding)", kind: "Claim", mutate: func(c *v1alpha1.Claim) {
			c.Annotations[v1alpha1.AnnotationRequesterSeal] = base64.RawURLEncoding.EncodeToString(make([]byte, 32))
		}, want: ErrUnboundSeal},
		{name: "not a seal at all", kind: "Claim", mutate: func(c *v1alpha1.Claim) {
			c.Annotations[v1alpha1.AnnotationRequesterSeal] = "Zm9yZ2Vk"
		}, want: ErrBadSeal},
		{name: "untrusted", kind: "Claim", sealer: s.WithTrust(func() error { return errors.New("no webhook") }), want: ErrUntrusted},
		{name: "trusted", kind: "Claim", sealer: s.WithTrust(func() error { return nil })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := stored()
			c.Annotations = map[string]string{}
			seal := onCreate
			if tc.seal != nil {
				seal = tc.seal
			}
			for k, v := range seal {
				c.Annotations[k] = v
			}
			if tc.mutate != nil {
				tc.mutate(c)
			}
			v := s
			if tc.sealer != nil {
				v = tc.sealer
			}
			got, err := v.Verify(tc.kind, c, c.Spec)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v, want %v", err, tc.want)
			}
			if tc.want == nil {
				if diff := cmp.Diff(alice, got); diff != "" {
					t.Errorf("requester (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// generateName: on create the name is not known yet, so the seal covers
// the prefix, and verifies for a name the API server generated from it.
func TestSealGenerateName(t *testing.T) {
	s := NewSealer([]byte("k"))
	now := time.Now()
	c := claim(`{}`)
	c.Name, c.GenerateName = "", "run-"
	ann, err := s.Seal("Claim", c, c.Spec, Requester{Username: "a"}, BindCreation(c, now))
	if err != nil {
		t.Fatal(err)
	}
	c.Name, c.Annotations, c.CreationTimestamp = "run-x7k2p", ann, metav1.NewTime(now)
	if _, err := s.Verify("Claim", c, c.Spec); err != nil {
		t.Errorf("generated name: %v", err)
	}
	c.Name = "elsewhere"
	if _, err := s.Verify("Claim", c, c.Spec); !errors.Is(err, ErrBadSeal) {
		t.Errorf("a name not from the prefix: %v, want ErrBadSeal", err)
	}
	c.Name, c.GenerateName = "run-x7k2p", "other-"
	if _, err := s.Verify("Claim", c, c.Spec); !errors.Is(err, ErrBadSeal) {
		t.Errorf("other prefix: %v, want ErrBadSeal", err)
	}
}

// The key comes from the CA key when there is one (it outlives serving
// certificate rotations), else the serving key; none is ErrNoKey.
func TestCertDirSealer(t *testing.T) {
	dir := t.TempDir()
	s := NewCertDirSealer(dir)
	c := claim(`{}`)
	if _, err := s.Seal("Claim", c, c.Spec, Requester{Username: "a"}, BindUID()); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key files: %v", err)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tls.key", "serving-1")
	byServing, _ := s.Seal("Claim", c, c.Spec, Requester{Username: "a"}, BindUID())
	write("ca.key", "ca")
	byCA, _ := s.Seal("Claim", c, c.Spec, Requester{Username: "a"}, BindUID())
	if byServing[v1alpha1.AnnotationRequesterSeal] == byCA[v1alpha1.AnnotationRequesterSeal] {
		t.Fatal("the CA key must take precedence over the serving key")
	}
	write("tls.key", "serving-2") // rotation of the serving certificate
	again, _ := s.Seal("Claim", c, c.Spec, Requester{Username: "a"}, BindUID())
	if diff := cmp.Diff(byCA, again); diff != "" {
		t.Errorf("a serving-key rotation changed the seal:\n%s", diff)
	}
}

func TestArtifactRights(t *testing.T) {
	ref := func(n string) *corev1.LocalObjectReference { return &corev1.LocalObjectReference{Name: n} }
	cases := []struct {
		name string
		spec v1alpha1.ArtifactSpec
		want []string
	}{
		{name: "none", spec: v1alpha1.ArtifactSpec{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: "https://x"}}}},
		{name: "every secret", spec: v1alpha1.ArtifactSpec{
			Source: v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "a/b",
				TokenSecretRef: &corev1.SecretKeySelector{LocalObjectReference: *ref("hf"), Key: "token"}}},
			Target: v1alpha1.Target{PushSecretRef: ref("push"), CASecretRef: ref("ca")}},
			want: []string{"spec.source.huggingFace.tokenSecretRef get secrets hf", "spec.target.pushSecretRef get secrets push", "spec.target.caSecretRef get secrets ca"}},
		{name: "git", spec: v1alpha1.ArtifactSpec{Source: v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: "https://g", SecretRef: ref("git")}}},
			want: []string{"spec.source.git.secretRef get secrets git"}},
		{name: "oci", spec: v1alpha1.ArtifactSpec{Source: v1alpha1.ArtifactSource{OCI: &v1alpha1.OCISource{Reference: "r/x:1", PullSecretRef: ref("pull")}}},
			want: []string{"spec.source.oci.pullSecretRef get secrets pull"}},
		{name: "volume", spec: v1alpha1.ArtifactSpec{Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "models"}}},
			want: []string{"spec.source.volume.claimName get persistentvolumeclaims models"}},
		{name: "signing key", spec: v1alpha1.ArtifactSpec{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: "https://x"}},
			PipelineSpec: v1alpha1.PipelineSpec{Signing: &v1alpha1.SigningSpec{KeySecretRef: *ref("cosign")}}},
			want: []string{"spec.signing.keySecretRef get secrets cosign"}},
		{name: "priority class on a queued run", spec: v1alpha1.ArtifactSpec{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: "https://x"}},
			PipelineSpec: v1alpha1.PipelineSpec{QueueName: "q", WorkloadPriorityClassName: "urgent"}},
			want: []string{"spec.workloadPriorityClassName use workloadpriorityclasses urgent (cluster)"}},
		{name: "priority class without a queue is ignored", spec: v1alpha1.ArtifactSpec{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: "https://x"}},
			PipelineSpec: v1alpha1.PipelineSpec{WorkloadPriorityClassName: "urgent"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &v1alpha1.Artifact{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Spec: tc.spec}
			if diff := cmp.Diff(tc.want, flatten(ArtifactRights(a), "ns")); diff != "" {
				t.Errorf("rights (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimRights(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}, {Version: "v1"}, {Group: "rbac.authorization.k8s.io", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, meta.RESTScopeNamespace)
	c := &Checker{Mapper: mapper}
	tpl := func(open bool, kinds ...v1alpha1.RenderedKind) *v1alpha1.ClaimTemplate {
		t := &v1alpha1.ClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: v1alpha1.ClaimTemplateSpec{Kinds: kinds}}
		if open {
			t.Spec.Access.RequireClaimVerb = ptr.To(false)
		}
		return t
	}
	cl := claim(`{}`)
	cl.Spec.Target = &v1alpha1.Target{PushSecretRef: &corev1.LocalObjectReference{Name: "push"}}
	cases := []struct {
		name    string
		tpl     *v1alpha1.ClaimTemplate
		signing bool
		d       *Delivery
		want    []string
		wantErr string
	}{
		{name: "claim verb, kinds and secret", tpl: tpl(false, v1alpha1.RenderedKind{Group: "apps", Kind: "Deployment"}, v1alpha1.RenderedKind{Kind: "Service"}),
			want: []string{"spec.templateRef claim claimtemplates t", "spec.templateRef create deployments ", "spec.templateRef create services ", "spec.target.pushSecretRef get secrets push"}},
		{name: "open template needs no claim verb", tpl: tpl(true, v1alpha1.RenderedKind{Kind: "Service"}),
			want: []string{"spec.templateRef create services ", "spec.target.pushSecretRef get secrets push"}},
		{name: "cluster-scoped kind is checked cluster-wide", tpl: tpl(true, v1alpha1.RenderedKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}),
			want: []string{"spec.templateRef create clusterroles  (cluster)",
				"spec.templateRef bind clusterroles  (cluster)", "spec.templateRef escalate clusterroles  (cluster)", "spec.target.pushSecretRef get secrets push"}},
		// Issue 21 item 8: create rolebindings alone admitted a template
		// that renders a RoleBinding.
		{name: "RBAC kind needs bind and escalate", tpl: tpl(true, v1alpha1.RenderedKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}),
			want: []string{"spec.templateRef create rolebindings ",
				"spec.templateRef bind roles ", "spec.templateRef escalate roles ", "spec.templateRef bind clusterroles ", "spec.templateRef escalate clusterroles ",
				"spec.target.pushSecretRef get secrets push"}},
		// Issue 21 item 3: Flux applies with force and prunes.
		{name: "delivered: patch and delete too", tpl: tpl(true, v1alpha1.RenderedKind{Kind: "Service"}), d: &Delivery{},
			want: []string{"spec.templateRef create services ", "spec.templateRef patch services ", "spec.templateRef delete services ", "spec.target.pushSecretRef get secrets push"}},
		{name: "delivered as a named ServiceAccount", tpl: tpl(true, v1alpha1.RenderedKind{Kind: "Service"}), d: &Delivery{ServiceAccount: "admin"},
			want: []string{"spec.templateRef create services ", "spec.templateRef patch services ", "spec.templateRef delete services ",
				"spec.delivery.flux.serviceAccountName impersonate serviceaccounts admin", "spec.target.pushSecretRef get secrets push"}},
		{name: "signing key", tpl: tpl(true, v1alpha1.RenderedKind{Kind: "Service"}), signing: true,
			want: []string{"spec.templateRef create services ", "spec.target.pushSecretRef get secrets push", "spec.signing.keySecretRef get secrets cosign"}},
		{name: "kind the cluster does not serve", tpl: tpl(true, v1alpha1.RenderedKind{Group: "example.com", Kind: "Widget"}),
			wantErr: "spec.kinds names kinds this cluster does not serve: Widget.example.com"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := cl.DeepCopy()
			if tc.signing {
				cl.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "cosign"}}
			}
			rights, err := c.ClaimRights(cl, tc.tpl, tc.d)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, flatten(rights, cl.Namespace)); diff != "" {
				t.Errorf("rights (-want +got):\n%s", diff)
			}
		})
	}
}

// flatten spells rights as "field verb resource name", marking cluster-wide ones.
func flatten(rights []Right, ns string) []string {
	var out []string
	for _, r := range rights {
		s := r.Field + " " + r.Attr.Verb + " " + r.Attr.Resource + " " + r.Attr.Name
		if r.Attr.Namespace != ns {
			s += " (cluster)"
		}
		out = append(out, s)
	}
	return out
}
