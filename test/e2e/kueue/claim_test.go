package kueue

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/wrappers"
)

// A Claim with spec.queueName renders through the queue: its Job carries
// the queue label and Kueue admits it through a Workload of its own.
func TestKueueClaimRender(t *testing.T) {
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	queues(t, ns, 1, false)
	tpl := wrappers.MakeClaimTemplate("code-server-"+ns).Source(repo.URL, "main", "apps/code-server/base").Service("code-server").
		Schema(`{"type":"object","additionalProperties":false,"properties":{"replicas":{"type":"integer","minimum":1,"maximum":3}}}`).
		Exposures(v1alpha1.ExposureClusterIP).ForNamespaces(sandbox.TenantLabels).RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	c := wrappers.MakeClaim("queued-render", ns, tpl.Name).Values(`{"replicas":2}`).Exposure(v1alpha1.ExposureClusterIP).
		Target(v1alpha1.Target{PlainHTTP: true}).Obj()
	c.Spec.QueueName = "packline"
	create(t, c)
	waitFor(t, func(g Gomega) {
		cur := &v1alpha1.Claim{}
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(c), cur)).To(Succeed())
		r := ready(cur.GetPipelineStatus())
		g.Expect(r).NotTo(BeNil())
		g.Expect(string(r.Status)).To(Equal("True"), "%s %s: %s", cur.GetPipelineStatus().Phase, r.Reason, r.Message)
	}).Should(Succeed(), "logs in %s", sb.Logs())

	var jobs batchv1.JobList
	if err := sb.Client.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{pipeline.LabelOwnerName: c.Name}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("%d render Jobs, want 1", len(jobs.Items))
	}
	job := jobs.Items[0]
	if q := job.Labels[pipeline.QueueLabel]; q != "packline" {
		t.Errorf("render Job %s: %s=%q, want packline", job.Name, pipeline.QueueLabel, q)
	}
	waitFor(t, func(g Gomega) {
		var mine *unstructured.Unstructured
		for _, wl := range workloads(g, ns) {
			for _, ref := range wl.GetOwnerReferences() {
				if ref.UID == job.UID {
					mine = wl.DeepCopy()
				}
			}
		}
		g.Expect(mine).NotTo(BeNil(), "a Workload owned by the render Job")
		conds, _, _ := unstructured.NestedSlice(mine.Object, "status", "conditions")
		admitted := false
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "Admitted" && m["status"] == "True" || m["type"] == "Finished" && m["status"] == "True" {
				admitted = true
			}
		}
		g.Expect(admitted).To(BeTrue(), "Workload %s conditions %v", mine.GetName(), conds)
	}).Should(Succeed())
}
