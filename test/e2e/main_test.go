// Package e2e runs packline on the sandbox (test/sandbox): a real
// kube-apiserver and kube-controller-manager, the manager binary, the worker
// binary run by the process node, and a real registry. Nothing here writes a
// Job or pod status by hand. The tests share one sandbox and run one after
// another, because some of them stop the registry or the manager.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"github.com/go-logr/logr"
	"os"
	"path/filepath"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/hfserver"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/sandbox/procnode"
	"github.com/packline/packline/test/wrappers"
)

var (
	sb *sandbox.Sandbox
	// registryBin starts extra registries (with auth) in tests.
	registryBin string
	// workerBin is the worker the process node runs, also run directly by
	// the overhead benchmark.
	workerBin string
)

// shellImage runs /bin/sh on the process node, for tests of the node itself.
const shellImage = "packline.local/shell:e2e"

// vllmImage is the vllm-server fixture's image: the node runs /bin/true for
// it, since what a test checks is the model its image volume mounts.
const vllmImage = "docker.io/vllm/vllm-openai:v0.6.4"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	// The harness's controller-runtime clients log nothing worth showing;
	// components log to files under the sandbox dir.
	ctrllog.SetLogger(logr.Discard())
	bin, err := os.MkdirTemp("", "packline-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	o := sandbox.Options{
		// Short backoffs so that retries happen within a test.
		ManagerArgs: []string{"--backoff-base=1s", "--backoff-cap=2s", "--template-namespace=" + sandbox.ManagerNamespace},
		Images: map[string]procnode.Image{vllmImage: {Binary: "/bin/true"}, shellImage: {
			Binary: "/bin/sh",
			PathEnv: map[string]string{
				corev1.TerminationMessagePathDefault: "TERM_LOG",
				"/etc/app":                           "APP_DIR",
				"/scratch":                           "SCRATCH",
			},
		}},
	}
	if testing.Verbose() {
		o.Progress = os.Stderr
	}
	// The sandbox's folder (logs of every component and pod) is kept when
	// a test fails, and its path printed.
	if o.Dir, err = os.MkdirTemp("", "packline-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := sandbox.Defaults(&o, bin); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	registryBin, workerBin = o.RegistryBin, o.WorkerBin
	sb, err = sandbox.Start(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the sandbox:", err)
		return 1
	}
	sb.HF.Set("packline/tiny-model", hfserver.TinyModel())
	code := m.Run()
	sb.Stop()
	if code == 0 {
		_ = os.RemoveAll(o.Dir)
	} else {
		fmt.Fprintln(os.Stderr, "e2e: sandbox logs kept in", sb.Logs())
	}
	return code
}

var nsCount atomic.Int32

// newNamespace returns a fresh tenant namespace for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("e2e-%d-%d", time.Now().Unix()%100000, nsCount.Add(1)),
		Labels: sandbox.TenantLabels,
	}}
	if err := sb.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newArtifact imports repo from the fixture hub into the sandbox registry.
func newArtifact(ns, name, repo string) *wrappers.ArtifactWrapper {
	return wrappers.MakeArtifact(name, ns).HF(repo).HFEndpoint(sb.HF.URL).
		Repository(sb.Registry.Host + "/e2e/" + ns + "/" + name).PlainHTTP()
}

func create(t testing.TB, o client.Object) {
	t.Helper()
	if err := sb.Client.Create(context.Background(), o); err != nil {
		t.Fatalf("create %s: %v", o.GetName(), err)
	}
}

// waitFor is Eventually with the e2e deadline: runs go through the real Job
// controller and a real worker, so allow for a loaded CI machine.
func waitFor(t testing.TB, f any) AsyncAssertion {
	return NewWithT(t).Eventually(f).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond)
}

func condition(st *v1alpha1.PipelineStatus, typ string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

func isTrue(st *v1alpha1.PipelineStatus, typ string) bool {
	c := condition(st, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

// waitReady waits for obj's Ready condition for its current generation.
func waitReady(t testing.TB, obj client.Object, status func() *v1alpha1.PipelineStatus) {
	t.Helper()
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		st := status()
		g.Expect(isTrue(st, "Stalled")).To(BeFalse(), "stalled: %+v", condition(st, "Stalled"))
		g.Expect(st.ObservedGeneration).To(Equal(obj.GetGeneration()))
		g.Expect(isTrue(st, "Ready")).To(BeTrue(), "phase %s, conditions %+v", st.Phase, st.Conditions)
	}).Should(Succeed(), "logs in %s", logsHint())
}

func logsHint() string { return filepath.Clean(sb.Logs()) }
