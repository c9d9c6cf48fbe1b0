// Package realnode runs packline on the sandbox's real node (test/sandbox,
// Options.Node = NodeReal): pods are containers that a kubelet starts
// through containerd and runc, scheduled by kube-scheduler, on a CNI bridge,
// running the worker image built as `make images` builds it. The tests run
// only with PACKLINE_REAL_NODE=1, as root, and with the node's binaries
// built (`make test-node` does all three); otherwise they skip and say why.
package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/wrappers"
)

var (
	sb *sandbox.Sandbox
	// skip is why the tests do not run here, when they do not.
	skip string
	// opts started sb; the side-by-side measurement starts a process-node
	// sandbox from the same binaries.
	opts sandbox.Options
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// gate says why the real node cannot run here, or "".
func gate() string {
	if os.Getenv("PACKLINE_REAL_NODE") != "1" {
		return "PACKLINE_REAL_NODE=1 is not set (make test-node sets it)"
	}
	if os.Geteuid() != 0 {
		return "the real node needs root (network namespaces, mounts, cgroups)"
	}
	for _, env := range []string{"PACKLINE_KUBE_NODE_DIR", "PACKLINE_CONTAINERD_DIR", "PACKLINE_CNI_DIR", "PACKLINE_RUNC_BIN"} {
		if os.Getenv(env) == "" {
			return env + " is not set: run make node-assets, or make test-node"
		}
	}
	return ""
}

func run(m *testing.M) int {
	if skip = gate(); skip != "" {
		return m.Run()
	}
	ctrllog.SetLogger(logr.Discard())
	bin, err := os.MkdirTemp("", "packline-realnode-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	opts = sandbox.Options{
		Node:        sandbox.NodeReal,
		ManagerArgs: []string{"--backoff-base=1s", "--backoff-cap=2s", "--worker-tmp-size=" + workerTmpSize},
	}
	if opts.Dir, err = os.MkdirTemp("", "packline-realnode-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := sandbox.Defaults(&opts, bin); err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	o := opts
	o.Progress = os.Stderr
	start := time.Now()
	sb, err = sandbox.Start(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode: starting the sandbox:", err, "; logs in", filepath.Join(o.Dir, "logs"))
		return 1
	}
	fmt.Fprintf(os.Stderr, "realnode: sandbox with a real node up in %s (worker image %s)\n", time.Since(start).Round(time.Millisecond), sb.WorkerImage())
	code := m.Run()
	sb.Stop()
	if code == 0 {
		_ = os.RemoveAll(o.Dir)
	} else {
		fmt.Fprintln(os.Stderr, "realnode: sandbox logs kept in", sb.Logs())
	}
	return code
}

func requireNode(t testing.TB) {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
}

var nsCount atomic.Int32

// newNamespace returns a fresh tenant namespace; labels are added to it
// (pod security, for one).
func newNamespace(t testing.TB, s *sandbox.Sandbox, labels map[string]string) string {
	t.Helper()
	l := map[string]string{}
	for k, v := range sandbox.TenantLabels {
		l[k] = v
	}
	for k, v := range labels {
		l[k] = v
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("rn-%d-%d", time.Now().Unix()%100000, nsCount.Add(1)), Labels: l,
	}}
	if err := s.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newArtifact imports the fixture hub's tiny model into s's registry.
func newArtifact(s *sandbox.Sandbox, ns, name string) *wrappers.ArtifactWrapper {
	return wrappers.MakeArtifact(name, ns).HF("packline/tiny-model").HFEndpoint(s.HF.URL).
		Repository(s.Registry.Host + "/realnode/" + ns + "/" + name).PlainHTTP()
}

func waitFor(t testing.TB, f any) AsyncAssertion {
	return NewWithT(t).Eventually(f).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond)
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

// waitReady waits for a's Ready condition for its current generation.
func waitReady(t testing.TB, s *sandbox.Sandbox, a *v1alpha1.Artifact) {
	t.Helper()
	waitFor(t, func(g Gomega) {
		g.Expect(s.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		st := &a.Status
		g.Expect(isTrue(st, "Stalled")).To(BeFalse(), "stalled: %+v", condition(st, "Stalled"))
		g.Expect(st.ObservedGeneration).To(Equal(a.Generation))
		g.Expect(isTrue(st, "Ready")).To(BeTrue(), "phase %s, conditions %+v", st.Phase, st.Conditions)
	}).Should(Succeed(), "logs in %s", s.Logs())
}
