// Package kueue runs packline's queueing on the sandbox with real Kueue
// (v0.17, test/tools/kueue.sh): Kueue's manager admits the Jobs packline
// creates suspended, through its own webhooks and ClusterQueue quota.
//
// It has its own sandbox, apart from test/e2e's: Kueue's Job webhook sits
// in front of every Job the API server admits, which the rest of the e2e
// suite should not depend on.
package kueue

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/hfserver"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/sandbox/procnode"
	"github.com/packline/packline/test/wrappers"
)

var sb *sandbox.Sandbox

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	bin, err := os.MkdirTemp("", "packline-kueue-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	o := sandbox.Options{ManagerArgs: []string{"--backoff-base=1s", "--backoff-cap=2s", "--template-namespace=" + sandbox.ManagerNamespace}}
	if testing.Verbose() {
		o.Progress = os.Stderr
	}
	if o.Dir, err = os.MkdirTemp("", "packline-kueue-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := sandbox.Defaults(&o, bin); err != nil {
		fmt.Fprintln(os.Stderr, "kueue e2e:", err)
		return 1
	}
	if o.KueueDir, err = sandbox.KueueDefault(o.RepoRoot); err != nil {
		fmt.Fprintln(os.Stderr, "kueue e2e:", err)
		return 1
	}
	trivial, err := trivialWorker(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kueue e2e:", err)
		return 1
	}
	o.Images = map[string]procnode.Image{trivialImage: trivial}
	if sb, err = sandbox.Start(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "kueue e2e: starting the sandbox:", err, "(logs in", o.Dir+"/logs)")
		return 1
	}
	sb.HF.Set("packline/tiny-model", hfserver.TinyModel())
	code := m.Run()
	sb.Stop()
	if code == 0 {
		_ = os.RemoveAll(o.Dir)
	} else {
		fmt.Fprintln(os.Stderr, "kueue e2e: sandbox logs kept in", sb.Logs())
	}
	return code
}

var nsCount atomic.Int32

func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("kq-%d-%d", time.Now().Unix()%100000, nsCount.Add(1)),
		Labels: sandbox.TenantLabels,
	}}
	if err := sb.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func newArtifact(ns, name, queue string) *wrappers.ArtifactWrapper {
	return wrappers.MakeArtifact(name, ns).HF("packline/tiny-model").HFEndpoint(sb.HF.URL).
		Repository(sb.Registry.Host + "/kueue/" + ns + "/" + name).PlainHTTP().Queue(queue)
}

func create(t testing.TB, o client.Object) {
	t.Helper()
	if err := sb.Client.Create(context.Background(), o); err != nil {
		t.Fatalf("create %s: %v", o.GetName(), err)
	}
}

// apply server-side-applies Kueue objects written as YAML.
func apply(t testing.TB, docs ...string) {
	t.Helper()
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := sb.Apply(context.Background(), u); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
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
