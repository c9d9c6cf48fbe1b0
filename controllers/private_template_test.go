package controllers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

// privateSetup starts a manager whose template namespace is a fresh one,
// with a private template's repository and push Secrets in it.
type privateSetup struct {
	tplNS, repoSecret, pushSecret, password string
}

func startPrivate(t *testing.T) privateSetup {
	t.Helper()
	s := privateSetup{tplNS: newNamespace(t), password: "RepoPassMARKER" + fmt.Sprint(nsCounter.Load())}
	s.repoSecret, s.pushSecret = "repo-creds-"+s.tplNS, "push-creds-"+s.tplNS
	startManager(t, func(c *pipeline.Config) { c.TemplateNamespace = s.tplNS })
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.repoSecret, Namespace: s.tplNS},
		StringData: map[string]string{"username": "platform-bot", "password": s.password, "unrelated": "not mounted"}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.pushSecret, Namespace: s.tplNS}, Type: corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{"registry.example.com":{"auth":"` + s.password + `"}}}`}})
	return s
}

func (s privateSetup) template(name string) *v1alpha1.ClaimTemplate {
	tpl := wrappers.MakeClaimTemplate(name).Open().Private(s.repoSecret, s.pushSecret).Obj()
	return tpl
}

// workspaceIn finds the live workspace of the owner named owner in ns, by
// label: in the template namespace its name carries the tenant namespace
// and a hash (pipeline.RunBase).
func workspaceIn(g Gomega, ns, owner string) *corev1.PersistentVolumeClaim {
	var list corev1.PersistentVolumeClaimList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{pipeline.LabelOwnerName: owner})).To(Succeed())
	for i := range list.Items {
		// envtest runs no pvc-protection controller: a deleted PVC stays
		// with its finalizer.
		if pvc := &list.Items[i]; pvc.DeletionTimestamp.IsZero() {
			return pvc
		}
	}
	return nil
}

func volume(job *batchv1.Job, name string) *corev1.Volume {
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &v
		}
	}
	return nil
}

// A Claim of a private template renders in the template namespace: its Job
// and workspace are there (no owner reference, the owner-namespace label),
// with the template's repository Secret mounted as its credential keys
// only and its push Secret as the docker config; nothing is created in the
// tenant's namespace. The Job and its pod there still drive the Claim's
// status, an auth failure names the template's field and not its Secret,
// and nothing in the tenant's namespace, the Claim included, names the
// Secrets or carries their content.
func TestPrivateTemplateRendersInTemplateNamespace(t *testing.T) {
	s := startPrivate(t)
	tenant := newNamespace(t)
	tpl := s.template(tenant + "-private")
	// The admin's credential travels as the template says; the Claim may
	// repeat that, not weaken it (TestAdminRunTransport).
	tpl.Spec.PushPlainHTTP, tpl.Spec.PushInsecureSkipTLSVerify = true, true
	create(t, tpl)

	ok := wrappers.MakeClaim("ide", tenant, tpl.Name).Values(`{"replicas":2}`).
		Target(v1alpha1.Target{Tag: "v2", PlainHTTP: true, InsecureSkipTLSVerify: true}).Obj()
	create(t, ok)
	job := waitJob(t, s.tplNS, ok.Name, 1, 1)
	g := NewWithT(t)
	g.Expect(job.OwnerReferences).To(BeEmpty(), "an owner reference cannot cross namespaces")
	g.Expect(job.Labels).To(HaveKeyWithValue(pipeline.LabelOwnerNamespace, tenant))
	g.Expect(job.Spec.Template.Labels).To(HaveKeyWithValue(pipeline.LabelOwnerNamespace, tenant))
	auth := volume(job, "template-auth")
	g.Expect(auth).NotTo(BeNil())
	g.Expect(auth.Secret.SecretName).To(Equal(s.repoSecret))
	g.Expect(*auth.Secret.Optional).To(BeTrue(), "a credential uses only some of the keys; missing ones must not fail the mount")
	var keys []string
	for _, it := range auth.Secret.Items {
		keys = append(keys, it.Key)
	}
	g.Expect(keys).To(ConsistOf(pipeline.GitCredentialKeys), "never the whole Secret")
	g.Expect(job.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(And(
		HaveField("Name", "template-auth"), HaveField("MountPath", workerv1.TemplateAuthDir), HaveField("ReadOnly", true))))
	push := volume(job, "push-auth")
	g.Expect(push).NotTo(BeNil())
	g.Expect(push.Secret.SecretName).To(Equal(s.pushSecret))
	eventually(t, func(g Gomega) {
		doc := workerSpec(g, s.tplNS, ok.Name)
		g.Expect(doc.Target).To(Equal(workerv1.Target{Repository: "registry.example.com/claims/" + tenant + "/ide", Tag: "v2", PlainHTTP: true, Insecure: true}))
		g.Expect(workspaceIn(g, s.tplNS, ok.Name)).NotTo(BeNil())
		g.Expect(workspaceIn(g, tenant, ok.Name)).To(BeNil())
		g.Expect(jobsOf(g, tenant, ok.Name)).To(BeEmpty())
		g.Expect(controllerutil.ContainsFinalizer(getClaim(g, client.ObjectKeyFromObject(ok)), pipeline.RemoteFinalizer)).To(BeTrue())
	})

	// The pod in the template namespace moves the Claim (watches map it
	// back by label), and so does the finished Job.
	pod := runPod(t, job)
	eventually(t, func(g Gomega) {
		g.Expect(getClaim(g, client.ObjectKeyFromObject(ok)).Status.Phase).To(Equal(v1alpha1.PhaseRunning))
	})
	finishPod(t, job, pod, 0, okResult(digest))
	eventually(t, func(g Gomega) {
		c := getClaim(g, client.ObjectKeyFromObject(ok))
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(c.Status.Digest).To(Equal(digest))
		g.Expect(workspaceIn(g, s.tplNS, ok.Name)).To(BeNil(), "the workspace is freed where it is")
	})

	// A rejected credential is the admin's to fix: the hint names the
	// template's field, not the Secret (which the tenant cannot read).
	denied := wrappers.MakeClaim("denied", tenant, tpl.Name).Obj()
	create(t, denied)
	runJob(t, waitJob(t, s.tplNS, denied.Name, 1, 1), 1,
		`{"error":{"reason":"TemplateAuthDenied","message":"the template repository refused the credentials of the ClaimTemplate's spec.source.secretRef: authorization failed","permanent":true}}`)
	eventually(t, func(g Gomega) {
		c := getClaim(g, client.ObjectKeyFromObject(denied))
		stalled := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal("TemplateAuthDenied"))
		g.Expect(stalled.Message).To(ContainSubstring("ClaimTemplate " + tpl.Name + " spec.source.secretRef"))
		g.Expect(c.Status.Attempts).To(Equal(int32(1)))
	})

	// Nothing in the tenant's namespace names the Secrets or holds their
	// content: no Job, pod, PVC, ConfigMap, Secret or event, and not the
	// Claims themselves.
	ctx := context.Background()
	var all []client.Object
	lists := []client.ObjectList{&batchv1.JobList{}, &corev1.PodList{}, &corev1.PersistentVolumeClaimList{},
		&corev1.ConfigMapList{}, &corev1.SecretList{}, &eventsv1.EventList{}, &corev1.EventList{}, &v1alpha1.ClaimList{}}
	var events int
	for _, l := range lists {
		g.Expect(env.Client.List(ctx, l, client.InNamespace(tenant))).To(Succeed())
		items, err := apimeta.ExtractList(l)
		g.Expect(err).NotTo(HaveOccurred())
		for _, it := range items {
			all = append(all, it.(client.Object))
			if _, ok := it.(*eventsv1.Event); ok {
				events++
			}
		}
	}
	g.Expect(events).To(BeNumerically(">", 0), "the scan must see the Claims' events")
	for _, o := range all {
		b, err := json.Marshal(o)
		g.Expect(err).NotTo(HaveOccurred())
		for _, marker := range []string{s.repoSecret, s.pushSecret, s.password, "template-auth"} {
			g.Expect(strings.Contains(string(b), marker)).To(BeFalse(), "%T %s in the tenant namespace holds %q: %s", o, o.GetName(), marker, b)
		}
	}
}

// A Claim of a private template may not choose where the render goes, nor
// with which push or CA Secret: TargetNotAllowed names the field, and no
// Job is created anywhere.
func TestPrivateTemplateTargetNotAllowed(t *testing.T) {
	s := startPrivate(t)
	tenant := newNamespace(t)
	tpl := s.template(tenant + "-private")
	create(t, tpl)
	cases := map[string]v1alpha1.Target{
		"spec.target.repository":    {Repository: "evil.example.com/loot"},
		"spec.target.pushSecretRef": {PushSecretRef: &corev1.LocalObjectReference{Name: s.pushSecret}},
		"spec.target.caSecretRef":   {CASecretRef: &corev1.LocalObjectReference{Name: "ca"}},
		// The template sets neither: the admin's push credential is not
		// sent over plain HTTP, or to an unverified server, on the
		// tenant's say.
		"spec.target.plainHTTP":             {PlainHTTP: true},
		"spec.target.insecureSkipTLSVerify": {InsecureSkipTLSVerify: true},
	}
	i := 0
	for field, target := range cases {
		i++
		c := wrappers.MakeClaim(fmt.Sprintf("override-%d", i), tenant, tpl.Name).Target(target).Obj()
		create(t, c)
		eventually(t, func(g Gomega) {
			got := getClaim(g, client.ObjectKeyFromObject(c))
			stalled := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)
			g.Expect(stalled).NotTo(BeNil())
			g.Expect(stalled.Reason).To(Equal(claims.ReasonTargetNotAllowed))
			g.Expect(stalled.Message).To(ContainSubstring(field))
			g.Expect(got.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		})
		g := NewWithT(t)
		g.Expect(jobsOf(g, tenant, c.Name)).To(BeEmpty())
		g.Expect(jobsOf(g, s.tplNS, c.Name)).To(BeEmpty())
	}
}

// Deleting a Claim mid-run deletes its Job and workspace in the template
// namespace, which no owner reference (so no garbage collector) reaches.
func TestPrivateTemplateDeletionCleansTemplateNamespace(t *testing.T) {
	s := startPrivate(t)
	tenant := newNamespace(t)
	tpl := s.template(tenant + "-private")
	create(t, tpl)
	c := wrappers.MakeClaim("doomed", tenant, tpl.Name).Obj()
	create(t, c)
	job := waitJob(t, s.tplNS, c.Name, 1, 1)
	runPod(t, job)
	eventually(t, func(g Gomega) {
		g.Expect(workspaceIn(g, s.tplNS, c.Name)).NotTo(BeNil())
		g.Expect(getClaim(g, client.ObjectKeyFromObject(c)).Status.Phase).To(Equal(v1alpha1.PhaseRunning))
	})
	NewWithT(t).Expect(env.Client.Delete(context.Background(), c)).To(Succeed())
	eventually(t, func(g Gomega) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), &v1alpha1.Claim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Claim still exists: %v", err)
		g.Expect(jobsOf(g, s.tplNS, c.Name)).To(BeEmpty())
		g.Expect(workspaceIn(g, s.tplNS, c.Name)).To(BeNil())
	})
}

// When a template turns public, the Jobs and workspace of its Claims'
// earlier runs in the template namespace go, and the next run is in the
// Claim's namespace; and back when it turns private again.
func TestPrivateTemplateTurnsPublic(t *testing.T) {
	s := startPrivate(t)
	tenant := newNamespace(t)
	tpl := s.template(tenant + "-flip")
	create(t, tpl)
	c := wrappers.MakeClaim("flip", tenant, tpl.Name).Obj()
	create(t, c)
	waitJob(t, s.tplNS, c.Name, 1, 1)
	eventually(t, func(g Gomega) { g.Expect(workspaceIn(g, s.tplNS, c.Name)).NotTo(BeNil()) })

	setPrivate := func(private bool) {
		eventually(t, func(g Gomega) {
			got := &v1alpha1.ClaimTemplate{}
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(tpl), got)).To(Succeed())
			got.Spec.Source.SecretRef, got.Spec.PushSecretRef = nil, nil
			if private {
				got.Spec = s.template(tpl.Name).Spec
			}
			g.Expect(env.Client.Update(context.Background(), got)).To(Succeed())
		})
	}
	setPrivate(false)
	job := waitJob(t, tenant, c.Name, 1, 1)
	NewWithT(t).Expect(job.OwnerReferences).To(HaveLen(1))
	eventually(t, func(g Gomega) {
		g.Expect(jobsOf(g, s.tplNS, c.Name)).To(BeEmpty(), "the private run's Job must go")
		g.Expect(workspaceIn(g, s.tplNS, c.Name)).To(BeNil(), "the private run's workspace must go")
		g.Expect(workspaceIn(g, tenant, c.Name)).NotTo(BeNil())
	})

	setPrivate(true)
	waitJob(t, s.tplNS, c.Name, 1, 1)
	eventually(t, func(g Gomega) {
		g.Expect(jobsOf(g, tenant, c.Name)).To(BeEmpty(), "the public run's Job must go")
		g.Expect(workspaceIn(g, tenant, c.Name)).To(BeNil(), "the public run's workspace must go")
	})
}

// deletionPolicy Delete on a private template's Claim: the cleanup Job runs
// in the template namespace with the template's push Secret, and only for
// a reference inside the repository the template forces on the Claim; a
// status naming anything else lets the Claim go without a cleanup.
func TestPrivateTemplateDeletionPolicyDelete(t *testing.T) {
	s := startPrivate(t)
	tenant := newNamespace(t)
	tpl := s.template(tenant + "-private")
	tpl.Spec.PushPlainHTTP = true
	create(t, tpl)
	cases := []struct {
		name, repo  string
		wantCleanup bool
	}{
		{"own repository", "registry.example.com/claims/" + tenant + "/own", true},
		{"elsewhere", "registry.example.com/claims/" + tenant + "/own-not", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := wrappers.MakeClaim("own", tenant, tpl.Name).DeletionPolicy(v1alpha1.DeletionDelete).
				Target(v1alpha1.Target{Tag: "v3", PlainHTTP: true}).Obj()
			if !tc.wantCleanup {
				c.Name = "other"
			}
			create(t, c)
			key := client.ObjectKeyFromObject(c)
			runJob(t, waitJob(t, s.tplNS, c.Name, 1, 1), 0,
				fmt.Sprintf(`{"digest":%q,"reference":"%s@%s","sourceRevision":"c0ffee","tag":"v3"}`, digest, tc.repo, digest))
			eventually(t, func(g Gomega) { g.Expect(getClaim(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded)) })

			NewWithT(t).Expect(env.Client.Delete(context.Background(), getClaim(NewWithT(t), key))).To(Succeed())
			if tc.wantCleanup {
				job := waitCleanupJob(t, s.tplNS, c.Name)
				g := NewWithT(t)
				g.Expect(job.OwnerReferences).To(BeEmpty())
				g.Expect(volume(job, "push-auth")).NotTo(BeNil())
				g.Expect(volume(job, "push-auth").Secret.SecretName).To(Equal(s.pushSecret))
				g.Expect(volume(job, "template-auth")).To(BeNil(), "deleting needs no repository credential")
				var doc workerv1.Delete
				for _, e := range job.Spec.Template.Spec.Containers[0].Env {
					if e.Name == workerv1.EnvSpec {
						g.Expect(workerv1.DecodeSpec([]byte(e.Value), &doc)).To(Succeed())
					}
				}
				g.Expect(doc.Reference).To(Equal(tc.repo + "@" + digest))
				g.Expect(doc.Target.Tag).To(Equal("v3"))
				g.Expect(doc.Target.PlainHTTP).To(BeTrue())
				g.Expect(jobsOf(g, tenant, c.Name)).To(BeEmpty())
				runJob(t, job, 0, okResult(digest))
			}
			eventually(t, func(g Gomega) {
				err := env.Client.Get(context.Background(), key, &v1alpha1.Claim{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Claim still exists: %v", err)
				g.Expect(jobsOf(g, s.tplNS, c.Name)).To(BeEmpty(), "the run's and cleanup's Jobs go with the Claim")
				var evs eventsv1.EventList
				g.Expect(env.Client.List(context.Background(), &evs, client.InNamespace(tenant))).To(Succeed())
				reasons := map[string]string{}
				for _, e := range evs.Items {
					if e.Regarding.Name == c.Name {
						reasons[e.Reason] = e.Note
					}
				}
				if tc.wantCleanup {
					g.Expect(reasons).To(HaveKey("ArtifactDeleted"))
				} else {
					g.Expect(reasons).To(HaveKeyWithValue("CleanupFailed", ContainSubstring("may only delete from registry.example.com/claims/"+tenant+"/other")))
				}
			})
		})
	}
}

// ClaimWork's placement and hints for private and public templates: the
// hints name the template's fields, never a Secret of the template
// namespace.
func TestClaimWorkPrivateTemplate(t *testing.T) {
	c := wrappers.MakeClaim("ide", "team-a", "tpl").Obj()
	public := wrappers.MakeClaimTemplate("tpl").Open().Obj()
	private := wrappers.MakeClaimTemplate("tpl").Open().Private("repo-creds", "push-creds").Obj()
	cases := []struct {
		name       string
		tpl        *v1alpha1.ClaimTemplate
		tplNS      string
		wantNS     string
		wantReason string
	}{
		{name: "public", tpl: public, tplNS: "packline-system"},
		{name: "private", tpl: private, tplNS: "packline-system", wantNS: "packline-system"},
		{name: "private without a template namespace", tpl: private, wantReason: claims.ReasonInvalidTemplate},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			work, err := controllers.ClaimWork(c, controllers.ClaimInputs{Template: tc.tpl, TemplateNamespace: tc.tplNS})
			if tc.wantReason != "" {
				var blocked *pipeline.Blocked
				g.Expect(errors.As(err, &blocked)).To(BeTrue(), "err = %v", err)
				g.Expect(blocked.Reason).To(Equal(tc.wantReason))
				g.Expect(blocked.Permanent).To(BeTrue())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(work.Namespace).To(Equal(tc.wantNS))
			g.Expect(work.Hints).To(HaveKeyWithValue("TemplateAuthDenied", ContainSubstring("ClaimTemplate tpl spec.source.secretRef")))
			g.Expect(work.Hints).To(HaveKeyWithValue("UndeclaredKind", ContainSubstring("ClaimTemplate tpl spec.kinds")))
			for _, h := range work.Hints {
				g.Expect(h).NotTo(Or(ContainSubstring("repo-creds"), ContainSubstring("push-creds")))
			}
		})
	}
}

// A template namespace that does not exist is reported, not retried
// silently.
func TestPrivateTemplateNamespaceMissing(t *testing.T) {
	tenant := newNamespace(t)
	missing := tenant + "-missing"
	startManager(t, func(c *pipeline.Config) { c.TemplateNamespace = missing })
	tpl := wrappers.MakeClaimTemplate(tenant+"-private").Open().Private("repo-creds", "").Obj()
	create(t, tpl)
	c := wrappers.MakeClaim("ide", tenant, tpl.Name).Obj()
	create(t, c)
	eventually(t, func(g Gomega) {
		got := getClaim(g, client.ObjectKeyFromObject(c))
		g.Expect(got.Status.Phase).To(Equal(v1alpha1.PhasePending))
		ready := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(pipeline.ReasonNamespaceMissing))
		g.Expect(ready.Message).To(ContainSubstring("namespace " + missing))
		g.Expect(jobsOf(g, tenant, c.Name)).To(BeEmpty())
	})
}

// An admin run's push credential travels as the template says: the
// Claim's plainHTTP and insecureSkipTLSVerify may repeat the template's
// spec.pushPlainHTTP and spec.pushInsecureSkipTLSVerify, never weaken
// them, and the worker gets the template's.
func TestAdminRunTransport(t *testing.T) {
	profile := v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: "lab"}, Spec: v1alpha1.EnvironmentProfileSpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"site": "lab"}},
		Signing:           &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "platform-cosign"}}}}
	private := func(plain, insecure bool) *v1alpha1.ClaimTemplate {
		tpl := wrappers.MakeClaimTemplate("tpl").Open().Private("repo-creds", "push-creds").Obj()
		tpl.Spec.PushPlainHTTP, tpl.Spec.PushInsecureSkipTLSVerify = plain, insecure
		return tpl
	}
	public := wrappers.MakeClaimTemplate("tpl").Open().Obj()
	for _, tc := range []struct {
		name              string
		tpl               *v1alpha1.ClaimTemplate
		labels            map[string]string
		target            v1alpha1.Target
		wantMsg           string
		wantPlain, wantTL bool
	}{
		{name: "private, the tenant asks for plain HTTP", tpl: private(false, false), target: v1alpha1.Target{PlainHTTP: true},
			wantMsg: "spec.target.plainHTTP: not allowed, because ClaimTemplate tpl reads a private repository"},
		{name: "private, the tenant skips TLS verification", tpl: private(false, false), target: v1alpha1.Target{InsecureSkipTLSVerify: true},
			wantMsg: "spec.target.insecureSkipTLSVerify: not allowed"},
		{name: "profile signs, the tenant asks for plain HTTP", tpl: public, labels: map[string]string{"site": "lab"}, target: v1alpha1.Target{PlainHTTP: true},
			wantMsg: "spec.target.plainHTTP: not allowed, because EnvironmentProfile lab signs"},
		{name: "the template's flags, repeated by the Claim", tpl: private(true, true), target: v1alpha1.Target{PlainHTTP: true, InsecureSkipTLSVerify: true},
			wantPlain: true, wantTL: true},
		{name: "the template's flags, the Claim silent", tpl: private(true, false), wantPlain: true},
		{name: "neither", tpl: private(false, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := wrappers.MakeClaim("ide", "team-a", "tpl").Target(tc.target).Obj()
			work, err := controllers.ClaimWork(c, controllers.ClaimInputs{Template: tc.tpl, TemplateNamespace: "packline-system",
				NamespaceLabels: tc.labels, Profiles: []v1alpha1.EnvironmentProfile{profile}})
			if tc.wantMsg != "" {
				var blocked *pipeline.Blocked
				g.Expect(errors.As(err, &blocked)).To(BeTrue(), "err = %v", err)
				g.Expect(blocked.Reason).To(Equal(claims.ReasonTargetNotAllowed))
				g.Expect(blocked.Message).To(ContainSubstring(tc.wantMsg))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			target := work.Spec.(workerv1.Claim).Target
			g.Expect([]bool{target.PlainHTTP, target.Insecure}).To(Equal([]bool{tc.wantPlain, tc.wantTL}))
		})
	}
}

// Two tenants' Claims of one name, both of a private template, run side by
// side in the template namespace: each has its own Job and workspace, named
// after its tenant namespace, and both succeed. Their runs are bounded by
// the platform's values, whatever the tenant asked for.
func TestAdminRunsOfTwoTenantsDoNotCollide(t *testing.T) {
	s := startPrivate(t)
	tenants := []string{newNamespace(t), newNamespace(t)}
	tpl := s.template(tenants[0] + "-shared")
	create(t, tpl)
	for _, tenant := range tenants {
		c := wrappers.MakeClaim("ide", tenant, tpl.Name).Obj()
		// Asking the platform's quota for more than it gives.
		c.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}}
		c.Spec.Workspace = &v1alpha1.WorkspaceSpec{Size: resource.NewQuantity(1<<50, resource.BinarySI)}
		c.Spec.QueueName = "tenant-queue"
		create(t, c)
	}
	jobOf := func(g Gomega, tenant string) *batchv1.Job {
		for _, j := range jobsOf(g, s.tplNS, "ide") {
			if j.Labels[pipeline.LabelOwnerNamespace] == tenant {
				return &j
			}
		}
		return nil
	}
	workspaceOf := func(g Gomega, tenant string) *corev1.PersistentVolumeClaim {
		var list corev1.PersistentVolumeClaimList
		g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(s.tplNS),
			client.MatchingLabels{pipeline.LabelOwnerName: "ide", pipeline.LabelOwnerNamespace: tenant})).To(Succeed())
		if len(list.Items) != 1 {
			return nil
		}
		return &list.Items[0]
	}
	jobs := map[string]*batchv1.Job{}
	eventually(t, func(g Gomega) {
		for _, tenant := range tenants {
			j := jobOf(g, tenant)
			g.Expect(j).NotTo(BeNil(), "no Job for tenant %s", tenant)
			g.Expect(j.Name).To(HavePrefix(tenant + "-ide-"))
			ws := workspaceOf(g, tenant)
			g.Expect(ws).NotTo(BeNil(), "no workspace for tenant %s", tenant)
			g.Expect(ws.Name).To(HavePrefix(tenant + "-ide-"))
			g.Expect(j.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal(ws.Name))
			jobs[tenant] = j
		}
	})
	g := NewWithT(t)
	g.Expect(jobs[tenants[0]].Name).NotTo(Equal(jobs[tenants[1]].Name))
	for _, j := range jobs {
		c := j.Spec.Template.Spec.Containers[0]
		g.Expect(c.Resources.Requests.Cpu().String()).To(Equal("250m"), "the platform's request, not the tenant's 64")
		g.Expect(j.Labels).NotTo(HaveKey(pipeline.QueueLabel), "a tenant's queue name is not the template namespace's")
		g.Expect(*j.Spec.Suspend).To(BeFalse())
	}
	eventually(t, func(g Gomega) {
		for _, tenant := range tenants {
			size := workspaceOf(g, tenant).Spec.Resources.Requests[corev1.ResourceStorage]
			g.Expect(size.String()).To(Equal(pipeline.DefaultWorkspaceSize.String()), "the platform's size, not the tenant's")
		}
	})
	for _, tenant := range tenants {
		runJob(t, jobs[tenant], 0, fmt.Sprintf(`{"digest":%q,"reference":"registry.example.com/claims/%s/ide@%s","sourceRevision":"c0ffee"}`, digest, tenant, digest))
	}
	eventually(t, func(g Gomega) {
		for _, tenant := range tenants {
			c := getClaim(g, client.ObjectKey{Namespace: tenant, Name: "ide"})
			g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded), "tenant %s", tenant)
			g.Expect(c.Status.JobRef.Name).To(Equal(jobs[tenant].Name))
		}
	})
}
