package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/cosigntest"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/wrappers"
)

var (
	pluginOnce sync.Once
	pluginBin  string
	pluginErr  error
)

// buildPlugin compiles cmd/kubectl-packline once for the suite.
func buildPlugin(t *testing.T) string {
	t.Helper()
	pluginOnce.Do(func() {
		root, err := sandbox.RepoRoot()
		if err != nil {
			pluginErr = err
			return
		}
		dir, err := os.MkdirTemp("", "packline-plugin-")
		if err != nil {
			pluginErr = err
			return
		}
		pluginBin = filepath.Join(dir, "kubectl-packline")
		cmd := exec.Command("go", "build", "-o", pluginBin, "./cmd/kubectl-packline")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginErr = errors.New(string(out))
		}
	})
	if pluginErr != nil {
		t.Fatalf("building kubectl-packline: %v", pluginErr)
	}
	return pluginBin
}

// pluginRun is one run of the plugin binary.
type pluginRun struct {
	Stdout, Stderr string
	Code           int
}

// runPlugin runs kubectl-packline with kubeconfig (a tenant's), as a
// user would, in a clean environment (no DOCKER_CONFIG, HOME a temp dir).
func runPlugin(t *testing.T, kubeconfig string, args ...string) pluginRun {
	t.Helper()
	cmd := exec.Command(buildPlugin(t), append(args, "--kubeconfig", kubeconfig)...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := pluginRun{Stdout: out.String(), Stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.Code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running kubectl-packline %v: %v", args, err)
	}
	return r
}

// tenant makes a user, alice of group ml-team, with the rights a tenant
// gets from the sample roles in namespace ns: manage Claims, claim the
// template tpl, create what it renders, read Artifacts, events, Jobs, pods
// and their logs, and (cluster-wide) list ClaimTemplates. It returns her
// kubeconfig.
func tenant(t *testing.T, ns, tpl string) string {
	t.Helper()
	kc, err := sb.UserKubeconfig("alice-"+ns, "alice-"+ns, []string{"ml-team"})
	if err != nil {
		t.Fatal(err)
	}
	user := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice-" + ns}
	// Listing templates is cluster-wide; the claim verb is granted for
	// this namespace only, through a RoleBinding.
	list := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "catalog-" + ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"packline.dev"}, Resources: []string{"claimtemplates"}, Verbs: []string{"get", "list"}}}}
	claimer := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"packline.dev"}, Resources: []string{"claimtemplates"}, Verbs: []string{"claim"}, ResourceNames: []string{tpl}}}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "catalog-" + ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: list.Name}, Subjects: []rbacv1.Subject{user}}
	for _, o := range []client.Object{list, claimer, crb} {
		create(t, o)
		t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), o) })
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"packline.dev"}, Resources: []string{"claims"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"packline.dev"}, Resources: []string{"artifacts"}, Verbs: []string{"get", "list", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{""}, Resources: []string{"events", "pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}, ResourceNames: []string{ns}},
		{APIGroups: []string{"source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io"}, Resources: []string{"ocirepositories", "kustomizations"}, Verbs: []string{"get"}},
	}}
	create(t, role)
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"}, Subjects: []rbacv1.Subject{user}})
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: claimer.Name}, Subjects: []rbacv1.Subject{user}})
	return kc
}

// The plugin, as a tenant with only her own rights, on the sandbox:
// catalog, claim (local render, value errors, server dry run, create),
// why (Ready, failed with the worker's log, delivered through Flux),
// rerun, pull (digests verified, modes kept, a corrupted blob refused)
// and completion.
func TestPluginClaimFlow(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	mine := wrappers.MakeClaimTemplate("plugin-"+ns).Source(repo.URL, "main", "apps/code-server/base").Service("code-server").
		Schema(`{"type":"object","additionalProperties":false,"properties":{"replicas":{"type":"integer","minimum":1,"maximum":3}}}`).
		Exposures(v1alpha1.ExposureClusterIP).ForNamespaces(sandbox.TenantLabels).RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	admins := wrappers.MakeClaimTemplate("plugin-admins-"+ns).Source(repo.URL, "main", "apps/code-server/base").
		ForNamespaces(sandbox.TenantLabels).RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	admins.Spec.Access.Groups = []string{"platform-admins"}
	for _, tpl := range []*v1alpha1.ClaimTemplate{mine, admins} {
		create(t, tpl)
		t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	}
	kc := tenant(t, ns, mine.Name)

	// catalog: her template, with its values and exposures; the other one
	// only with --all, and why not.
	waitFor(t, func(g Gomega) {
		r := runPlugin(t, kc, "catalog", "-n", ns)
		g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
		g.Expect(r.Stdout).To(MatchRegexp(`(?m)^` + mine.Name + `\s+True\s+replicas:integer\s+ClusterIP\s*$`))
		g.Expect(r.Stdout).NotTo(ContainSubstring(admins.Name))
	}).Should(Succeed(), "the template's check makes it Ready")
	r := runPlugin(t, kc, "catalog", "-n", ns, "--all")
	t.Logf("catalog --all:\n%s", r.Stdout)
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	g.Expect(r.Stdout).To(MatchRegexp(admins.Name + `\s+.*\s+no\s+.*spec.access.groups \(platform-admins\)`))
	g.Expect(r.Stdout).To(ContainSubstring(`"claim" on claimtemplates.packline.dev named "` + admins.Name + `"`))

	r = runPlugin(t, kc, "why", "ctpl/"+mine.Name)
	g.Expect(r.Code).To(Equal(0), "%s", r.Stdout+r.Stderr)
	g.Expect(r.Stdout).To(ContainSubstring("Check render: commit " + repo.Commits[0]))

	// claim: value errors name their field, locally, before anything is sent.
	r = runPlugin(t, kc, "claim", mine.Name, "ide", "-n", ns, "--set", "replicas=two")
	g.Expect(r.Code).To(Equal(1))
	g.Expect(r.Stderr).To(ContainSubstring(`--set replicas=two: spec.values.replicas: "two" is not an integer`))
	r = runPlugin(t, kc, "claim", mine.Name, "ide", "-n", ns, "--set", "replicas=9", "--set", "colour=red")
	g.Expect(r.Code).To(Equal(1))
	g.Expect(r.Stderr).To(ContainSubstring("spec.values.replicas: maximum: got 9, want 3"))
	g.Expect(r.Stderr).To(ContainSubstring("spec.values: additional properties 'colour' not allowed"))
	r = runPlugin(t, kc, "claim", admins.Name, "ide", "-n", ns)
	g.Expect(r.Code).To(Equal(1))
	g.Expect(r.Stderr).To(ContainSubstring("spec.templateRef: ClaimTemplate " + admins.Name + " may be claimed only by members of the groups in its spec.access.groups"))

	// --dry-run=local renders with the worker's code: the values land.
	values := filepath.Join(t.TempDir(), "values.yaml")
	g.Expect(os.WriteFile(values, []byte("replicas: 1\n"), 0o644)).To(Succeed())
	r = runPlugin(t, kc, "claim", mine.Name, "ide", "-n", ns, "-f", values, "--set", "replicas=2", "--dry-run=local")
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	g.Expect(r.Stdout).To(ContainSubstring("# deployment.apps_code-server.yaml"))
	g.Expect(r.Stdout).To(ContainSubstring("replicas: 2"))
	g.Expect(r.Stdout).To(ContainSubstring("namespace: " + ns))
	g.Expect(r.Stdout).To(ContainSubstring(repo.Commits[0]))

	// --dry-run=server goes through the webhooks and creates nothing.
	r = runPlugin(t, kc, "claim", mine.Name, "ide", "-n", ns, "--set", "replicas=2", "--plain-http", "--dry-run=server")
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	err := sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ide"}, &v1alpha1.Claim{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a server dry run created the Claim: %v", err)

	// Without --dry-run, the Claim is created, as alice.
	r = runPlugin(t, kc, "claim", mine.Name, "ide", "-n", ns, "--set", "replicas=2", "--plain-http")
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	c := &v1alpha1.Claim{ObjectMeta: metav1.ObjectMeta{Name: "ide", Namespace: ns}}
	waitReady(t, c, c.GetPipelineStatus)
	g.Expect(c.Annotations[v1alpha1.AnnotationRequester]).To(ContainSubstring(`"username":"alice-` + ns + `"`))

	// why: Ready, exit 0.
	r = runPlugin(t, kc, "why", "claim/ide", "-n", ns)
	t.Logf("why claim/ide:\n%s", r.Stdout)
	g.Expect(r.Code).To(Equal(0), "%s", r.Stdout+r.Stderr)
	g.Expect(r.Stdout).To(ContainSubstring("Pushed: " + c.Status.Reference))
	g.Expect(r.Stdout).To(MatchRegexp(`Ready\s+True`))
	g.Expect(r.Stdout).To(ContainSubstring("Verdict: Ready (exit 0)"))

	// --diff: what a new value would change against what the Claim pushed.
	r = runPlugin(t, kc, "claim", mine.Name, "ide", "-n", ns, "--set", "replicas=3", "--dry-run=local", "--diff")
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	g.Expect(r.Stdout).To(ContainSubstring("--- deployment.apps_code-server.yaml (pushed)"))
	g.Expect(r.Stdout).To(MatchRegexp(`(?m)^-\s+replicas: 2$`))
	g.Expect(r.Stdout).To(MatchRegexp(`(?m)^\+\s+replicas: 3$`))
	r = runPlugin(t, kc, "claim", mine.Name, "ide", "-n", ns, "--set", "replicas=2", "--dry-run=local", "--diff")
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	g.Expect(r.Stdout).To(HavePrefix("No change against what Claim ide pushed"))

	// pull: the manifests, every digest checked, modes as in the layer.
	dir := filepath.Join(t.TempDir(), "ide")
	r = runPlugin(t, kc, "pull", "claim/ide", dir, "-n", ns)
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	g.Expect(r.Stderr).To(ContainSubstring("100%"))
	b, err := os.ReadFile(filepath.Join(dir, "deployment.apps_code-server.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("replicas: 2"))
	expectModes(t, c.Status.Reference, dir)

	// A blob the registry serves corrupted is refused, and nothing stays.
	corruptLayer(t, c.Status.Reference)
	bad := filepath.Join(t.TempDir(), "bad")
	r = runPlugin(t, kc, "pull", "claim/ide", bad, "-n", ns)
	g.Expect(r.Code).To(Equal(1))
	g.Expect(r.Stderr).To(ContainSubstring("digest check failed"), "%s", r.Stderr)
	left, _ := os.ReadDir(bad)
	g.Expect(left).To(BeEmpty())

	// completion: a bash script that parses.
	r = runPlugin(t, kc, "completion", "bash")
	g.Expect(r.Code).To(Equal(0))
	g.Expect(r.Stdout).To(ContainSubstring("complete -F _kubectl_packline kubectl-packline"))
	out, err := exec.Command("bash", "-n", "-c", r.Stdout).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	// kubectl's plugin completion: kubectl (1.26+) runs
	// kubectl_complete-packline from PATH with the words after "packline"
	// (the last one being typed) and its own environment. Both ways of
	// shipping it answer: the script next to main.go, and the binary under
	// that name.
	link := filepath.Join(t.TempDir(), "kubectl_complete-packline")
	g.Expect(os.Symlink(buildPlugin(t), link)).To(Succeed())
	root, err := sandbox.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	for _, exe := range []string{filepath.Join(root, "cmd", "kubectl-packline", "kubectl_complete-packline"), link} {
		verbs := kubectlComplete(t, exe, kc, "")
		g.Expect(verbs).To(ContainElements("catalog", "claim", "why", "rerun", "pull", "verify", "ui", "completion"))
		g.Expect(kubectlComplete(t, exe, kc, "why", "-n", ns, "")).To(ContainElements("claim/ide", "claimtemplate/"+mine.Name))
		g.Expect(kubectlComplete(t, exe, kc, "pull", "--namespace="+ns, "claim/")).To(Equal([]string{"claim/ide"}))
		g.Expect(kubectlComplete(t, exe, kc, "claim", "-n", ns, "plugin-")).To(ContainElements(mine.Name, admins.Name))
		g.Expect(kubectlComplete(t, exe, kc, "claim", mine.Name, "x", "--dry-run=")).To(Equal([]string{"--dry-run=local", "--dry-run=none", "--dry-run=server"}))
	}
}

// kubectlComplete runs a kubectl_complete-packline as kubectl does
// (KUBECONFIG in the environment, kubectl-packline on PATH) and returns
// its candidates (without descriptions) after checking the directive line.
func kubectlComplete(t *testing.T, exe, kubeconfig string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "KUBECONFIG=" + kubeconfig, "PATH=" + filepath.Dir(buildPlugin(t)) + string(os.PathListSeparator) + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v", exe, args, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, ":") {
		t.Fatalf("%s %q: no :directive last line in\n%s", exe, args, out)
	}
	var cands []string
	for _, l := range lines[:len(lines)-1] {
		w, _, _ := strings.Cut(l, "\t")
		cands = append(cands, w)
	}
	return cands
}

// expectModes compares each pulled file's mode with its tar header in the
// pushed layers, read here independently of the plugin.
func expectModes(t *testing.T, reference, dir string) {
	t.Helper()
	ctx := context.Background()
	repo, err := remote.NewRepository(reference)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	_, mb, err := fetchBytes(ctx, repo, repo.Reference.Reference)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range m.Layers {
		rc, err := repo.Fetch(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := tarReader(rc, l.MediaType)
		if err != nil {
			t.Fatal(err)
		}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(h.Name)))
			if err != nil {
				t.Fatalf("pulled %s: %v", h.Name, err)
			}
			if fi.Mode().Perm() != os.FileMode(h.Mode).Perm() || fi.Size() != h.Size {
				t.Errorf("%s: pulled mode %v size %d, layer has %v size %d", h.Name, fi.Mode().Perm(), fi.Size(), os.FileMode(h.Mode).Perm(), h.Size)
			}
			n++
		}
		rc.Close()
	}
	if n == 0 {
		t.Fatal("no regular file in the layers")
	}
}

func fetchBytes(ctx context.Context, repo *remote.Repository, ref string) (ocispec.Descriptor, []byte, error) {
	desc, err := repo.Resolve(ctx, ref)
	if err != nil {
		return desc, nil, err
	}
	b, err := content.FetchAll(ctx, repo, desc)
	return desc, b, err
}

func tarReader(r io.Reader, mediaType string) (*tar.Reader, error) {
	if strings.HasSuffix(mediaType, "gzip") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		return tar.NewReader(zr), nil
	}
	return tar.NewReader(r), nil
}

// corruptLayer flips one byte of reference's first layer in the
// registry's storage, keeping its size: the registry then serves bytes
// that do not match the digest, as a broken disk or a hostile mirror would.
func corruptLayer(t *testing.T, reference string) {
	t.Helper()
	ctx := context.Background()
	repo, err := remote.NewRepository(reference)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	_, mb, err := fetchBytes(ctx, repo, repo.Reference.Reference)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	hex := m.Layers[0].Digest.Encoded()
	var data string
	_ = filepath.WalkDir(filepath.Join(sb.Dir, "registry", "storage"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "data" && filepath.Base(filepath.Dir(p)) == hex {
			data = p
		}
		return nil
	})
	if data == "" {
		t.Fatalf("layer %s not found under %s", hex, sb.Dir)
	}
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// why on a failed run shows the failing reason, the worker's log and
// exits 1; rerun sets packline.dev/requestedAt and the controller acts on
// it; verify checks what the worker signed, as the cosign CLI does.
func TestPluginWhyRerunVerify(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := newNamespace(t)
	// A template with repository credentials: alice may claim it, but its
	// credentials are the manager's, so it cannot be rendered on her laptop.
	private := wrappers.MakeClaimTemplate("plugin-private-"+ns).Source("https://git.example.com/private.git", "main", "apps/code-server/base").
		Private("repo-creds", "push-creds").ForNamespaces(sandbox.TenantLabels).RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	create(t, private)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), private) })
	kc := tenant(t, ns, private.Name)
	r := runPlugin(t, kc, "claim", private.Name, "p", "-n", ns, "--dry-run=local")
	g.Expect(r.Code).To(Equal(1), "%s", r.Stdout+r.Stderr)
	g.Expect(r.Stderr).To(ContainSubstring("ClaimTemplate " + private.Name + " reads a private repository (spec.source.secretRef): its credentials are for the manager only, so it cannot be rendered here; use --dry-run=server"))

	// A source that does not exist fails for good.
	bad := newArtifact(ns, "missing", "packline/no-such-model").Obj()
	create(t, bad)
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(bad), bad)).To(Succeed())
		g.Expect(bad.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
	}).Should(Succeed(), "logs in %s", logsHint())
	r = runPlugin(t, kc, "why", "artifact/missing", "-n", ns)
	t.Logf("why artifact/missing:\n%s", r.Stdout)
	g.Expect(r.Code).To(Equal(1), "%s", r.Stdout+r.Stderr)
	ready := condition(&bad.Status, v1alpha1.ConditionReady)
	g.Expect(r.Stdout).To(ContainSubstring("Failing: "))
	g.Expect(r.Stdout).To(ContainSubstring(ready.Reason))
	g.Expect(r.Stdout).To(ContainSubstring("Worker log (last 20 lines of pod "))
	// The worker's own last words, through the API server's pods/log.
	_, workerLog, _ := strings.Cut(r.Stdout, "Worker log (")
	workerLog, _, _ = strings.Cut(workerLog, "Verdict:")
	g.Expect(workerLog).To(ContainSubstring("no-such-model"))
	g.Expect(workerLog).NotTo(ContainSubstring("cannot read"))
	g.Expect(r.Stdout).To(ContainSubstring("Verdict: failed"))

	// rerun: the annotation, and the controller starts a new attempt for it.
	attempts := bad.Status.Attempts
	r = runPlugin(t, kc, "rerun", "artifact/missing", "-n", ns)
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(bad), bad)).To(Succeed())
	requested := bad.Annotations[v1alpha1.AnnotationRequestedAt]
	g.Expect(requested).NotTo(BeEmpty())
	g.Expect(r.Stdout).To(ContainSubstring(requested))
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(bad), bad)).To(Succeed())
		g.Expect(bad.Status.LastHandledRequestedAt).To(Equal(requested))
		g.Expect(bad.Status.Attempts).To(BeNumerically(">", attempts))
	}).Should(Succeed(), "logs in %s", logsHint())

	// verify: a signed Artifact, with its key; and with another key,
	// refused, as cosign refuses it.
	kp := cosignSecret(t, ns, "cosign")
	a := newArtifact(ns, "signed", "packline/tiny-model").Obj()
	a.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "cosign"}}
	create(t, a)
	waitReady(t, a, a.GetPipelineStatus)
	r = runPlugin(t, kc, "verify", "artifact/signed", "-n", ns, "--key", kp.Public())
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	g.Expect(r.Stdout).To(ContainSubstring("Verified " + a.Status.Reference))
	g.Expect(r.Stdout).To(ContainSubstring("provenance:  SLSA v1"))
	if out, err := cosigntest.Verify(t, kp.Public(), a.Status.Reference); err != nil {
		t.Fatalf("cosign disagrees: %v\n%s", err, out)
	}
	other := cosigntest.GenerateKeyPair(t, "other")
	r = runPlugin(t, kc, "verify", "artifact/signed", "-n", ns, "--key", other.Public())
	g.Expect(r.Code).To(Equal(1))
	g.Expect(r.Stderr).To(ContainSubstring("does not verify with key " + other.Public()))
	g.Expect(r.Stderr).To(ContainSubstring("not signed by this key"))
	_, cosignErr := cosigntest.Verify(t, other.Public(), a.Status.Reference)
	g.Expect(cosignErr).To(HaveOccurred(), "cosign accepted another key")

	// pull of a ModelKit: the files, as imported.
	dir := filepath.Join(t.TempDir(), "model")
	r = runPlugin(t, kc, "pull", "artifact/signed", dir, "-n", ns)
	g.Expect(r.Code).To(Equal(0), "%s", r.Stderr)
	b, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b).To(Equal(bytes.Repeat([]byte{0x2a}, 64<<10)))
	expectModes(t, a.Status.Reference, dir)
}

// why on a delivered Claim shows Flux's objects and waits for them: exit
// 0 only once Flux applied the digest.
func TestPluginWhyFlux(t *testing.T) {
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate("plugin-flux-"+ns).Source(repo.URL, "main", "apps/code-server/base").Service("code-server").
		Exposures(v1alpha1.ExposureClusterIP).ForNamespaces(sandbox.TenantLabels).RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	kc := tenant(t, ns, tpl.Name)
	deployer(t, ns)
	c := wrappers.MakeClaim("delivered", ns, tpl.Name).Exposure(v1alpha1.ExposureClusterIP).Target(v1alpha1.Target{PlainHTTP: true}).Obj()
	c.Spec.Delivery = &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer", Wait: ptr.To(false)}}
	create(t, c)
	waitReady(t, c, c.GetPipelineStatus)
	waitFor(t, func(g Gomega) {
		r := runPlugin(t, kc, "why", "claim/delivered", "-n", ns)
		g.Expect(r.Code).To(Equal(0), "%s", r.Stdout+r.Stderr)
		g.Expect(r.Stdout).To(MatchRegexp(`OCIRepository \S+: Ready=True`))
		g.Expect(r.Stdout).To(MatchRegexp(`Kustomization \S+: Ready=True`))
	}).Should(Succeed())
}

// why's other two verdicts: a template whose check render failed exits 1,
// and a Claim waiting for that template exits 2 (it renders by itself once
// the template is fixed).
func TestPluginWhyWaiting(t *testing.T) {
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate("plugin-wrong-"+ns).Source(repo.URL, "main", "apps/no-such-app").
		Kinds(v1alpha1.RenderedKind{Group: "apps", Kind: "Deployment"}).ForNamespaces(sandbox.TenantLabels).
		RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	tpl.Spec.ValuesSchema, tpl.Spec.Parameters = nil, nil
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	kc := tenant(t, ns, tpl.Name)
	waitFor(t, func(g Gomega) {
		r := runPlugin(t, kc, "why", "claimtemplate/"+tpl.Name)
		g.Expect(r.Code).To(Equal(1), "%s", r.Stdout+r.Stderr)
		g.Expect(r.Stdout).To(ContainSubstring("apps/no-such-app"))
	}).Should(Succeed())
	c := wrappers.MakeClaim("waits", ns, tpl.Name).Target(v1alpha1.Target{PlainHTTP: true}).Obj()
	create(t, c)
	waitFor(t, func(g Gomega) {
		r := runPlugin(t, kc, "why", "claim/waits", "-n", ns)
		g.Expect(r.Code).To(Equal(2), "%s", r.Stdout+r.Stderr)
		g.Expect(r.Stdout).To(ContainSubstring("TemplateNotReady"))
		g.Expect(r.Stdout).To(ContainSubstring("Verdict: progressing (exit 2)"))
	}).Should(Succeed())
}
