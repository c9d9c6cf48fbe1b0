package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	. "github.com/packline/packline/test/wrappers"
)

// The engine's reconcile steps against a fake API server (the envtest
// suites of controllers/ run them against a real one): what each step
// writes into status, and which Jobs of which kind it makes.

// engine is a Pipeline on a fake client with a clock the test steps.
type engine struct {
	t   *testing.T
	p   *Pipeline
	c   client.Client
	now time.Time
}

func newEngine(t *testing.T, objs ...client.Object) *engine {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = batchv1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	uid := func(o client.Object) []string {
		if v := o.GetLabels()[LabelOwnerUID]; v != "" {
			return []string{v}
		}
		return nil
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.Artifact{}, &batchv1.Job{}).
		WithIndex(&batchv1.Job{}, IndexOwnerUID, uid).
		WithIndex(&corev1.PersistentVolumeClaim{}, IndexOwnerUID, uid).
		Build()
	e := &engine{t: t, c: c, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return e.now }
	e.p = &Pipeline{Client: c, APIReader: c, Config: cfg, Kind: "Artifact"}
	return e
}

func artifact(mut ...func(*v1alpha1.Artifact)) *v1alpha1.Artifact {
	a := MakeArtifact("a", "ns").Obj()
	a.UID, a.Generation = "uid-a", 1
	for _, m := range mut {
		m(a)
	}
	return a
}

func work() Work {
	var m Mounts
	target := m.Target(v1alpha1.Target{Repository: "registry.example.com/acme/tiny", Tag: "v1"}, "registry.example.com/acme/tiny")
	return Work{Command: "artifact", Spec: workerv1.Artifact{Target: target}, Mounts: m, InputsHash: "0123456789abcdef", Tag: "v1"}
}

// reconcile runs one reconcile of the stored Artifact with prepare's answer.
func (e *engine) reconcile(prepare PrepareFunc) (*v1alpha1.Artifact, ctrl.Result) {
	e.t.Helper()
	a := &v1alpha1.Artifact{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "a"}, a); err != nil {
		e.t.Fatal(err)
	}
	res, err := e.p.Reconcile(context.Background(), a, prepare)
	if err != nil {
		e.t.Fatalf("Reconcile: %v", err)
	}
	got := &v1alpha1.Artifact{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "a"}, got); err != nil {
		e.t.Fatal(err)
	}
	return got, res
}

func (e *engine) jobs(kind JobKind) []batchv1.Job {
	e.t.Helper()
	var list batchv1.JobList
	if err := e.c.List(context.Background(), &list, client.MatchingLabels{LabelJobKind: string(kind)}); err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// finish plays the Job controller and the kubelet: the Job gets a UID and
// the given outcome, and one pod it controls with the termination message.
func (e *engine) finish(job batchv1.Job, exit int32, message string) {
	e.t.Helper()
	ctx := context.Background()
	job.UID = types.UID("uid-" + job.Name)
	w := &JobWrapper{Job: job}
	if exit == 0 {
		w.Complete()
	} else {
		w.Failed("BackoffLimitExceeded")
	}
	for i := range w.Status.Conditions {
		w.Status.Conditions[i].LastTransitionTime = metav1.NewTime(e.now)
	}
	status := w.Status
	if err := e.c.Update(ctx, w.Obj()); err != nil {
		e.t.Fatal(err)
	}
	w.Status = status
	if err := e.c.Status().Update(ctx, w.Obj()); err != nil {
		e.t.Fatal(err)
	}
	pod := MakePod(job.Name+"-pod", job.Namespace, job.Name).ControlledBy(w.Obj()).Terminated(exit, message).Obj()
	if err := e.c.Create(ctx, pod); err != nil {
		e.t.Fatal(err)
	}
}

// runView is what the walk compares after each reconcile.
type runView struct {
	Phase    v1alpha1.Phase
	Attempts int32
	Reason   string
	Digest   string
	Requeue  time.Duration
	RunJobs  int
}

func (e *engine) view(a *v1alpha1.Artifact, res ctrl.Result) runView {
	v := runView{Phase: a.Status.Phase, Attempts: a.Status.Attempts, Digest: a.Status.Digest, Requeue: res.RequeueAfter, RunJobs: len(e.jobs(JobRun))}
	for _, c := range a.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			v.Reason = c.Reason
		}
	}
	return v
}

// TestEngineRunRetriesThenSucceeds walks one run: the first attempt's Job,
// its retryable failure, the backoff on the retry clock, the second
// attempt's Job, and its success.
func TestEngineRunRetriesThenSucceeds(t *testing.T) {
	e := newEngine(t, artifact())
	prepare := func(context.Context) (Work, error) { return work(), nil }
	step := func(name string, want runView) {
		t.Helper()
		a, res := e.reconcile(prepare)
		if diff := cmp.Diff(want, e.view(a, res)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	step("first reconcile", runView{Phase: v1alpha1.PhasePending, Attempts: 1, Reason: ReasonWaitingForPod, RunJobs: 1})
	if n := len(e.jobs(JobRun)); n != 1 {
		t.Fatalf("run Jobs = %d, want 1", n)
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := e.c.List(context.Background(), &pvcs); err != nil || len(pvcs.Items) != 1 {
		t.Fatalf("workspaces = %d (%v), want 1", len(pvcs.Items), err)
	}

	e.finish(e.jobs(JobRun)[0], 1, retryableMsg)
	step("retryable failure", runView{Phase: v1alpha1.PhaseRetrying, Attempts: 1, Reason: "RegistryUnavailable", Requeue: 10 * time.Second, RunJobs: 1})
	e.now = e.now.Add(4 * time.Second)
	step("within the backoff", runView{Phase: v1alpha1.PhaseRetrying, Attempts: 1, Reason: "RegistryUnavailable", Requeue: 6 * time.Second, RunJobs: 1})
	e.now = e.now.Add(7 * time.Second)
	step("after the backoff", runView{Phase: v1alpha1.PhasePending, Attempts: 2, Reason: ReasonWaitingForPod, RunJobs: 2})

	for _, j := range e.jobs(JobRun) {
		if j.Labels[LabelAttempt] == "2" {
			e.finish(j, 0, okResult)
		}
	}
	step("second attempt succeeded", runView{Phase: v1alpha1.PhaseSucceeded, Attempts: 2, Reason: "Succeeded", Digest: digest, RunJobs: 2})
	if err := e.c.List(context.Background(), &pvcs); err != nil || len(pvcs.Items) != 0 {
		t.Errorf("workspaces after success = %d (%v), want 0: the default reclaim policy frees it", len(pvcs.Items), err)
	}
}

// TestEngineHolds: a step that must wait leaves the run Pending, one that
// cannot go on fails it, both through Transition, with the requeue asked.
func TestEngineHolds(t *testing.T) {
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a-workspace", Namespace: "ns"}}
	cases := []struct {
		name    string
		account string
		objs    []client.Object
		prepare PrepareFunc
		want    runView
	}{
		{"blocked, waiting", "", nil, func(context.Context) (Work, error) {
			return Work{}, &Blocked{Reason: "TemplateNotReady", Message: "waiting", InputsHash: "b1", RetryAfter: time.Minute}
		}, runView{Phase: v1alpha1.PhasePending, Reason: "TemplateNotReady", Requeue: time.Minute}},
		{"blocked for good", "", nil, func(context.Context) (Work, error) {
			return Work{}, &Blocked{Reason: "EntitlementDenied", Message: "denied", Permanent: true, InputsHash: "b2", RetryAfter: 5 * time.Minute}
		}, runView{Phase: v1alpha1.PhaseFailed, Reason: "EntitlementDenied", Requeue: 5 * time.Minute}},
		{"worker ServiceAccount missing", "packline-worker", nil, func(context.Context) (Work, error) { return work(), nil },
			runView{Phase: v1alpha1.PhasePending, Reason: ReasonServiceAccountMissing, Requeue: 10 * time.Second}},
		// A step error that stalls keeps the phase (see stepFailed).
		{"workspace name taken", "", []client.Object{foreign}, func(context.Context) (Work, error) { return work(), nil },
			runView{Phase: v1alpha1.PhasePending, Reason: ReasonWorkspaceConflict, Requeue: 5 * time.Minute}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, append(tc.objs, artifact())...)
			e.p.Config.WorkerServiceAccount = tc.account
			a, res := e.reconcile(tc.prepare)
			if diff := cmp.Diff(tc.want, e.view(a, res)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestEngineVerifyAndDelete: a succeeded run with spec.verifyInterval gets
// a verify Job once the interval passed; deleted with deletionPolicy
// Delete, it gets a cleanup Job, and is let go once that succeeded.
func TestEngineVerifyAndDelete(t *testing.T) {
	e := newEngine(t, artifact(func(a *v1alpha1.Artifact) {
		a.Spec.VerifyInterval = &metav1.Duration{Duration: time.Hour}
		a.Spec.DeletionPolicy = v1alpha1.DeletionDelete
	}))
	prepare := func(context.Context) (Work, error) { return work(), nil }
	e.reconcile(prepare)
	e.finish(e.jobs(JobRun)[0], 0, okResult)
	a, _ := e.reconcile(prepare)
	if a.Status.Phase != v1alpha1.PhaseSucceeded || !controllerutil.ContainsFinalizer(a, Finalizer) {
		t.Fatalf("phase %s, finalizers %v: want Succeeded with %s", a.Status.Phase, a.Finalizers, Finalizer)
	}
	if n := len(e.jobs(JobVerify)); n != 0 {
		t.Fatalf("verify Jobs before the interval = %d, want 0", n)
	}
	e.now = e.now.Add(time.Hour + time.Second)
	e.reconcile(prepare)
	verify := e.jobs(JobVerify)
	if len(verify) != 1 || verify[0].Spec.Template.Spec.Containers[0].Args[0] != "verify" {
		t.Fatalf("verify Jobs = %d, want 1 running the worker's verify", len(verify))
	}
	e.finish(verify[0], 0, okResult)
	a, _ = e.reconcile(prepare)
	if a.Status.Verifications != 1 || a.Status.LastVerifiedTime == nil {
		t.Errorf("verifications = %d, lastVerifiedTime %v: want 1, set", a.Status.Verifications, a.Status.LastVerifiedTime)
	}

	if err := e.c.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	e.reconcile(prepare)
	cleanup := e.jobs(JobCleanup)
	if len(cleanup) != 1 || cleanup[0].Spec.Template.Spec.Containers[0].Args[0] != "delete" {
		t.Fatalf("cleanup Jobs = %d, want 1 running the worker's delete", len(cleanup))
	}
	e.finish(cleanup[0], 0, okResult)
	a = &v1alpha1.Artifact{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "a"}, a); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Reconcile(context.Background(), a, prepare); err != nil {
		t.Fatal(err)
	}
	err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "a"}, &v1alpha1.Artifact{})
	if err == nil {
		t.Error("the Artifact is still there after its cleanup succeeded: the finalizer was not released")
	}
}

// TestEngineNewGenerationDeletesStaleJobs: a spec change starts over from
// any phase, and the superseded run's Job goes at once.
func TestEngineNewGenerationDeletesStaleJobs(t *testing.T) {
	e := newEngine(t, artifact())
	prepare := func(context.Context) (Work, error) { return work(), nil }
	e.reconcile(prepare)
	first := e.jobs(JobRun)
	if len(first) != 1 {
		t.Fatalf("run Jobs = %d, want 1", len(first))
	}
	a := &v1alpha1.Artifact{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "a"}, a); err != nil {
		t.Fatal(err)
	}
	a.Generation = 2
	if err := e.c.Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	a, _ = e.reconcile(prepare)
	var names []string
	for _, j := range e.jobs(JobRun) {
		names = append(names, j.Labels[LabelGeneration])
	}
	if diff := cmp.Diff([]string{"2"}, names); diff != "" {
		t.Errorf("generations of the run Jobs (-want +got):\n%s", diff)
	}
	if a.Status.ObservedGeneration != 2 || a.Status.Attempts != 1 {
		t.Errorf("observedGeneration %d, attempts %d: want 2, 1", a.Status.ObservedGeneration, a.Status.Attempts)
	}
}
