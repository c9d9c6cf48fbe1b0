package tutorial

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/docs"
	"github.com/packline/packline/test/testenv"
)

// outcomes are what each tutorial says the reader ends with, checked
// after its last command through the API (as the demo's admin, and as
// alice where the outcome is hers). Every tutorial in docs/tutorials has
// one: TestEveryTutorialIsRun.
var outcomes = map[string]func(t *testing.T, d *demo){
	"platform-admin.md": platformAdminOutcome,
	"ml-team.md":        mlTeamOutcome,
}

// TestTutorialPlatformAdmin: from `make demo`, a platform admin opens
// namespace team-a to group team-a for the code-server template, with
// delivery by Flux as the team's ServiceAccount.
func TestTutorialPlatformAdmin(t *testing.T) { runTutorial(t, "platform-admin.md") }

// TestTutorialMLTeam: after the platform admin tutorial, alice claims
// code-server with the plugin, and it is pushed, delivered by Flux,
// pulled back and changed.
func TestTutorialMLTeam(t *testing.T) { runTutorial(t, "ml-team.md") }

func TestEveryTutorialIsRun(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "docs", "tutorials", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	for f := range outcomes {
		want = append(want, f)
	}
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("docs/tutorials has %v, test/tutorial runs %v: add a Test and an outcome for each tutorial", got, want)
	}
}

// The demo's names the outcomes check (config/samples, cmd/sandbox).
const (
	adminContext  = "sandbox-admin"
	tenantContext = "alice"
	tenantNS      = "team-a"
)

// demo is what the tutorial's commands set up, seen from the test.
type demo struct {
	kubeconfig string
	admin      client.Client
	alice      client.Client
}

// Deadlines. The demo's first start in a clone compiles the manager,
// worker, sandbox and plugin; later ones reuse the Go build cache.
const (
	demoReady  = 15 * time.Minute
	oneCommand = 4 * time.Minute
)

// runTutorial runs file's commands, after those of every tutorial it
// requires, each in order, in one shell at the repository's root, and
// then checks the tutorial's outcome.
func runTutorial(t *testing.T, file string) {
	root := testenv.RepoRoot()
	chain, err := load(root, file)
	if err != nil {
		t.Fatal(err)
	}
	env, err := environ(t)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := startShell(root, env)
	if err != nil {
		t.Fatal(err)
	}
	var bgs []*background
	// Cleanups run last-in first-out: the shell closes, then the demo is
	// stopped as Ctrl-C stops it.
	t.Cleanup(func() {
		sh.close()
		for _, bg := range bgs {
			if !bg.stop(time.Minute) {
				t.Errorf("the demo did not stop within a minute of SIGINT (Ctrl-C); killed it")
			}
		}
	})
	start := time.Now()
	for _, tut := range chain {
		for _, b := range tut.Blocks {
			switch b.Mode {
			case docs.Skip:
				t.Logf("%s:%d: skipped (%s)", tut.File, b.Line, b.Reason)
			case docs.Background:
				c := b.Commands[0]
				t.Logf("%s:%d: $ %s &", tut.File, c.Line, c.Text)
				bg, err := startBackground(root, env, c.Text, b.Ready, demoReady, func(f string, a ...any) { t.Logf("  | "+f, a...) })
				if err != nil {
					t.Fatalf("%s:%d: %v", tut.File, c.Line, err)
				}
				bgs = append(bgs, bg)
			case docs.Run:
				var out string
				for _, c := range b.Commands {
					began := time.Now()
					o, code, err := sh.run(c.Text, oneCommand)
					t.Logf("%s:%d: $ %s\n%s\n(exit %d, %s)", tut.File, c.Line, c.Text, o, code, time.Since(began).Round(time.Millisecond))
					if err != nil {
						t.Fatalf("%s:%d: %v", tut.File, c.Line, err)
					}
					if code != 0 {
						t.Fatalf("%s:%d: `%s` exited %d:\n%s", tut.File, c.Line, c.Text, code, o)
					}
					out = o
				}
				// The output the tutorial shows after the block is what
				// its last command printed.
				if missing := docs.MissingOutput(b.Output, out); len(missing) > 0 {
					t.Errorf("%s:%d: the tutorial shows output lines the command did not print:\n%s\nit printed:\n%s",
						tut.File, b.Line, strings.Join(missing, "\n"), out)
				}
			}
		}
	}
	t.Logf("%s: every command ran in %s", file, time.Since(start).Round(time.Second))
	d := connect(t, sh)
	for _, tut := range chain {
		outcomes[filepath.Base(tut.File)](t, d)
	}
}

// load parses file and, first, the tutorials it requires.
func load(root, file string) ([]docs.Tutorial, error) {
	var chain []docs.Tutorial
	seen := map[string]bool{}
	var visit func(string) error
	visit = func(f string) error {
		if seen[f] {
			return nil
		}
		seen[f] = true
		rel := filepath.Join("docs", "tutorials", f)
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return err
		}
		tut, problems := docs.ParseTutorial(rel, string(b))
		if len(problems) > 0 {
			return errorsOf(problems)
		}
		for _, r := range tut.Requires {
			if err := visit(r); err != nil {
				return err
			}
		}
		chain = append(chain, tut)
		return nil
	}
	return chain, visit(file)
}

type errorsOf []string

func (e errorsOf) Error() string { return strings.Join(e, "\n") }

// environ is the user's environment, with a real kubectl (built with the
// Kubernetes test binaries) first on PATH, no KUBECONFIG (the tutorial
// sets it), temp files and kubectl's cache in the test's folders, and
// nothing of the make that may run this test.
func environ(t *testing.T) ([]string, error) {
	assets, err := testenv.Assets()
	if err != nil {
		return nil, err
	}
	kubectl := filepath.Join(assets, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("no kubectl in %s (test/tools/k8s-assets.sh builds it with the other Kubernetes binaries): %v", assets, err)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PATH", "TMPDIR", "KUBECACHEDIR":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"PATH="+assets+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TMPDIR="+t.TempDir(),
		"KUBECACHEDIR="+t.TempDir(),
	), nil
}

// connect reads the KUBECONFIG the tutorial exported and makes a client
// for the admin and one for alice from it.
func connect(t *testing.T, sh *shell) *demo {
	out, code, err := sh.run(`printf '%s\n' "$KUBECONFIG"`, time.Minute)
	if err != nil || code != 0 || strings.TrimSpace(out) == "" {
		t.Fatalf("reading the tutorial's KUBECONFIG: %q exit %d: %v", out, code, err)
	}
	d := &demo{kubeconfig: strings.TrimSpace(out)}
	d.admin = clientFor(t, d.kubeconfig, adminContext)
	d.alice = clientFor(t, d.kubeconfig, tenantContext)
	return d
}

func clientFor(t *testing.T, kubeconfig, context string) client.Client {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		t.Fatalf("kubeconfig %s, context %s: %v", kubeconfig, context, err)
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func eventually(t *testing.T, f any) AsyncAssertion {
	return NewWithT(t).Eventually(f).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond)
}

// platformAdminOutcome: the template is Ready, team-a is a tenant
// namespace whose profile delivers as deployer, and alice, with her own
// credentials, may claim code-server there and nowhere else.
func platformAdminOutcome(t *testing.T, d *demo) {
	ctx := context.Background()
	eventually(t, func(g Gomega) {
		tpl := &v1alpha1.ClaimTemplate{}
		g.Expect(d.admin.Get(ctx, client.ObjectKey{Name: "code-server"}, tpl)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(tpl.Status.Conditions, "Ready")).To(BeTrue(), "%+v", tpl.Status.Conditions)
		p := &v1alpha1.EnvironmentProfile{}
		g.Expect(d.admin.Get(ctx, client.ObjectKey{Name: tenantNS}, p)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(p.Status.Conditions, "Ready")).To(BeTrue(), "%+v", p.Status.Conditions)
		g.Expect(p.Spec.Delivery).NotTo(BeNil())
		g.Expect(p.Spec.Delivery.Flux.ServiceAccountName).To(Equal("deployer"))
	}).Should(Succeed())
	ns := &corev1.Namespace{}
	if err := d.admin.Get(ctx, client.ObjectKey{Name: tenantNS}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["packline.dev/tenant"] != "true" {
		t.Errorf("namespace %s labels %v: want packline.dev/tenant=true", tenantNS, ns.Labels)
	}
	for ns, want := range map[string]bool{tenantNS: true, "default": false} {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "claim", Group: v1alpha1.GroupVersion.Group, Resource: "claimtemplates", Name: "code-server"}}}
		if err := d.alice.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != want {
			t.Errorf("alice may claim code-server in %s: %v, want %v", ns, r.Status.Allowed, want)
		}
	}
}

// mlTeamOutcome: alice's Claim is Ready, pushed and delivered at its
// digest, with her as the sealed requester, and the Deployment Flux
// applied has the replicas of her last edit.
func mlTeamOutcome(t *testing.T, d *demo) {
	ctx := context.Background()
	eventually(t, func(g Gomega) {
		c := &v1alpha1.Claim{}
		g.Expect(d.alice.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "my-ide"}, c)).To(Succeed())
		g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
		g.Expect(apimeta.IsStatusConditionTrue(c.Status.Conditions, "Ready")).To(BeTrue(), "%+v", c.Status.Conditions)
		g.Expect(apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionDelivered)).To(BeTrue(), "%+v", c.Status.Conditions)
		g.Expect(c.Status.Digest).To(HavePrefix("sha256:"))
		g.Expect(c.Status.Delivery).NotTo(BeNil())
		g.Expect(c.Status.Delivery.LastAppliedRevision).To(Equal(c.Status.Digest))
		g.Expect(c.Annotations[v1alpha1.AnnotationRequester]).To(ContainSubstring(`"username":"alice"`))
		dep := &appsv1.Deployment{}
		g.Expect(d.alice.Get(ctx, client.ObjectKey{Namespace: tenantNS, Name: "code-server"}, dep)).To(Succeed())
		g.Expect(dep.Spec.Replicas).To(HaveValue(Equal(int32(2))))
		g.Expect(dep.Labels).To(HaveKeyWithValue("kustomize.toolkit.fluxcd.io/name", "my-ide"))
	}).Should(Succeed())
}
