package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/testenv"
	. "github.com/packline/packline/test/wrappers"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	testenv.Main(m, &env)
}

// testConfig has short backoffs so retries happen within a test.
func testConfig() pipeline.Config {
	cfg := pipeline.DefaultConfig()
	cfg.WorkerImage = "packline-worker:test"
	cfg.BackoffBase = 200 * time.Millisecond
	cfg.BackoffCap = time.Second
	// No Job controller runs here, so a template's check would never end;
	// TestTemplateCheck turns it on and plays the Job itself.
	cfg.TemplateCheck = false
	return cfg
}

// startManager runs the real manager wiring against the test apiserver
// until stop is called (or the test ends). No webhook runs here, so no
// resource carries a seal: the manager takes the references of unsealed
// resources as they are (--insecure-unverified-references), and tests of
// entitlement use startManagerWith.
func startManager(t *testing.T, tweaks ...func(*pipeline.Config)) (stop func()) {
	t.Helper()
	return startManagerWith(t, []controllers.Option{controllers.WithUnverifiedReferences()}, tweaks...)
}

// startManagerWith is startManager with controllers.Setup options.
func startManagerWith(t *testing.T, opts []controllers.Option, tweaks ...func(*pipeline.Config)) (stop func()) {
	t.Helper()
	cfg := testConfig()
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	cacheOpts, err := controllers.CacheOptions(cfg, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Several managers run in one test binary, one after another.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controllers.Setup(mgr, cfg, opts...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var stopped atomic.Bool
	stop = func() {
		if stopped.CompareAndSwap(false, true) {
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				// The manager gives its runnables 30 s; a reconcile that has
				// not returned by now is blocked, and its stack says where.
				var stacks bytes.Buffer
				_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
				t.Errorf("manager still stopping after 20s; goroutines:\n%s", stacks.String())
				<-done
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

var nsCounter atomic.Int32

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d-%d", time.Now().Unix()%100000, nsCounter.Add(1))}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), o); err != nil {
		t.Fatalf("create %s: %v", o.GetName(), err)
	}
}

func getArtifact(g Gomega, key client.ObjectKey) *v1alpha1.Artifact {
	a := &v1alpha1.Artifact{}
	g.Expect(env.Client.Get(context.Background(), key, a)).To(Succeed())
	return a
}

// jobsOf lists the Jobs of one owner.
func jobsOf(g Gomega, ns, owner string) []batchv1.Job {
	var list batchv1.JobList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{pipeline.LabelOwnerName: owner})).To(Succeed())
	var live []batchv1.Job
	for _, j := range list.Items {
		if j.DeletionTimestamp.IsZero() {
			live = append(live, j)
		}
	}
	return live
}

// waitJob waits until the owner has a live Job with the given attempt and
// generation, and returns it.
func waitJob(t *testing.T, ns, owner string, gen int64, attempt int) *batchv1.Job {
	t.Helper()
	var found *batchv1.Job
	NewWithT(t).Eventually(func(g Gomega) {
		found = nil
		for _, j := range jobsOf(g, ns, owner) {
			if j.Labels[pipeline.LabelAttempt] == fmt.Sprint(attempt) && j.Labels[pipeline.LabelGeneration] == fmt.Sprint(gen) {
				found = &j
			}
		}
		g.Expect(found).NotTo(BeNil(), "no Job for generation %d attempt %d", gen, attempt)
	}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	return found
}

// runPod plays the Job controller (creating the pod) and the kubelet
// (starting it), and returns the pod.
func runPod(t *testing.T, job *batchv1.Job) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := MakePod(job.Name+"-x", job.Namespace, job.Name).Labels(job.Spec.Template.Labels).Obj()
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
	pod.Spec = *job.Spec.Template.Spec.DeepCopy()
	status := MakePod("", "", "").Running().Status
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	pod.Status = status
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatalf("pod status: %v", err)
	}
	j := job.DeepCopy()
	j.Status = MakeJob("", "").Active().Status
	if err := env.Client.Status().Update(ctx, j); err != nil {
		t.Fatalf("job status: %v", err)
	}
	return pod
}

// finishPod plays the kubelet (container exit with a termination message)
// and then the Job controller (Complete or Failed).
func finishPod(t *testing.T, job *batchv1.Job, pod *corev1.Pod, exitCode int32, message string) {
	t.Helper()
	ctx := context.Background()
	p := pod.DeepCopy()
	p.Status = MakePod("", "", "").Terminated(exitCode, message).Status
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatalf("pod status: %v", err)
	}
	j := &batchv1.Job{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
		t.Fatal(err)
	}
	w := &JobWrapper{Job: *j}
	w.Status.StartTime = j.Status.StartTime
	if exitCode == 0 {
		w.Complete()
	} else {
		w.Failed(batchv1.JobReasonBackoffLimitExceeded)
	}
	if err := env.Client.Status().Update(ctx, w.Obj()); err != nil {
		t.Fatalf("job status: %v", err)
	}
}

// runJob runs a Job's pod to an exit.
func runJob(t *testing.T, job *batchv1.Job, exitCode int32, message string) {
	t.Helper()
	finishPod(t, job, runPod(t, job), exitCode, message)
}

type metav1Condition = metav1.Condition

type eventsList = eventsv1.EventList

type batchJob = batchv1.Job
