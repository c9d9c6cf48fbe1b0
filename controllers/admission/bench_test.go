package admission_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/wrappers"
)

// benchOff labels the namespace whose creates skip the webhooks.
const benchOff = "packline.dev/bench-no-webhooks"

// BenchmarkClaimCreateLatency measures what the webhooks add to a Claim
// create. An entitled user creates 200 Claims through the mutating and
// validating webhooks (a seal, the template rules and the
// SubjectAccessReviews), interleaved one for one with 200 creates in a
// namespace the webhook configurations exclude, on the same API server in
// the same run, so both see the same load. It reports p50 and p99 of each
// and their ratios (target: at most 1.5).
func BenchmarkClaimCreateLatency(b *testing.B) {
	const n, warm = 200, 20
	startWebhooks(b)
	g := NewWithT(b)
	ctx := context.Background()
	on, off := tenantNamespace(b), tenantNamespace(b)
	excludeFromWebhooks(b, g, off)
	tpl := wrappers.MakeClaimTemplate("bench-" + on).ForNamespaces(tenantLabels).Obj()
	createTemplate(b, tpl)
	entitled(b, on, "alice", tpl.Name)
	entitled(b, off, "alice", tpl.Name)
	alice := as(b, "alice")

	create := func(ns string, i int) (time.Duration, *v1alpha1.Claim) {
		c := wrappers.MakeClaim(fmt.Sprintf("c-%d", i), ns, tpl.Name).Values(`{"replicas":1}`).Obj()
		start := time.Now()
		g.Expect(alice.Create(ctx, c)).To(Succeed())
		return time.Since(start), c
	}
	// The API server sees configuration changes through an informer.
	probe := 0
	g.Eventually(func() string {
		probe++
		_, c := create(off, -probe)
		return c.Annotations[v1alpha1.AnnotationRequester]
	}, 30*time.Second, 100*time.Millisecond).Should(BeEmpty())

	for b.Loop() {
		var with, without []time.Duration
		for i := range n + warm {
			dOn, c := create(on, i)
			g.Expect(c.Annotations).To(HaveKey(v1alpha1.AnnotationRequester))
			dOff, _ := create(off, i)
			if i >= warm {
				with, without = append(with, dOn), append(without, dOff)
			}
		}
		slices.Sort(with)
		slices.Sort(without)
		p := func(d []time.Duration, q float64) time.Duration { return d[int(q*float64(len(d)-1))] }
		ratio50 := float64(p(with, 0.5)) / float64(p(without, 0.5))
		ratio99 := float64(p(with, 0.99)) / float64(p(without, 0.99))
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(p(with, 0.5)), "ms-p50-webhooks")
		b.ReportMetric(ms(p(with, 0.99)), "ms-p99-webhooks")
		b.ReportMetric(ms(p(without, 0.5)), "ms-p50-no-webhooks")
		b.ReportMetric(ms(p(without, 0.99)), "ms-p99-no-webhooks")
		b.ReportMetric(ratio50, "ratio-p50")
		b.ReportMetric(ratio99, "ratio-p99")
		b.Logf("Claim create, %d each, interleaved: with webhooks p50 %s p99 %s; without p50 %s p99 %s; ratio p50 %.2f, p99 %.2f (target <= 1.5)",
			n, p(with, 0.5), p(with, 0.99), p(without, 0.5), p(without, 0.99), ratio50, ratio99)
	}
}

// excludeFromWebhooks labels ns and narrows every installed webhook to
// namespaces without that label, restoring the configurations afterwards.
func excludeFromWebhooks(b *testing.B, g Gomega, ns string) {
	ctx := context.Background()
	nsObj := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
	nsObj.Labels[benchOff] = "true"
	g.Expect(env.Client.Update(ctx, nsObj)).To(Succeed())
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: benchOff, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	var m admissionregistrationv1.MutatingWebhookConfigurationList
	var v admissionregistrationv1.ValidatingWebhookConfigurationList
	g.Expect(env.Client.List(ctx, &m)).To(Succeed())
	g.Expect(env.Client.List(ctx, &v)).To(Succeed())
	for i := range m.Items {
		orig := m.Items[i].DeepCopy()
		for j := range m.Items[i].Webhooks {
			m.Items[i].Webhooks[j].NamespaceSelector = sel
		}
		g.Expect(env.Client.Update(ctx, &m.Items[i])).To(Succeed())
		b.Cleanup(func() { restore(ctx, orig) })
	}
	for i := range v.Items {
		orig := v.Items[i].DeepCopy()
		for j := range v.Items[i].Webhooks {
			v.Items[i].Webhooks[j].NamespaceSelector = sel
		}
		g.Expect(env.Client.Update(ctx, &v.Items[i])).To(Succeed())
		b.Cleanup(func() { restore(ctx, orig) })
	}
}

// restore puts a webhook configuration back as it was.
func restore(ctx context.Context, orig client.Object) {
	cur := orig.DeepCopyObject().(client.Object)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(orig), cur); err == nil {
		orig.SetResourceVersion(cur.GetResourceVersion())
		_ = env.Client.Update(ctx, orig)
	}
}
