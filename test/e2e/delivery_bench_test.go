package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
)

// BenchmarkClaimToDelivered measures what packline adds between a Claim's
// apply and Flux having applied it, beyond the render Job itself and the
// Flux reconcile itself. The Flux part is measured in the same run as a
// hand-written OCIRepository and Kustomization for the same digest in a
// fresh namespace (what a user would otherwise write), and the render by
// its Job's own start and completion times.
//
//	overhead = (apply → Delivered) − render Job − hand-written Flux apply
func BenchmarkClaimToDelivered(b *testing.B) {
	const runs = 3
	repo := gitserver.Serve(b, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(b, "templates")}}}, gitserver.Options{})
	tpl := &v1alpha1.ClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-delivery-%d", time.Now().UnixNano()%100000)},
		Spec: v1alpha1.ClaimTemplateSpec{
			Source:           v1alpha1.TemplateSource{URL: repo.URL, Ref: "main", Path: "apps/code-server/base"},
			Kinds:            []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}},
			Service:          "code-server",
			ValuesSchema:     &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)},
			Access:           v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sandbox.TenantLabels}},
			RepositoryPrefix: sb.Registry.Host + "/claims",
		},
	}
	create(b, tpl)
	b.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	var total, render, flux []time.Duration
	for range b.N {
		for range runs {
			ns := deployerNamespace(b)
			c := &v1alpha1.Claim{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
				Spec: v1alpha1.ClaimSpec{TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name}, Target: &v1alpha1.Target{PlainHTTP: true},
					Delivery: &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer", Wait: ptr.To(false)}}},
			}
			start := time.Now()
			create(b, c)
			pollFast(b, func() bool {
				return sb.Client.Get(context.Background(), client.ObjectKeyFromObject(c), c) == nil && isTrue(&c.Status.PipelineStatus, "Ready")
			})
			total = append(total, time.Since(start))
			render = append(render, renderJobTime(b, ns, c.Name))

			// The same digest, by hand, in a fresh namespace.
			hand := deployerNamespace(b)
			plan := delivery.NewPlan(c, &v1alpha1.FluxDelivery{ServiceAccountName: "deployer", Wait: ptr.To(false)}, false)
			plan.Namespace = hand
			start = time.Now()
			create(b, delivery.OCIRepository(plan))
			ks := delivery.Kustomization(plan)
			create(b, ks)
			pollFast(b, func() bool {
				if sb.Client.Get(context.Background(), client.ObjectKeyFromObject(ks), ks) != nil {
					return false
				}
				r := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
				return r != nil && r.Status == metav1.ConditionTrue && ks.Status.LastAppliedRevision != ""
			})
			flux = append(flux, time.Since(start))
		}
	}
	t, r, f := median(total), median(render), median(flux)
	b.ReportMetric(ms(t), "apply-to-delivered-ms")
	b.ReportMetric(ms(r), "render-job-ms")
	b.ReportMetric(ms(f), "handwritten-flux-ms")
	b.ReportMetric(ms(t-r-f), "overhead-ms")
	b.ReportMetric(float64(t)/float64(r+f), "ratio")
}

// deployerNamespace is a tenant namespace with a deployer ServiceAccount.
func deployerNamespace(b testing.TB) string {
	ns := newNamespace(b)
	deployer(b, ns)
	return ns
}

// pollFast polls ok every 10 ms for up to two minutes.
func pollFast(b testing.TB, ok func() bool) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		if ok() {
			return
		}
	}
	b.Fatalf("not done within 2 minutes (logs in %s)", logsHint())
}

// renderJobTime is the render Job's own run time, from its status.
func renderJobTime(b testing.TB, ns, owner string) time.Duration {
	var jobs batchv1.JobList
	if err := sb.Client.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{pipeline.LabelOwnerName: owner}); err != nil {
		b.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.Status.StartTime != nil && j.Status.CompletionTime != nil {
			return j.Status.CompletionTime.Sub(j.Status.StartTime.Time)
		}
	}
	b.Fatalf("no finished render Job for %s/%s", ns, owner)
	return 0
}
