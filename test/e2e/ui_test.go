package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/wrappers"
)

// chromium is the browser the page test drives: $PACKLINE_CHROMIUM, else
// Debian's chromium on PATH.
func chromium() string {
	if p := os.Getenv("PACKLINE_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// startUI runs `kubectl packline ui` as the tenant and returns the URL it
// prints; the server is stopped (Ctrl-C) when the test ends.
func startUI(t *testing.T, kubeconfig, ns string) string {
	t.Helper()
	cmd := exec.Command(buildPlugin(t), "ui", "-n", ns, "--port", "0", "--kubeconfig", kubeconfig)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("kubectl packline ui did not stop cleanly on Ctrl-C: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("kubectl packline ui did not stop within 10s of Ctrl-C")
		}
	})
	urlc := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/s/[A-Za-z0-9_-]+/`)
		s := bufio.NewScanner(out)
		for s.Scan() {
			if u := re.FindString(s.Text()); u != "" {
				urlc <- u
			}
		}
	}()
	select {
	case u := <-urlc:
		return u
	case <-time.After(time.Minute):
		t.Fatalf("kubectl packline ui printed no URL within a minute; stderr:\n%s", stderr.String())
	}
	return ""
}

// The catalogue page in a real browser (Debian's chromium, driven with
// chromedp), as a tenant with only her own rights: she picks the
// template's card, fills the form generated from its values schema (the
// inline errors name the field), sees the local render, clicks Create and
// watches the Claim become Ready on the page; her Artifact is listed too.
// Screenshots go to $PACKLINE_SCREENSHOTS (docs/images for the docs).
func TestPluginUIBrowser(t *testing.T) {
	chrome := chromium()
	if chrome == "" {
		t.Skip("chromium is not installed (apt-get install chromium; .ci/run installs it): the catalogue page's browser test needs a real browser")
	}
	began := time.Now()
	ctx := context.Background()
	g := NewWithT(t)
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate("code-server-"+ns).Source(repo.URL, "main", "apps/code-server/base").Service("code-server").
		Schema(`{"type":"object","additionalProperties":false,"required":["replicas"],"properties":{"replicas":{"type":"integer","minimum":1,"maximum":3,"examples":[1],"description":"pods of code-server"}}}`).
		Exposures(v1alpha1.ExposureClusterIP, v1alpha1.ExposureNodePort).ForNamespaces(sandbox.TenantLabels).RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	other := wrappers.MakeClaimTemplate("admins-only-"+ns).Source(repo.URL, "main", "apps/code-server/base").
		ForNamespaces(sandbox.TenantLabels).RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	other.Spec.Access.Groups = []string{"platform-admins"}
	for _, o := range []*v1alpha1.ClaimTemplate{tpl, other} {
		create(t, o)
		t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), o) })
	}
	kc := tenant(t, ns, tpl.Name)
	// A Claim delivered by Flux, made beforehand, for the page's delivery
	// column.
	deployer(t, ns)
	delivered := wrappers.MakeClaim("delivered", ns, tpl.Name).Values(`{"replicas":1}`).Exposure(v1alpha1.ExposureClusterIP).Target(v1alpha1.Target{PlainHTTP: true}).Obj()
	delivered.Spec.Delivery = &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer", Wait: ptr.To(false)}}
	create(t, delivered)
	art := newArtifact(ns, "tiny-model", "packline/tiny-model").Obj()
	create(t, art)
	waitReady(t, art, art.GetPipelineStatus)
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, client.ObjectKey{Name: tpl.Name}, tpl)).To(Succeed())
		g.Expect(templateReady(tpl.Status.Conditions)).To(BeTrue(), "%+v", tpl.Status.Conditions)
	}).Should(Succeed(), "the template's check render makes it Ready")

	url := startUI(t, kc, ns)
	shots := os.Getenv("PACKLINE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.WindowSize(1180, 860), chromedp.DisableGPU,
		// Tests talk to loopback only: every host name but the page's
		// address resolves to nothing, and no proxy is tried.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("no-proxy-server", true))
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its sandbox (CI runs as root).
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 5*time.Minute)
	defer cancelTimeout()

	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// text reads what the page shows at a CSS selector ("" when absent).
	text := func(sel string) string {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`)||{}).textContent||""`))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	attr := func(sel, name string) string {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`)||{getAttribute(){return ""}}).getAttribute(`+jsString(name)+`)||""`))
		if err != nil {
			t.Fatalf("reading %s[%s]: %v", sel, name, err)
		}
		return s
	}
	shot := func(name string) {
		t.Helper()
		b, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// typeInto replaces an input's text by typing, as a user does, so the
	// page's input events fire.
	typeInto := func(sel, s string) {
		t.Helper()
		do("typing into "+sel, chromedp.Evaluate[chromedp.Void](`document.querySelector(`+jsString(sel)+`).value = ""`), chromedp.SendKeys(chromedp.CSS(sel), s))
	}
	browserStart := time.Now()

	// The catalogue: her template's card; the other one only under "may
	// not claim", with the reason.
	card := `.card[data-template="` + tpl.Name + `"]`
	do("opening the page", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(card)))
	g.Expect(text("#user")).To(Equal("alice-" + ns))
	g.Expect(text(card)).To(ContainSubstring("replicas:integer*"))
	g.Expect(text(card)).To(ContainSubstring("ClusterIP, NodePort"))
	g.Expect(text(`.card[data-template="` + other.Name + `"]`)).To(BeEmpty())
	g.Expect(text(`#unclaimable-list [data-template="` + other.Name + `"]`)).To(ContainSubstring("spec.access.groups (platform-admins)"))
	// Her Artifact, listed with its digest.
	waitFor(t, func(g Gomega) {
		g.Expect(attr(`tr[data-artifact="tiny-model"]`, "data-ready")).To(Equal("True"))
		g.Expect(text(`tr[data-artifact="tiny-model"] .reference`)).To(Equal(art.Status.Reference))
	}).Should(Succeed())

	// status.progress, whatever fields it has, renders as a bar, the
	// bytes and the rate (the same function renders every row's progress).
	progress, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => { const n = progressNode({bytesDone: 512, bytesTotal: 2048, bytesPerSecond: 256, files: 3});
		const p = n.querySelector("progress"); return [n.textContent.trim(), p ? p.value + "/" + p.max : ""]; })()`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(progress).To(Equal([]string{"512 B / 2.0 KiB · 256 B/s · files: 3", "512/2048"}))

	// The form, from the schema; errors appear inline, each naming its field.
	do("picking the template", chromedp.Click(chromedp.CSS(card)), chromedp.WaitVisible(chromedp.CSS(`#v-replicas`)))
	typeInto("#f-name", "Web_1")
	typeInto("#v-replicas", "two")
	replicasError := `.field-error[data-for="spec.values.replicas"]`
	waitFor(t, func(g Gomega) {
		g.Expect(text(replicasError)).To(Equal(`spec.values.replicas: "two" is not an integer`))
		g.Expect(text(`.field-error[data-for="metadata.name"]`)).To(ContainSubstring("metadata.name: a lowercase RFC 1123 subdomain"))
	}).Should(Succeed())
	typeInto("#v-replicas", "9")
	waitFor(t, func(g Gomega) {
		g.Expect(text(replicasError)).To(Equal("spec.values.replicas: maximum: got 9, want 3"))
	}).Should(Succeed())
	g.Expect(attr("#v-replicas", "class")).To(ContainSubstring("invalid"))
	shot("ui-validation.png")
	typeInto("#f-name", "web")
	typeInto("#v-replicas", "2")
	do("choosing plain HTTP for the sandbox's registry", chromedp.Click(chromedp.CSS(`#claim-form details summary`)), chromedp.Click(chromedp.CSS(`#f-plain-http`)))
	waitFor(t, func(g Gomega) {
		g.Expect(attr("#claim-form", "data-valid")).To(Equal("true"))
		g.Expect(text(replicasError)).To(BeEmpty())
		g.Expect(text("#form-errors")).To(BeEmpty())
	}).Should(Succeed())

	// The preview is the worker's render, made here: the value landed.
	do("previewing", chromedp.Click(chromedp.CSS(`#preview-button`)))
	waitFor(t, func(g Gomega) {
		g.Expect(text("#preview")).To(ContainSubstring("# deployment.apps_code-server.yaml"))
	}).Should(Succeed())
	g.Expect(text("#preview")).To(ContainSubstring("replicas: 2"))
	g.Expect(text("#preview")).To(ContainSubstring("namespace: " + ns))
	g.Expect(text("#preview-header")).To(ContainSubstring(repo.Commits[0]))
	do("scrolling to the preview", chromedp.ScrollIntoView(chromedp.CSS("#preview-box")))
	shot("ui-preview.png")

	// Create: the Claim is hers (the webhook recorded her as requester),
	// and the page shows it becoming Ready, with what it pushed.
	do("creating", chromedp.Click(chromedp.CSS(`#create-button`)))
	waitFor(t, func(g Gomega) {
		g.Expect(text("#form-state")).To(Equal("Created Claim web: its status is below."))
	}).Should(Succeed(), "%s", text("#form-errors"))
	c := &v1alpha1.Claim{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	waitReady(t, c, c.GetPipelineStatus)
	g.Expect(c.Annotations[v1alpha1.AnnotationRequester]).To(ContainSubstring(`"username":"alice-` + ns + `"`))
	g.Expect(string(c.Spec.Values.Raw)).To(Equal(`{"replicas":2}`))
	row := `tr[data-claim="web"]`
	waitFor(t, func(g Gomega) {
		g.Expect(attr(row, "data-ready")).To(Equal("True"))
		g.Expect(text(row + " .phase")).To(Equal("Succeeded"))
		g.Expect(text(row + " .reference")).To(Equal(c.Status.Reference))
	}).Should(Succeed())
	// The delivered Claim's row shows Flux's objects, read as her.
	waitFor(t, func(g Gomega) {
		d := text(`tr[data-claim="delivered"] .delivery`)
		g.Expect(d).To(MatchRegexp(`OCIRepository \S+: Ready=True`))
		g.Expect(d).To(MatchRegexp(`Kustomization \S+: Ready=True`))
	}).Should(Succeed())
	do("scrolling to the status", chromedp.ScrollIntoView(chromedp.CSS("#claims-section")))
	shot("ui-ready.png")

	// A second Create of the same name is refused by the API server, and
	// the page says so.
	do("creating again", chromedp.Click(chromedp.CSS(`#create-button`)))
	waitFor(t, func(g Gomega) {
		g.Expect(text("#form-errors")).To(ContainSubstring(`"web" already exists`))
	}).Should(Succeed())
	t.Logf("browser test: %s in the browser, %s in all (sandbox objects included)", time.Since(browserStart).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

func templateReady(conds []metav1.Condition) bool {
	for _, c := range conds {
		if c.Type == v1alpha1.ConditionReady {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
