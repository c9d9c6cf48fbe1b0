package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

func getClaim(g Gomega, key client.ObjectKey) *v1alpha1.Claim {
	c := &v1alpha1.Claim{}
	g.Expect(env.Client.Get(context.Background(), key, c)).To(Succeed())
	return c
}

func workerSpec(g Gomega, ns, owner string) workerv1.Claim {
	jobs := jobsOf(g, ns, owner)
	g.Expect(jobs).NotTo(BeEmpty())
	var doc workerv1.Claim
	for _, e := range jobs[len(jobs)-1].Spec.Template.Spec.Containers[0].Env {
		if e.Name == workerv1.EnvSpec {
			g.Expect(workerv1.DecodeSpec([]byte(e.Value), &doc)).To(Succeed())
		}
	}
	return doc
}

func TestClaimWaitsForTemplateThenRenders(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	tplName := ns + "-tpl"
	key := client.ObjectKey{Namespace: ns, Name: "ide"}
	create(t, wrappers.MakeClaim(key.Name, ns, tplName).Values(`{"replicas":2}`).Obj())
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhasePending))
		ready := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(controllers.ReasonTemplateNotFound))
		g.Expect(ready.Message).To(ContainSubstring(tplName))
		g.Expect(jobsOf(g, ns, key.Name)).To(BeEmpty())
	})

	create(t, wrappers.MakeClaimTemplate(tplName).Open().Obj())
	job := waitJob(t, ns, key.Name, 1, 1)
	if got := job.Spec.Template.Spec.Containers[0].Args; len(got) != 1 || got[0] != "claim" {
		t.Fatalf("worker args = %v", got)
	}
	eventually(t, func(g Gomega) {
		doc := workerSpec(g, ns, key.Name)
		g.Expect(doc.Target.Repository).To(Equal("registry.example.com/claims/" + ns + "/ide"))
		g.Expect(doc.Template.Source.Path).To(Equal("apps/code-server/base"))
		g.Expect(doc.Profile).To(BeNil())
	})
	runJob(t, job, 0, okResult(digest))
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(c.Status.Digest).To(Equal(digest))
		g.Expect(c.Status.InputsHash).NotTo(BeEmpty())
	})

	// The admin edits the template: the claim renders again at the same generation.
	before := getClaim(NewWithT(t), key).Status.InputsHash
	eventually(t, func(g Gomega) {
		tpl := &v1alpha1.ClaimTemplate{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: tplName}, tpl)).To(Succeed())
		tpl.Spec.Source.Ref = "v2"
		g.Expect(env.Client.Update(context.Background(), tpl)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		g.Expect(c.Generation).To(Equal(int64(1)))
		g.Expect(c.Status.InputsHash).NotTo(Equal(before))
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhasePending))
		g.Expect(workerSpec(g, ns, key.Name).Template.Source.Ref).To(Equal("v2"))
		g.Expect(jobsOf(g, ns, key.Name)).To(HaveLen(1), "the superseded render's Job must go")
	})
}

func TestClaimInvalidValuesStall(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	key := client.ObjectKey{Namespace: ns, Name: "too-big"}
	create(t, wrappers.MakeClaim(key.Name, ns, ns+"-tpl").Values(`{"replicas":9}`).Obj())
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		st := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Reason).To(Equal(claims.ReasonInvalidValues))
		g.Expect(st.Message).To(ContainSubstring("spec.values.replicas"))
		g.Expect(jobsOf(g, ns, key.Name)).To(BeEmpty())
	})
	// Fixing the values starts a render.
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1}`)}
		g.Expect(env.Client.Update(context.Background(), c)).To(Succeed())
	})
	waitJob(t, ns, key.Name, 2, 1)
}

func TestClaimProfileAndAccess(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate(ns + "-tpl").Open().ForNamespaces(map[string]string{"tenant": ns}).Obj()
	create(t, tpl)
	for _, p := range []struct {
		name string
		prio int32
	}{{ns + "-low", 1}, {ns + "-high", 5}} {
		create(t, wrappers.MakeEnvironmentProfile(p.name, map[string]string{"site": ns}).
			Priority(p.prio).StorageClass(p.name).RuntimeClass("nvidia").Obj())
	}
	key := client.ObjectKey{Namespace: ns, Name: "gpu"}
	create(t, wrappers.MakeClaim(key.Name, ns, tpl.Name).Obj())
	eventually(t, func(g Gomega) {
		st := apimeta.FindStatusCondition(getClaim(g, key).Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Reason).To(Equal(claims.ReasonAccessDenied))
	})

	// The platform labels the namespace: access and a profile now apply.
	eventually(t, func(g Gomega) {
		n := &corev1.Namespace{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n)).To(Succeed())
		n.Labels = map[string]string{"tenant": ns, "site": ns}
		g.Expect(env.Client.Update(context.Background(), n)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		doc := workerSpec(g, ns, key.Name)
		g.Expect(doc.Profile).NotTo(BeNil())
		g.Expect(doc.Profile.StorageClassName).To(Equal(ns + "-high"))
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "gpu-workspace"}, pvc)).To(Succeed())
		g.Expect(*pvc.Spec.StorageClassName).To(Equal(ns + "-high"))
	})
}

func TestClaimTemplateStatus(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	bad := wrappers.MakeClaimTemplate(ns + "-bad").Open().Obj()
	bad.Spec.Parameters[0].Value = "replcias"
	create(t, bad)
	eventually(t, func(g Gomega) {
		tpl := &v1alpha1.ClaimTemplate{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: bad.Name}, tpl)).To(Succeed())
		ready := apimeta.FindStatusCondition(tpl.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("spec.parameters[0].value"))
	})
}

// A template declaring a kind the cluster does not serve is not Ready, and
// says which kind.
func TestClaimTemplateUnknownKind(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate(ns + "-widget").Open().Obj()
	tpl.Spec.Kinds = append(tpl.Spec.Kinds, v1alpha1.RenderedKind{Group: "example.com", Kind: "Widget"})
	create(t, tpl)
	eventually(t, func(g Gomega) {
		got := &v1alpha1.ClaimTemplate{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: tpl.Name}, got)).To(Succeed())
		ready := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(Equal("spec.kinds: this cluster does not serve Widget.example.com"))
	})
}

// Values too large for the worker's environment stall the Claim with a
// message naming the limit, instead of a pod that crashes with E2BIG.
func TestClaimSpecTooLarge(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	key := client.ObjectKey{Namespace: ns, Name: "huge"}
	big := strings.Repeat("x", 130<<10)
	create(t, wrappers.MakeClaim(key.Name, ns, ns+"-tpl").Values(`{"replicas":1,"notes":"`+big+`"}`).Obj())
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		st := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Reason).To(Equal(pipeline.ReasonSpecTooLarge))
		g.Expect(st.Message).To(ContainSubstring("over the 96 KiB limit"))
		g.Expect(st.Message).To(ContainSubstring("spec.values"))
		g.Expect(jobsOf(g, ns, key.Name)).To(BeEmpty())
	})
}

// The render Job's container gets the manager's default resources, the
// profile's workerResources over them, and the Claim's spec.resources over
// both; /tmp is bounded.
func TestClaimWorkerResources(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	create(t, wrappers.MakeEnvironmentProfile(ns+"-gpu", map[string]string{"kubernetes.io/metadata.name": ns}).
		WorkerResources(corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")},
		}).Obj())
	c := wrappers.MakeClaim("res", ns, ns+"-tpl").Obj()
	c.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}
	create(t, c)
	job := waitJob(t, ns, "res", 1, 1)
	got := job.Spec.Template.Spec.Containers[0].Resources
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
	}
	if !apiequality.Semantic.DeepEqual(want, got) {
		t.Errorf("worker resources = %v, want %v", got, want)
	}
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == "tmp" && (v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil) {
			t.Errorf("tmp emptyDir has no sizeLimit: %+v", v.VolumeSource)
		}
	}
}

// A Claim denied access renders once its namespace is labelled to match,
// even when no profile changes with the label; an unrelated label change
// starts nothing.
func TestClaimAccessGrantedByLabel(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate(ns + "-tpl").Open().ForNamespaces(map[string]string{"tenant": ns}).Obj()
	create(t, tpl)
	key := client.ObjectKey{Namespace: ns, Name: "later"}
	create(t, wrappers.MakeClaim(key.Name, ns, tpl.Name).Obj())
	eventually(t, func(g Gomega) {
		st := apimeta.FindStatusCondition(getClaim(g, key).Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Reason).To(Equal(claims.ReasonAccessDenied))
	})
	label := func(l map[string]string) {
		eventually(t, func(g Gomega) {
			n := &corev1.Namespace{}
			g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n)).To(Succeed())
			n.Labels = l
			g.Expect(env.Client.Update(context.Background(), n)).To(Succeed())
		})
	}
	label(map[string]string{"tenant": ns})
	waitJob(t, ns, key.Name, 1, 1)
	label(map[string]string{"tenant": ns, "team": "unrelated"})
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(jobsOf(g, ns, key.Name)).To(HaveLen(1))
	}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// A broken profile (a nodeSelector key that is not a label key) is
// Ready=False with the reason; a Claim in a namespace it selects waits
// with ProfileInvalid naming it, others render; fixing it lets the Claim go.
func TestBrokenProfile(t *testing.T) {
	startManager(t)
	ns, other := newNamespace(t), newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	prof := wrappers.MakeEnvironmentProfile(ns+"-broken", map[string]string{"kubernetes.io/metadata.name": ns}).
		NodeSelector(map[string]string{"bad key!": "x"}).Obj()
	create(t, prof)
	eventually(t, func(g Gomega) {
		got := &v1alpha1.EnvironmentProfile{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(prof), got)).To(Succeed())
		ready := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring(`spec.nodeSelector: key "bad key!"`))
	})
	create(t, wrappers.MakeClaim("c", ns, ns+"-tpl").Obj())
	create(t, wrappers.MakeClaim("c", other, ns+"-tpl").Obj())
	waitJob(t, other, "c", 1, 1)
	eventually(t, func(g Gomega) {
		ready := apimeta.FindStatusCondition(getClaim(g, client.ObjectKey{Namespace: ns, Name: "c"}).Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(controllers.ReasonProfileInvalid))
		g.Expect(ready.Message).To(ContainSubstring("EnvironmentProfile " + prof.Name))
		g.Expect(jobsOf(g, ns, "c")).To(BeEmpty())
	})
	eventually(t, func(g Gomega) {
		got := &v1alpha1.EnvironmentProfile{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(prof), got)).To(Succeed())
		got.Spec.NodeSelector = map[string]string{"kubernetes.io/arch": "amd64"}
		g.Expect(env.Client.Update(context.Background(), got)).To(Succeed())
	})
	waitJob(t, ns, "c", 1, 1)
}
