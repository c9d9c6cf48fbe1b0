package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/hfserver"
)

// An import in flight shows bytes done, bytes total and rate in
// status.progress and in the Progress column of `kubectl get`. The worker
// has no API token: the manager reads its log's last progress line through
// pods/log, which the API server proxies to the node (the process node
// serves it as a kubelet does). A change shows within 15 s.
func TestImportShowsProgress(t *testing.T) {
	const size = 12 << 20
	files := map[string][]byte{
		"config.json":       []byte(`{"architectures":["SlowForCausalLM"]}` + "\n"),
		"model.safetensors": bytes.Repeat([]byte{0x5a}, size),
	}
	sb.HF.Set("packline/slow-model", hfserver.Repo{Files: files})
	restore := sb.HF.Throttle(256 << 10) // about 48 s for the weights
	defer restore()
	ns := newNamespace(t)
	a := newArtifact(ns, "slow", "packline/slow-model").Obj()
	create(t, a)
	key := client.ObjectKeyFromObject(a)
	ctx := context.Background()

	var first v1alpha1.RunProgress
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, key, a)).To(Succeed())
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseRunning))
		p := a.Status.Progress
		g.Expect(p).NotTo(BeNil())
		g.Expect(p.BytesDone).To(BeNumerically(">", 0))
		first = *p
	}).Should(Succeed(), "logs in %s", logsHint())
	g := NewWithT(t)
	g.Expect(first.Step).To(Equal(v1alpha1.StepDownload))
	g.Expect(first.BytesTotal).To(Equal(int64(size + len(files["config.json"]))))
	g.Expect(first.BytesDone).To(BeNumerically("<", first.BytesTotal))
	g.Expect(first.BytesPerSecond).To(BeNumerically(">", 0))
	g.Expect(first.Summary).To(MatchRegexp(`^[0-9.]+ [KM]iB/12 MiB \([0-9.]+ [KM]?i?B/s\)$`))

	// The next read is due 10 s after the last, and the worker prints
	// every 5 s: a change within 15 s.
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, key, a)).To(Succeed())
		g.Expect(a.Status.Progress).NotTo(BeNil())
		g.Expect(a.Status.Progress.BytesDone).To(BeNumerically(">", first.BytesDone))
		g.Expect(a.Status.Progress.ObservedAt.Time).To(BeTemporally(">", first.ObservedAt.Time))
	}).WithTimeout(15*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "status.progress did not change within 15 s")

	// kubectl get prints the CRD's printer columns, which the API server
	// serves as a Table.
	raw, err := sb.Kube.CoreV1().RESTClient().Get().
		AbsPath("/apis/packline.dev/v1alpha1/namespaces", ns, "artifacts", a.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var table metav1.Table
	g.Expect(json.Unmarshal(raw, &table)).To(Succeed())
	col := -1
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Progress" {
			col = i
		}
	}
	g.Expect(col).NotTo(Equal(-1), "no Progress column in %+v", table.ColumnDefinitions)
	g.Expect(table.Rows).To(HaveLen(1))
	g.Expect(table.Rows[0].Cells[col]).To(MatchRegexp(`^[0-9.]+ [KM]iB/12 MiB \(`))

	// Done: no progress left behind.
	restore()
	waitReady(t, a, func() *v1alpha1.PipelineStatus { return &a.Status })
	g.Expect(a.Status.Progress).To(BeNil())
}
