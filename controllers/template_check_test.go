package controllers_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

// TestTemplateCheck: a published template is rendered once by a check Job
// in the template namespace (check: true, the schema's defaults, owned by
// the template). Its failure makes the template Ready=False with the
// worker's reason, and a Claim of it waits with TemplateNotReady instead of
// rendering; a fixed template (new generation) is checked again, becomes
// Ready with its commit and kinds, and the waiting Claim renders.
func TestTemplateCheck(t *testing.T) {
	tplNS := newNamespace(t)
	startManager(t, func(c *pipeline.Config) { c.TemplateCheck, c.TemplateNamespace = true, tplNS })
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate("checked-" + ns).Open().
		Schema(`{"type":"object","properties":{"replicas":{"type":"integer","maximum":3,"default":1}}}`).Obj()
	create(t, tpl)
	tplKey := client.ObjectKey{Name: tpl.Name}

	check := waitCheckJob(t, tplNS, tpl.Name, 1)
	g := NewWithT(t)
	g.Expect(check.OwnerReferences).To(ConsistOf(HaveField("Name", tpl.Name)), "the check Job is owned by its template")
	doc := checkDoc(g, check)
	g.Expect(doc.Check).To(BeTrue())
	g.Expect(string(doc.Values.Raw)).To(Equal(`{"replicas":1}`), "the schema's default")
	g.Expect(doc.Target.Repository).To(BeEmpty(), "a check pushes nothing")
	eventually(t, func(g Gomega) {
		g.Expect(templateReady(g, tplKey)).To(HaveField("Reason", controllers.ReasonChecking))
	})

	runJob(t, check, 1, `{"error":{"reason":"TemplateSourceNotFound","message":"path apps/code-server/base not found at main","permanent":true}}`)
	eventually(t, func(g Gomega) {
		c := templateReady(g, tplKey)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal("TemplateSourceNotFound"))
	})
	key := client.ObjectKey{Namespace: ns, Name: "waits"}
	create(t, wrappers.MakeClaim(key.Name, ns, tpl.Name).Obj())
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		ready := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(controllers.ReasonTemplateNotReady))
		g.Expect(ready.Message).To(ContainSubstring("path apps/code-server/base not found"))
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhasePending))
	})
	g.Expect(jobsOf(g, ns, key.Name)).To(BeEmpty(), "a Claim of a failed template rendered")

	// The admin fixes the path: a new generation, a new check.
	eventually(t, func(g Gomega) {
		cur := &v1alpha1.ClaimTemplate{}
		g.Expect(env.Client.Get(context.Background(), tplKey, cur)).To(Succeed())
		cur.Spec.Source.Path = "apps/code-server/overlays/base"
		g.Expect(env.Client.Update(context.Background(), cur)).To(Succeed())
	})
	check2 := waitCheckJob(t, tplNS, tpl.Name, 2)
	runJob(t, check2, 0, fmt.Sprintf(`{"check":true,"digest":%q,"size":100,"sourceRevision":"c0ffee","kinds":["Deployment.apps","Service"]}`, digest))
	eventually(t, func(g Gomega) {
		c := templateReady(g, tplKey)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("Deployment.apps, Service at commit c0ffee"))
		cur := &v1alpha1.ClaimTemplate{}
		g.Expect(env.Client.Get(context.Background(), tplKey, cur)).To(Succeed())
		g.Expect(cur.Status.Check).NotTo(BeNil())
		g.Expect(cur.Status.Check.ResolvedCommit).To(Equal("c0ffee"))
		g.Expect(cur.Status.Check.Kinds).To(Equal([]string{"Deployment.apps", "Service"}))
		g.Expect(cur.Status.Check.ObservedGeneration).To(Equal(cur.Generation))
	})
	waitJob(t, ns, key.Name, 1, 1) // the waiting Claim renders now
}

func waitCheckJob(t *testing.T, ns, tpl string, gen int64) *batchv1.Job {
	t.Helper()
	var found *batchv1.Job
	eventually(t, func(g Gomega) {
		var list batchv1.JobList
		g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns),
			client.MatchingLabels{pipeline.LabelOwnerKind: "ClaimTemplate", pipeline.LabelOwnerName: tpl,
				pipeline.LabelGeneration: fmt.Sprint(gen)})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		found = &list.Items[0]
	})
	return found
}

func checkDoc(g Gomega, job *batchv1.Job) workerv1.Claim {
	var doc workerv1.Claim
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == workerv1.EnvSpec {
			g.Expect(workerv1.DecodeSpec([]byte(e.Value), &doc)).To(Succeed())
		}
	}
	return doc
}

func templateReady(g Gomega, key client.ObjectKey) *metav1.Condition {
	tpl := &v1alpha1.ClaimTemplate{}
	g.Expect(env.Client.Get(context.Background(), key, tpl)).To(Succeed())
	c := apimeta.FindStatusCondition(tpl.Status.Conditions, v1alpha1.ConditionReady)
	g.Expect(c).NotTo(BeNil())
	return c
}

// TestTemplateCheckRetries: a check that fails for a retryable reason is
// tried again on the run's retry clock (Transition's backoff after the
// Job's failure), as a new attempt's Job of kind template-check, and the
// template is Ready once that attempt succeeds.
func TestTemplateCheckRetries(t *testing.T) {
	tplNS := newNamespace(t)
	startManager(t, func(c *pipeline.Config) { c.TemplateCheck, c.TemplateNamespace = true, tplNS })
	tpl := wrappers.MakeClaimTemplate("retried-" + tplNS).Open().Obj()
	create(t, tpl)
	tplKey := client.ObjectKey{Name: tpl.Name}

	first := waitCheckJob(t, tplNS, tpl.Name, 1)
	g := NewWithT(t)
	g.Expect(first.Labels).To(HaveKeyWithValue(pipeline.LabelJobKind, string(pipeline.JobTemplateCheck)))
	g.Expect(first.Labels).To(HaveKeyWithValue(pipeline.LabelAttempt, "1"))
	runJob(t, first, 1, `{"error":{"reason":"SourceFailed","message":"connection reset","permanent":false}}`)

	var second *batchv1.Job
	eventually(t, func(g Gomega) {
		var list batchv1.JobList
		g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(tplNS),
			client.MatchingLabels{pipeline.LabelOwnerName: tpl.Name, pipeline.LabelAttempt: "2"})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		second = &list.Items[0]
	})
	g.Expect(second.Labels).To(HaveKeyWithValue(pipeline.LabelJobKind, string(pipeline.JobTemplateCheck)))
	g.Expect(templateReady(g, tplKey).Status).NotTo(Equal(metav1.ConditionFalse), "a retryable failure failed the template")

	runJob(t, second, 0, fmt.Sprintf(`{"check":true,"digest":%q,"size":100,"sourceRevision":"c0ffee","kinds":["Service"]}`, digest))
	eventually(t, func(g Gomega) {
		c := templateReady(g, tplKey)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("Service at commit c0ffee"))
	})
}
