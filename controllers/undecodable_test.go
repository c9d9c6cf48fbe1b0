package controllers_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/internal/undecodable"
	"github.com/packline/packline/test/wrappers"
)

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// storeUnvalidated writes obj although the CRD now refuses it, the way an
// object written under an older CRD is stored: the field's CEL rules are
// taken off the CRD, obj is created, and the CRD is put back.
func storeUnvalidated(t *testing.T, crdName string, field []string, obj *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	original := crd.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v0 := versions[0].(map[string]any)
	path := []string{"schema", "openAPIV3Schema"}
	for _, f := range field {
		path = append(path, "properties", f)
	}
	if _, found, _ := unstructured.NestedMap(v0, path...); !found {
		t.Fatalf("no schema at %v", path)
	}
	unstructured.RemoveNestedField(v0, append(path, "x-kubernetes-validations")...)
	versions[0] = v0
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	restore := func(g Gomega) {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(crdGVK)
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: crdName}, cur)).To(Succeed())
		spec, _, _ := unstructured.NestedMap(original.Object, "spec")
		g.Expect(unstructured.SetNestedMap(cur.Object, spec, "spec")).To(Succeed())
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}
	// The apiserver takes the new schema in asynchronously.
	eventually(t, func(g Gomega) { g.Expect(env.Client.Create(ctx, obj.DeepCopy())).To(Succeed()) })
	eventually(t, restore)
	// And the rule is back: the same object is refused again.
	probe := obj.DeepCopy()
	probe.SetName(obj.GetName() + "-probe")
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Create(ctx, probe, client.DryRunAll)).NotTo(Succeed())
	})
}

// One stored EnvironmentProfile that does not decode (`interval: soon`,
// written before the CRD refused it) used to stop the profile informer:
// the manager never synced its cache and exited after two minutes. Now the
// manager starts and serves the other profiles and Claims; the bad profile
// gets an event and Ready=False naming the field, and the Claims it selects
// wait instead of rendering without it, until it is fixed.
func TestManagerSurvivesAnUndecodableProfile(t *testing.T) {
	ctx := context.Background()
	ns, selected := newNamespace(t), newNamespace(t)
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "packline.dev/v1alpha1", "kind": "EnvironmentProfile",
		"metadata": map[string]any{"name": selected + "-soon"},
		"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": selected}},
			"delivery":          map[string]any{"flux": map[string]any{"interval": "soon"}},
		},
	}}
	storeUnvalidated(t, "environmentprofiles.packline.dev", []string{"spec", "delivery", "flux", "interval"}, bad)
	t.Cleanup(func() { _ = env.Client.Delete(ctx, bad) })
	// The typed client cannot read it: this is what broke the informer.
	if err := env.Client.Get(ctx, client.ObjectKey{Name: bad.GetName()}, &v1alpha1.EnvironmentProfile{}); err == nil {
		t.Fatal("the stored profile decodes; the test shows nothing")
	}
	good := wrappers.MakeEnvironmentProfile(ns+"-good", map[string]string{"kubernetes.io/metadata.name": ns}).StorageClass("fast").Obj()
	create(t, good)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	create(t, wrappers.MakeClaim("c", ns, ns+"-tpl").Obj())
	create(t, wrappers.MakeClaim("c", selected, ns+"-tpl").Obj())

	startManager(t)
	profileReady := func(g Gomega, name string) *metav1.Condition {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(bad.GroupVersionKind())
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, got)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == v1alpha1.ConditionReady {
				return &metav1.Condition{Status: metav1.ConditionStatus(m["status"].(string)), Reason: m["reason"].(string), Message: m["message"].(string)}
			}
		}
		return nil
	}
	eventually(t, func(g Gomega) {
		ready := profileReady(g, good.Name)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	})
	waitJob(t, ns, "c", 1, 1)

	const why = `spec.delivery.flux.interval: time: invalid duration "soon"`
	eventually(t, func(g Gomega) {
		evs := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, evs, client.InNamespace("default"))).To(Succeed())
		var notes []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "EnvironmentProfile" && e.Regarding.Name == bad.GetName() && e.Reason == undecodable.ReasonUndecodable {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(And(ContainSubstring(why), ContainSubstring("so the manager cannot use it until it is fixed"))))
	})
	eventually(t, func(g Gomega) {
		ready := profileReady(g, bad.GetName())
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(controllers.ReasonProfileInvalid))
		g.Expect(ready.Message).To(ContainSubstring(why))
	})
	eventually(t, func(g Gomega) {
		ready := apimeta.FindStatusCondition(getClaim(g, client.ObjectKey{Namespace: selected, Name: "c"}).Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(controllers.ReasonProfileInvalid))
		g.Expect(ready.Message).To(ContainSubstring("EnvironmentProfile " + bad.GetName()))
		g.Expect(ready.Message).To(ContainSubstring(why))
		g.Expect(jobsOf(g, selected, "c")).To(BeEmpty())
	})

	// Fixed, the profile is served like any other, and its Claim renders.
	eventually(t, func(g Gomega) {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(bad.GroupVersionKind())
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: bad.GetName()}, cur)).To(Succeed())
		g.Expect(unstructured.SetNestedField(cur.Object, "10m", "spec", "delivery", "flux", "interval")).To(Succeed())
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		ready := profileReady(g, bad.GetName())
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	})
	waitJob(t, selected, "c", 1, 1)
}

// A stored Claim that does not decode is left out of the cache and
// reported on itself; the manager syncs and renders the other Claims.
func TestManagerSkipsAnUndecodableClaim(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "packline.dev/v1alpha1", "kind": "Claim",
		"metadata": map[string]any{"name": "soon", "namespace": ns},
		"spec": map[string]any{
			"templateRef": map[string]any{"name": ns + "-tpl"},
			"delivery":    map[string]any{"flux": map[string]any{"interval": "soon"}},
		},
	}}
	storeUnvalidated(t, "claims.packline.dev", []string{"spec", "delivery", "flux", "interval"}, bad)
	create(t, wrappers.MakeClaim("good", ns, ns+"-tpl").Obj())

	startManager(t)
	waitJob(t, ns, "good", 1, 1)
	eventually(t, func(g Gomega) {
		evs := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Claim" && e.Regarding.Name == "soon" && e.Reason == undecodable.ReasonUndecodable {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(`spec.delivery.flux.interval: time: invalid duration "soon"`)))
	})
	NewWithT(t).Expect(jobsOf(NewWithT(t), ns, "soon")).To(BeEmpty())
}
