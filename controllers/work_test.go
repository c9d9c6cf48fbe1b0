package controllers_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

// The volumes and env a Secret reference becomes in the worker pod: always
// by name and key, never read by the manager.
func secretVolume(name, secret string, items ...corev1.KeyToPath) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, Items: items, DefaultMode: ptr.To[int32](0o440)}}}
}

func dockerConfigVolume(name, secret string) corev1.Volume {
	return secretVolume(name, secret, corev1.KeyToPath{Key: corev1.DockerConfigJsonKey, Path: "config.json"})
}

func gitCredentialVolume(name, secret string) corev1.Volume {
	var items []corev1.KeyToPath
	for _, k := range pipeline.GitCredentialKeys {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	v := secretVolume(name, secret, items...)
	v.Secret.Optional = ptr.To(true)
	return v
}

func readOnly(name, dir string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true}
}

var pushEnv = corev1.EnvVar{Name: workerv1.EnvDockerConfig, Value: workerv1.PushAuthDir}

// TestArtifactWork: each source and target turns into the worker's
// document, the pod's Secret references, the pushed tag and the hints
// that name the Secret to fix.
func TestArtifactWork(t *testing.T) {
	const repo = "registry.example.com/acme/tiny"
	cases := []struct {
		name   string
		a      *v1alpha1.Artifact
		mounts pipeline.Mounts
		target workerv1.Target
		// hints: a substring of each hint, by failure reason.
		hints map[string]string
	}{
		{name: "public Hugging Face repo, no credentials",
			a:      wrappers.MakeArtifact("a", "ns").Obj(),
			target: workerv1.Target{Repository: repo, Tag: "v1"},
			hints: map[string]string{
				workerv1.ReasonRegistryAuth: "no spec.target.pushSecretRef is set",
				workerv1.ReasonSourceAuth:   "the source needs credentials: reference a Secret in spec.source",
			}},
		{name: "Hugging Face token and push Secret",
			a: wrappers.MakeArtifact("a", "ns").HFToken("hf").PushSecret("push").Obj(),
			mounts: pipeline.Mounts{
				Env: []corev1.EnvVar{{Name: workerv1.EnvHFToken, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}}, pushEnv},
				Volumes: []corev1.Volume{dockerConfigVolume("push-auth", "push")},
				Mounts:  []corev1.VolumeMount{readOnly("push-auth", workerv1.PushAuthDir)},
				Sources: map[string]string{"push-auth": `Secret "push" (spec.target.pushSecretRef, key .dockerconfigjson)`},
			},
			target: workerv1.Target{Repository: repo, Tag: "v1"},
			hints: map[string]string{
				workerv1.ReasonRegistryAuth: `Secret "push" (spec.target.pushSecretRef)`,
				workerv1.ReasonSourceAuth:   `Secret "hf" key "token" (spec.source.huggingFace.tokenSecretRef)`,
				pipeline.ReasonConfigError:  `Secret "hf" (spec.source.huggingFace.tokenSecretRef), Secret "push" (spec.target.pushSecretRef)`,
			}},
		{name: "Git with credentials: only the credential keys",
			a: wrappers.MakeArtifact("a", "ns").Git("https://git.example.com/m.git", "v1", "models").GitSecret("git").Obj(),
			mounts: pipeline.Mounts{
				Volumes: []corev1.Volume{gitCredentialVolume("source-auth", "git")},
				Mounts:  []corev1.VolumeMount{readOnly("source-auth", workerv1.SourceAuthDir)},
			},
			target: workerv1.Target{Repository: repo, Tag: "v1"},
			hints: map[string]string{
				workerv1.ReasonSourceAuth:  `Secret "git" (spec.source.git.secretRef)`,
				pipeline.ReasonConfigError: `Secret "git" (spec.source.git.secretRef)`,
			}},
		{name: "OCI source with a pull Secret",
			a: wrappers.MakeArtifact("a", "ns").OCI("ghcr.io/acme/base:v1").PullSecret("pull").Obj(),
			mounts: pipeline.Mounts{
				Volumes: []corev1.Volume{dockerConfigVolume("pull-auth", "pull")},
				Mounts:  []corev1.VolumeMount{readOnly("pull-auth", workerv1.PullAuthDir)},
				Sources: map[string]string{"pull-auth": `Secret "pull" (spec.source.oci.pullSecretRef, key .dockerconfigjson)`},
			},
			target: workerv1.Target{Repository: repo, Tag: "v1"},
			hints: map[string]string{
				workerv1.ReasonSourceAuth:  `Secret "pull" (spec.source.oci.pullSecretRef)`,
				pipeline.ReasonConfigError: `Secret "pull" (spec.source.oci.pullSecretRef)`,
			}},
		{name: "PVC source, mounted read-only",
			a: wrappers.MakeArtifact("a", "ns").Volume("models").Obj(),
			mounts: pipeline.Mounts{
				Volumes: []corev1.Volume{{Name: "source-volume", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models", ReadOnly: true}}}},
				Mounts:  []corev1.VolumeMount{readOnly("source-volume", workerv1.SourceVolumeDir)},
				Sources: map[string]string{"source-volume": `PersistentVolumeClaim "models" (spec.source.volume.claimName)`},
			},
			target: workerv1.Target{Repository: repo, Tag: "v1"},
		},
		{name: "HTTP source, CA Secret, plain HTTP, no tag",
			a: wrappers.MakeArtifact("a", "ns").HTTP("https://files.example.com/m.tgz").CASecret("ca").PlainHTTP().Tag("").Obj(),
			mounts: pipeline.Mounts{
				Volumes: []corev1.Volume{secretVolume("registry-ca", "ca", corev1.KeyToPath{Key: "ca.crt", Path: "ca.crt"})},
				Mounts:  []corev1.VolumeMount{readOnly("registry-ca", workerv1.CADir)},
				Sources: map[string]string{"registry-ca": `Secret "ca" (spec.target.caSecretRef, key ca.crt)`},
			},
			target: workerv1.Target{Repository: repo, Tag: "latest", PlainHTTP: true, CAFile: workerv1.CADir + "/ca.crt"},
			hints: map[string]string{
				pipeline.ReasonConfigError: `Secret "ca" (spec.target.caSecretRef)`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := controllers.ArtifactWork(tc.a)
			if err != nil {
				t.Fatal(err)
			}
			want := workerv1.Artifact{Source: tc.a.Spec.Source, Format: tc.a.Spec.Format, Target: tc.target}
			if diff := cmp.Diff(want, w.Spec); diff != "" {
				t.Errorf("worker spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.mounts, w.Mounts); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
			if w.Command != "artifact" || w.Tag != tc.target.Tag || w.Namespace != "" {
				t.Errorf("command %q, tag %q, namespace %q", w.Command, w.Tag, w.Namespace)
			}
			checkHints(t, w.Hints, tc.hints)
		})
	}
}

// checkHints: every wanted hint is there with its substring; a source or
// pod hint that is not wanted is absent.
func checkHints(t *testing.T, got, want map[string]string) {
	t.Helper()
	for reason, sub := range want {
		if !strings.Contains(got[reason], sub) {
			t.Errorf("hint %s = %q, want it to contain %q", reason, got[reason], sub)
		}
	}
	if _, ok := want[pipeline.ReasonConfigError]; !ok && got[pipeline.ReasonConfigError] != "" {
		t.Errorf("hint %s = %q, want none: the pod references no Secret", pipeline.ReasonConfigError, got[pipeline.ReasonConfigError])
	}
}

// TestArtifactInputsHash: every spec field is an input, metadata is not.
func TestArtifactInputsHash(t *testing.T) {
	base := wrappers.MakeArtifact("a", "ns")
	hash := func(a *v1alpha1.Artifact) string {
		t.Helper()
		w, err := controllers.ArtifactWork(a)
		if err != nil {
			t.Fatal(err)
		}
		return w.InputsHash
	}
	h := hash(base.Obj())
	if got := hash(wrappers.MakeArtifact("renamed", "other").Label("team", "a").Obj()); got != h {
		t.Errorf("name, namespace and labels changed the hash")
	}
	for name, a := range map[string]*v1alpha1.Artifact{
		"tag":         wrappers.MakeArtifact("a", "ns").Tag("v2").Obj(),
		"source":      wrappers.MakeArtifact("a", "ns").HF("acme/other").Obj(),
		"retry limit": wrappers.MakeArtifact("a", "ns").RetryLimit(1).Obj(),
	} {
		if hash(a) == h {
			t.Errorf("a new %s kept the hash", name)
		}
	}
}

// TestClaimWork: what each rule blocks with, and the render job of a Claim
// that passes them: placement, target, chosen exposure and profile,
// workspace defaults and Secret references.
func TestClaimWork(t *testing.T) {
	tenant := map[string]string{"tenant": "true", "site": "a"}
	tpl := func() *wrappers.ClaimTemplateWrapper {
		return wrappers.MakeClaimTemplate("web").ForNamespaces(map[string]string{"tenant": "true"}).
			Exposures(v1alpha1.ExposureClusterIP, v1alpha1.ExposureIngress)
	}
	claim := func() *wrappers.ClaimWrapper {
		return wrappers.MakeClaim("ide", "team-a", "web").Values(`{"replicas":2}`)
	}
	gpu := wrappers.MakeEnvironmentProfile("gpu", map[string]string{"site": "a"}).StorageClass("fast").WorkspaceSize("50Gi").
		WorkerResources(corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}).Obj()
	broken := wrappers.MakeEnvironmentProfile("broken", map[string]string{"site": "a"}).
		Match(metav1.LabelSelectorRequirement{Key: "zone", Operator: metav1.LabelSelectorOpIn}).Obj()

	// A template the manager reported invalid (an undeclared value in a
	// binding, a kind the cluster does not serve), at its generation.
	invalid := tpl().Obj()
	invalid.Generation = 2
	invalid.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: claims.ReasonInvalidTemplate, Message: "spec.kinds: this cluster does not serve Widget.example.com", ObservedGeneration: 2}}

	// got is what a test compares: the Blocked verdict, or the Work's
	// decisions (Secret references are in Mounts).
	type got struct {
		Blocked   string
		Permanent bool
		Namespace string
		Target    workerv1.Target
		Exposure  []v1alpha1.ExposureOption
		Profile   string
		Workspace pipeline.WorkspaceParams
		Resources *corev1.ResourceRequirements
		Mounts    pipeline.Mounts
	}
	run := func(c *v1alpha1.Claim, in controllers.ClaimInputs) got {
		w, err := controllers.ClaimWork(c, in)
		var b *pipeline.Blocked
		if errors.As(err, &b) {
			if b.InputsHash == "" {
				t.Errorf("%s: blocked without an inputs hash, so fixing it would not render", b.Reason)
			}
			return got{Blocked: b.Reason, Permanent: b.Permanent}
		}
		if err != nil {
			t.Fatal(err)
		}
		doc := w.Spec.(workerv1.Claim)
		g := got{Namespace: w.Namespace, Target: doc.Target, Exposure: doc.Template.Exposures,
			Workspace: w.WorkspaceDefaults, Resources: w.Resources, Mounts: w.Mounts}
		if doc.Profile != nil {
			g.Profile = doc.Profile.StorageClassName
		}
		if w.Command != "claim" || w.Tag != doc.Target.Tag || w.InputsHash == "" {
			t.Errorf("command %q, tag %q (target's %q), inputs hash %q", w.Command, w.Tag, doc.Target.Tag, w.InputsHash)
		}
		return g
	}
	const repo = "registry.example.com/claims/team-a/ide"
	clusterIP := []v1alpha1.ExposureOption{{Type: v1alpha1.ExposureClusterIP}}
	cases := []struct {
		name string
		c    *v1alpha1.Claim
		in   controllers.ClaimInputs
		want got
	}{
		{name: "template missing: waits",
			c: claim().Obj(), in: controllers.ClaimInputs{NamespaceLabels: tenant},
			want: got{Blocked: controllers.ReasonTemplateNotFound}},
		{name: "a broken profile meant for the namespace: waits",
			c: claim().Obj(), in: controllers.ClaimInputs{Template: tpl().Obj(), NamespaceLabels: tenant, Profiles: []v1alpha1.EnvironmentProfile{*broken}},
			want: got{Blocked: controllers.ReasonProfileInvalid}},
		{name: "an invalid template: waits, as for a failed check",
			c: claim().Obj(), in: controllers.ClaimInputs{Template: invalid, NamespaceLabels: tenant},
			want: got{Blocked: controllers.ReasonTemplateNotReady}},
		{name: "namespace not allowed",
			c: claim().Obj(), in: controllers.ClaimInputs{Template: tpl().Obj(), NamespaceLabels: map[string]string{"site": "a"}},
			want: got{Blocked: claims.ReasonAccessDenied, Permanent: true}},
		{name: "exposure not offered",
			c: claim().Exposure(v1alpha1.ExposureNodePort).Obj(), in: controllers.ClaimInputs{Template: tpl().Obj(), NamespaceLabels: tenant},
			want: got{Blocked: claims.ReasonExposureNotOffered, Permanent: true}},
		{name: "values against the schema",
			c: claim().Values(`{"replicas":9}`).Obj(), in: controllers.ClaimInputs{Template: tpl().Obj(), NamespaceLabels: tenant},
			want: got{Blocked: claims.ReasonInvalidValues, Permanent: true}},
		{name: "no target repository",
			c: claim().Obj(), in: controllers.ClaimInputs{Template: tpl().RepositoryPrefix("").Obj(), NamespaceLabels: tenant},
			want: got{Blocked: claims.ReasonNoTarget, Permanent: true}},
		{name: "private template: the Claim may not pick the push Secret",
			c:    claim().PushSecret("mine").Obj(),
			in:   controllers.ClaimInputs{Template: tpl().Private("repo", "push").Obj(), NamespaceLabels: tenant, TemplateNamespace: "packline-system"},
			want: got{Blocked: claims.ReasonTargetNotAllowed, Permanent: true}},
		{name: "private template without a template namespace",
			c:    claim().Obj(),
			in:   controllers.ClaimInputs{Template: tpl().Private("repo", "push").Obj(), NamespaceLabels: tenant},
			want: got{Blocked: claims.ReasonInvalidTemplate, Permanent: true}},
		{name: "public template, no profile",
			c: claim().Obj(), in: controllers.ClaimInputs{Template: tpl().Obj(), NamespaceLabels: tenant},
			want: got{Target: workerv1.Target{Repository: repo, Tag: "latest"}, Exposure: clusterIP}},
		{name: "profile: storage, workspace size and worker resources",
			c: claim().Exposure(v1alpha1.ExposureIngress).Obj(),
			in: controllers.ClaimInputs{Template: tpl().Obj(), NamespaceLabels: tenant,
				Profiles: []v1alpha1.EnvironmentProfile{*gpu}},
			want: got{Target: workerv1.Target{Repository: repo, Tag: "latest"}, Exposure: []v1alpha1.ExposureOption{{Type: v1alpha1.ExposureIngress}},
				Profile: "fast", Workspace: pipeline.WorkspaceParams{StorageClass: ptr.To("fast"), Size: ptr.To(resource.MustParse("50Gi"))},
				Resources: gpu.Spec.WorkerResources}},
		{name: "the Claim's own target and push Secret",
			c:  claim().Target(v1alpha1.Target{Repository: "r.example.com/mine", Tag: "v2", PlainHTTP: true}).PushSecret("push").Obj(),
			in: controllers.ClaimInputs{Template: tpl().Obj(), NamespaceLabels: tenant},
			want: got{Target: workerv1.Target{Repository: "r.example.com/mine", Tag: "v2", PlainHTTP: true}, Exposure: clusterIP,
				Mounts: pipeline.Mounts{Env: []corev1.EnvVar{pushEnv},
					Volumes: []corev1.Volume{dockerConfigVolume("push-auth", "push")},
					Mounts:  []corev1.VolumeMount{readOnly("push-auth", workerv1.PushAuthDir)},
					Sources: map[string]string{"push-auth": `Secret "push" (spec.target.pushSecretRef, key .dockerconfigjson)`}}}},
		{name: "private template: renders in the template namespace with its Secrets",
			c:  claim().Target(v1alpha1.Target{Tag: "v2"}).Obj(),
			in: controllers.ClaimInputs{Template: tpl().Private("repo", "push").Obj(), NamespaceLabels: tenant, TemplateNamespace: "packline-system"},
			want: got{Namespace: "packline-system", Target: workerv1.Target{Repository: repo, Tag: "v2"}, Exposure: clusterIP,
				Mounts: pipeline.Mounts{Env: []corev1.EnvVar{pushEnv},
					Volumes: []corev1.Volume{gitCredentialVolume("template-auth", "repo"), dockerConfigVolume("push-auth", "push")},
					Mounts:  []corev1.VolumeMount{readOnly("template-auth", workerv1.TemplateAuthDir), readOnly("push-auth", workerv1.PushAuthDir)},
					// The template's Secret: named by the template's field, never by name.
					Sources: map[string]string{"push-auth": "the push Secret of ClaimTemplate web spec.pushSecretRef in the template namespace (a platform admin must create it)"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, run(tc.c, tc.in)); diff != "" {
				t.Errorf("ClaimWork (-want +got):\n%s", diff)
			}
		})
	}
}
