// Package multikueue runs packline across two clusters with real Kueue
// (v0.17) and MultiKueue: the sandbox's cluster is the management cluster
// (the manager runs there with --job-managed-by=kueue.x-k8s.io/multikueue),
// and a second control plane with its own process node and Kueue is the
// worker cluster (sandbox.Options.MultiKueue). The manifests are
// config/samples/multikueue, as docs/how-to/worker-clusters-multikueue.md
// shows them.
package multikueue

import (
	"context"
	"flag"
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
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/hfserver"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/wrappers"
)

var (
	sb      *sandbox.Sandbox
	regDir  string
	repoDir string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	bin, err := os.MkdirTemp("", "packline-multikueue-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	o := sandbox.Options{MultiKueue: true, ManagerArgs: []string{"--backoff-base=1s", "--backoff-cap=2s", "--template-namespace=" + sandbox.ManagerNamespace}}
	if testing.Verbose() {
		o.Progress = os.Stderr
	}
	if o.Dir, err = os.MkdirTemp("", "packline-multikueue-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := sandbox.Defaults(&o, bin); err != nil {
		fmt.Fprintln(os.Stderr, "multikueue e2e:", err)
		return 1
	}
	if o.KueueDir, err = sandbox.KueueDefault(o.RepoRoot); err != nil {
		fmt.Fprintln(os.Stderr, "multikueue e2e:", err)
		return 1
	}
	repoDir = o.RepoRoot
	regDir = filepath.Join(o.Dir, "registry", "storage")
	if sb, err = sandbox.Start(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "multikueue e2e: starting the sandbox:", err, "(logs in", o.Dir+"/logs)")
		return 1
	}
	sb.HF.Set("packline/tiny-model", hfserver.TinyModel())
	code := m.Run()
	sb.Stop()
	if code == 0 {
		_ = os.RemoveAll(o.Dir)
	} else {
		fmt.Fprintln(os.Stderr, "multikueue e2e: sandbox logs kept in", sb.Logs())
	}
	return code
}

var nsCount atomic.Int32

// newNamespace makes a tenant namespace on both clusters, with the
// LocalQueue of config/samples/multikueue/localqueue.yaml in each.
func newNamespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("mk-%d-%d", time.Now().Unix()%100000, nsCount.Add(1)),
		Labels: sandbox.TenantLabels,
	}}
	if err := sb.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := sb.Worker().Namespace(ctx, ns.Name); err != nil {
		t.Fatal(err)
	}
	lq := filepath.Join(repoDir, sandbox.MultiKueueSamples, "localqueue.yaml")
	for _, c := range []struct {
		name string
		err  error
	}{
		{"manager", sandbox.ApplyFile(ctx, sb.Client, lq, ns.Name)},
		{"worker", sandbox.ApplyFile(ctx, sb.Worker().Client, lq, ns.Name)},
	} {
		if c.err != nil {
			t.Fatalf("%s cluster: %v", c.name, c.err)
		}
	}
	return ns.Name
}

func newArtifact(ns, name string) *wrappers.ArtifactWrapper {
	return wrappers.MakeArtifact(name, ns).HF("packline/tiny-model").HFEndpoint(sb.HF.URL).
		Repository(sb.Registry.Host + "/multikueue/" + ns + "/" + name).PlainHTTP().Queue("packline")
}

func waitFor(t testing.TB, f any) AsyncAssertion {
	return NewWithT(t).Eventually(f).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond)
}

func ready(st *v1alpha1.PipelineStatus) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1alpha1.ConditionReady {
			return &st.Conditions[i]
		}
	}
	return nil
}
