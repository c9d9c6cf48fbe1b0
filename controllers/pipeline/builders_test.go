package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

var owner = Owner{GVK: schema.GroupVersionKind{Group: "packline.dev", Version: "v1alpha1", Kind: "Artifact"},
	Name: "llama", Namespace: "ml", UID: "0f7c5a7e-1d1c-4f43-9d8f-3c3e1f1d2b6a"}

func TestJobName(t *testing.T) {
	long := strings.Repeat("a", 63)
	cases := []struct {
		name, owner string
		gen         int64
		attempt     int32
		want        string
	}{
		{"short", "llama", 3, 1, "llama-g3-abcde-a1"},
		{"63 chars", long, 1, 1, long[:42] + "-" + short(hashOf(long+"-g1-abcde-a1"), 8) + "-g1-abcde-a1"},
		{"big generation", long, 123456789, 20, long[:33] + "-" + short(hashOf(long+"-g123456789-abcde-a20"), 8) + "-g123456789-abcde-a20"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := JobName(tc.owner, tc.gen, "abcdef123", tc.attempt)
			if got != tc.want {
				t.Errorf("JobName = %q, want %q", got, tc.want)
			}
			if len(got) > 63 {
				t.Errorf("%q is %d characters", got, len(got))
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("%q is not a valid label value: %v", got, errs)
			}
		})
	}
	if JobName(long+"x", 1, "h", 1) == JobName(long+"y", 1, "h", 1) {
		t.Error("distinct long names collide")
	}
}

func TestBuildWorkspace(t *testing.T) {
	cases := []struct {
		name      string
		p         WorkspaceParams
		wantSize  string
		wantClass *string
	}{
		{"defaults", WorkspaceParams{Owner: owner}, "10Gi", nil},
		{"from spec", WorkspaceParams{Owner: owner, Size: ptr.To(resource.MustParse("200Gi")), StorageClass: ptr.To("fast")}, "200Gi", ptr.To("fast")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pvc := BuildWorkspace(tc.p)
			if pvc.Name != "llama-workspace" || pvc.Namespace != "ml" {
				t.Errorf("name = %s/%s", pvc.Namespace, pvc.Name)
			}
			if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != tc.wantSize {
				t.Errorf("size = %s, want %s", got.String(), tc.wantSize)
			}
			if diff := cmp.Diff(tc.wantClass, pvc.Spec.StorageClassName); diff != "" {
				t.Errorf("class (-want +got): %s", diff)
			}
			if len(pvc.OwnerReferences) != 1 || !*pvc.OwnerReferences[0].Controller || pvc.OwnerReferences[0].UID != "0f7c5a7e-1d1c-4f43-9d8f-3c3e1f1d2b6a" {
				t.Errorf("owner reference = %+v", pvc.OwnerReferences)
			}
			if pvc.Labels[LabelOwnerUID] != owner.UID {
				t.Errorf("labels = %v", pvc.Labels)
			}
		})
	}
}

func jobParams(mut func(*JobParams)) JobParams {
	var m Mounts
	tgt := m.Target(v1alpha1.Target{Repository: "r.example.com/m", PushSecretRef: &corev1.LocalObjectReference{Name: "push-creds"},
		CASecretRef: &corev1.LocalObjectReference{Name: "ca"}}, "r.example.com/m")
	m.SecretEnv(workerv1.EnvHFToken, corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"})
	doc, _ := workerv1.EncodeSpec(workerv1.Artifact{Target: tgt})
	p := JobParams{Owner: owner, Generation: 2, Attempt: 1, InputsHash: "0123456789abcdef", Image: "worker:v1",
		Command: "artifact", SpecJSON: doc, Env: m.Env, Volumes: m.Volumes, Mounts: m.Mounts,
		Timeout: 2 * time.Hour, TTLAfterFinished: time.Hour,
		Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}
	if mut != nil {
		mut(&p)
	}
	return p
}

func TestBuildJob(t *testing.T) {
	job := BuildJob(jobParams(nil))
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"name", job.Name, "llama-g2-01234-a1"},
		{"backoffLimit", *job.Spec.BackoffLimit, int32(0)},
		{"activeDeadlineSeconds", *job.Spec.ActiveDeadlineSeconds, int64(7200)},
		{"ttl", *job.Spec.TTLSecondsAfterFinished, int32(3600)},
		{"not suspended", *job.Spec.Suspend, false},
		{"no queue label", job.Labels[QueueLabel], ""},
		{"image", c.Image, "worker:v1"},
		{"args", c.Args, []string{"artifact"}},
		{"runAsNonRoot", *pod.SecurityContext.RunAsNonRoot, true},
		{"seccomp", pod.SecurityContext.SeccompProfile.Type, corev1.SeccompProfileTypeRuntimeDefault},
		{"no SA token", *pod.AutomountServiceAccountToken, false},
		{"read-only root", *c.SecurityContext.ReadOnlyRootFilesystem, true},
		{"no escalation", *c.SecurityContext.AllowPrivilegeEscalation, false},
		{"drop ALL", c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}},
		{"restart never", pod.RestartPolicy, corev1.RestartPolicyNever},
		{"memory limit", c.Resources.Limits.Memory().String(), "1Gi"},
		{"pod labels carry generation", job.Spec.Template.Labels[LabelGeneration], "2"},
		{"pod labels carry attempt", job.Spec.Template.Labels[LabelAttempt], "1"},
	}
	for _, ck := range checks {
		if diff := cmp.Diff(ck.want, ck.got); diff != "" {
			t.Errorf("%s (-want +got): %s", ck.name, diff)
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	for _, path := range []string{workerv1.WorkspaceDir, workerv1.TmpDir, workerv1.PushAuthDir, workerv1.CADir} {
		if mounts[path] == "" {
			t.Errorf("nothing mounted at %s", path)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env[workerv1.EnvDockerConfig].Value != workerv1.PushAuthDir {
		t.Errorf("DOCKER_CONFIG = %q", env[workerv1.EnvDockerConfig].Value)
	}
	if ref := env[workerv1.EnvHFToken].ValueFrom; ref == nil || ref.SecretKeyRef.Name != "hf" || env[workerv1.EnvHFToken].Value != "" {
		t.Errorf("HF_TOKEN must come from a secretKeyRef only: %+v", env[workerv1.EnvHFToken])
	}
	if !strings.Contains(env[workerv1.EnvSpec].Value, `"caFile":"/var/run/packline/ca/ca.crt"`) {
		t.Errorf("worker spec lacks the CA path: %s", env[workerv1.EnvSpec].Value)
	}
	for _, l := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		for k := range l {
			if strings.Contains(k, "version") {
				t.Errorf("label %s would change on upgrade and orphan Jobs", k)
			}
		}
	}
}

func TestBuildJobQueued(t *testing.T) {
	job := BuildJob(jobParams(func(p *JobParams) { p.QueueName = "gpu-queue" }))
	if !*job.Spec.Suspend || job.Labels[QueueLabel] != "gpu-queue" {
		t.Fatalf("queued job: suspend=%v labels=%v", *job.Spec.Suspend, job.Labels)
	}
}

func TestBuildJobNamesNoSecretValue(t *testing.T) {
	job := BuildJob(jobParams(nil))
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "" {
			t.Errorf("volume %s has no secret name", v.Name)
		}
	}
	var push *corev1.SecretVolumeSource
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == "push-auth" {
			push = v.Secret
		}
	}
	if push == nil || push.SecretName != "push-creds" || len(push.Items) != 1 ||
		push.Items[0].Key != corev1.DockerConfigJsonKey || push.Items[0].Path != "config.json" {
		t.Fatalf("push secret volume = %+v", push)
	}
}

func TestWorkerResources(t *testing.T) {
	q := resource.MustParse
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return out
	}
	defaults := &corev1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "256Mi"), Limits: rl("memory", "2Gi")}
	cases := []struct {
		name   string
		layers []*corev1.ResourceRequirements
		want   corev1.ResourceRequirements
	}{
		{name: "defaults only", layers: []*corev1.ResourceRequirements{defaults, nil, nil},
			want: corev1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "256Mi"), Limits: rl("memory", "2Gi")}},
		{name: "profile then spec, per resource name",
			layers: []*corev1.ResourceRequirements{defaults,
				{Requests: rl("cpu", "1"), Limits: rl("memory", "8Gi", "nvidia.com/gpu", "1")},
				{Limits: rl("memory", "4Gi")}},
			want: corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "256Mi"), Limits: rl("memory", "4Gi", "nvidia.com/gpu", "1")}},
		{name: "a user limit under the default request lowers the request",
			layers: []*corev1.ResourceRequirements{defaults, nil, {Limits: rl("memory", "128Mi")}},
			want:   corev1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "128Mi"), Limits: rl("memory", "128Mi")}},
		{name: "nothing at all", layers: []*corev1.ResourceRequirements{{}, nil},
			want: corev1.ResourceRequirements{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, WorkerResources(tc.layers...)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseResourceList(t *testing.T) {
	got, err := ParseResourceList("cpu=250m, memory=1Gi")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("1Gi")}, got); diff != "" {
		t.Error(diff)
	}
	for _, bad := range []string{"cpu", "cpu=lots", "memory=-1Gi"} {
		if _, err := ParseResourceList(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestTmpSizeLimit(t *testing.T) {
	job := BuildJob(jobParams(func(p *JobParams) { p.TmpSize = resource.MustParse("1Gi") }))
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == "tmp" {
			if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "1Gi" {
				t.Fatalf("tmp volume %+v, want an emptyDir with sizeLimit 1Gi", v.VolumeSource)
			}
			return
		}
	}
	t.Fatal("no tmp volume")
}

// A credential Secret is never mounted whole: only the named keys, each
// optional because a credential uses only some of them.
func TestSecretKeysMountsOnlyNamedKeys(t *testing.T) {
	var m Mounts
	m.SecretKeys("source-auth", "git-creds", workerv1.SourceAuthDir, GitCredentialKeys...)
	if len(m.Volumes) != 1 || m.Volumes[0].Secret == nil {
		t.Fatalf("volumes %+v", m.Volumes)
	}
	sv := m.Volumes[0].Secret
	var keys []string
	for _, it := range sv.Items {
		keys = append(keys, it.Key+"->"+it.Path)
	}
	want := []string{"username->username", "password->password", "token->token", "ssh-privatekey->ssh-privatekey", "known_hosts->known_hosts"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	if sv.Optional == nil || !*sv.Optional {
		t.Error("the keys must be optional")
	}
	if !m.Mounts[0].ReadOnly || m.Mounts[0].MountPath != workerv1.SourceAuthDir {
		t.Errorf("mount %+v", m.Mounts[0])
	}
}

// The archive limit follows the workspace: extraction writes there.
func TestArchiveLimitFollowsWorkspace(t *testing.T) {
	size := resource.MustParse("20Gi")
	job := BuildJob(jobParams(func(p *JobParams) { p.WorkspaceSize = &size }))
	var got string
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == workerv1.EnvArchiveMaxBytes {
			got = e.Value
		}
	}
	if got != "21474836480" {
		t.Errorf("%s = %q, want the workspace size in bytes", workerv1.EnvArchiveMaxBytes, got)
	}
	if params := (WorkspaceParams{}); workspaceSize(params).String() != "10Gi" {
		t.Errorf("default workspace size %s", workspaceSize(params))
	}
}
