// Command manager runs the packline controllers.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/admission"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// defaultGOGC is the manager's garbage-collection target unless $GOGC sets
// one. Most of the manager's heap is its cache, which lives as long as the
// process; with Go's default (100) the heap grows to twice that before each
// collection. At 50 it stays near one and a half times: with 5,000
// Artifacts, Jobs and PVCs, RSS went from 134-154 to 113-133 MiB for about
// 2% of a core more collection work (make bench, BenchmarkArtifactsToJobs).
const defaultGOGC = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGOGC)
	}
	cfg := pipeline.DefaultConfig()
	var (
		metricsAddr, probeAddr string
		pprofAddr              string
		leaderElect            bool
		leaderElectionNS       string
		retryLimit             int
	)
	flag.StringVar(&cfg.WorkerImage, "worker-image", cfg.WorkerImage, "Image that runs the worker in every Job.")
	flag.IntVar(&retryLimit, "default-retry-limit", int(cfg.DefaultRetryLimit), "Retries of a retryable failure when spec.retryLimit is unset.")
	flag.DurationVar(&cfg.BackoffBase, "backoff-base", cfg.BackoffBase, "First retry delay; it doubles per attempt.")
	flag.DurationVar(&cfg.BackoffCap, "backoff-cap", cfg.BackoffCap, "Longest retry delay.")
	flag.DurationVar(&cfg.DefaultTimeout, "default-timeout", cfg.DefaultTimeout, "Attempt timeout when spec.timeout is unset.")
	flag.DurationVar(&cfg.CleanupGiveUp, "cleanup-give-up", cfg.CleanupGiveUp, "How long a deleted resource waits for a cleanup pod that cannot start (missing Secret, image, node) before its finalizer is released.")
	flag.DurationVar(&cfg.JobTTL, "job-ttl", cfg.JobTTL, "ttlSecondsAfterFinished of worker Jobs.")
	flag.StringVar(&cfg.WorkerServiceAccount, "worker-service-account", cfg.WorkerServiceAccount, "ServiceAccount of worker pods (its token is never mounted).")
	workerRequests := flag.String("worker-requests", "cpu=250m,memory=256Mi", "Default requests of worker containers (name=quantity,...); a profile's workerResources and spec.resources override them.")
	workerLimits := flag.String("worker-limits", "memory=2Gi", "Default limits of worker containers (name=quantity,...).")
	flag.Var(quantityFlag{&cfg.WorkerTmpSize}, "worker-tmp-size", "Size limit of the worker's writable /tmp (an emptyDir).")
	flag.StringVar(&cfg.TemplateNamespace, "template-namespace", cfg.TemplateNamespace, "Namespace of private ClaimTemplates' Secrets, where their Claims render (default: $POD_NAMESPACE, else packline-system).")
	flag.StringVar(&cfg.Instance, "instance", "", "Name of this manager among several on one cluster: it drives only Artifacts and Claims labelled packline.dev/instance=<name>; unset, it drives those without the label.")
	flag.BoolVar(&cfg.TemplateCheck, "template-check", cfg.TemplateCheck, "Render every valid ClaimTemplate once per generation (a check Job in --template-namespace, pushing nothing) and report its commit and kinds, or why it fails, in its Ready condition.")
	flag.StringVar(&cfg.JobManagedBy, "job-managed-by", "", "spec.managedBy of Jobs with spec.queueName, e.g. kueue.x-k8s.io/multikueue to run them on a worker cluster (see docs/how-to/worker-clusters-multikueue.md).")
	flag.DurationVar(&cfg.ProgressInterval, "progress-interval", cfg.ProgressInterval, "Least time between two reads of a running worker's log for its progress (status.progress); 0 reads none.")
	progressQPS := flag.Float64("progress-qps", float64(cfg.ProgressQPS), "Worker log reads per second for status.progress, over all objects; beyond --progress-interval times this many running workers, each is read less often.")
	flag.IntVar(&cfg.ProgressConcurrency, "progress-concurrency", cfg.ProgressConcurrency, "Worker log reads for status.progress in flight at once.")
	flag.IntVar(&cfg.MaxConcurrentReconciles, "max-concurrent-reconciles", cfg.MaxConcurrentReconciles, "Artifacts (and, separately, Claims) reconciled in parallel.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address of the Prometheus metrics endpoint, e.g. :8443; 0 (the default) disables it.")
	metricsSecure := flag.Bool("metrics-secure", true, "Serve metrics over HTTPS, only to callers whose token the API server authenticates and authorizes for get on /metrics (bind the packline-metrics-reader ClusterRole); false serves plain HTTP to anyone.")
	metricsCertDir := flag.String("metrics-cert-dir", "", "Folder with tls.crt and tls.key for the metrics server (default: a self-signed certificate).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address of the Go profiler (/debug/pprof); unset disables it. For profiling only: it is not authenticated.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	flag.StringVar(&leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's).")
	var insecureRefs bool
	flag.BoolVar(&insecureRefs, "insecure-unverified-references", false, "Let Artifacts and Claims without a requester seal the webhook wrote and verified (webhooks off, or made before the webhook) name Secrets, PVCs and Artifacts, unchecked. Only for a cluster without tenants: anyone who may create an Artifact can then push any Secret of its namespace anywhere.")
	wh := defaultWebhookOptions()
	wh.bindFlags(flag.CommandLine)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if retryLimit < 0 {
		fail(fmt.Errorf("--default-retry-limit must not be negative"))
	}
	cfg.DefaultRetryLimit = int32(retryLimit)
	if *progressQPS <= 0 || cfg.ProgressConcurrency <= 0 || cfg.ProgressInterval < 0 {
		fail(fmt.Errorf("--progress-qps and --progress-concurrency must be positive, --progress-interval not negative"))
	}
	cfg.ProgressQPS = float32(*progressQPS)
	var err error
	if cfg.WorkerResources.Requests, err = pipeline.ParseResourceList(*workerRequests); err != nil {
		fail(fmt.Errorf("--worker-requests: %w", err))
	}
	if cfg.WorkerResources.Limits, err = pipeline.ParseResourceList(*workerLimits); err != nil {
		fail(fmt.Errorf("--worker-limits: %w", err))
	}
	if cfg.BackoffBase <= 0 || cfg.BackoffCap < cfg.BackoffBase {
		fail(fmt.Errorf("--backoff-base must be positive and at most --backoff-cap"))
	}
	if err := pipeline.ValidateInstance(cfg.Instance); err != nil {
		fail(err)
	}
	electionID := "packline-manager.packline.dev"
	if cfg.Instance != "" {
		electionID = "packline-manager-" + cfg.Instance + ".packline.dev"
	}
	if err := wh.complete(); err != nil {
		fail(err)
	}
	var webhookServer webhook.Server
	if wh.Enabled {
		if webhookServer, err = wh.server(); err != nil {
			fail(err)
		}
		if wh.InsecureSkipClientVerify {
			ctrl.Log.Info("WARNING: the webhook server takes clients without a certificate (--webhook-insecure-skip-client-verify): anyone who reaches its port can get a requester seal for any user")
		}
	}

	restCfg := ctrl.GetConfigOrDie()
	cacheOpts, err := controllers.CacheOptions(cfg, restCfg)
	if err != nil {
		fail(err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  controllers.NewScheme(),
		Cache:                   cacheOpts,
		Metrics:                 metricsOptions(metricsAddr, *metricsSecure, *metricsCertDir),
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        electionID,
		LeaderElectionNamespace: leaderElectionNS,
		// A crashed leader's Lease is released on exit so a standby takes
		// over in seconds rather than a full lease duration.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhookServer,
	})
	if err != nil {
		fail(err)
	}
	var setupOpts []controllers.Option
	if insecureRefs {
		ctrl.Log.Info("WARNING: resources without a verified requester seal may name any Secret, PVC or Artifact of their namespace (--insecure-unverified-references)")
		setupOpts = append(setupOpts, controllers.WithUnverifiedReferences())
	}
	certDirSet := false
	flag.Visit(func(f *flag.Flag) { certDirSet = certDirSet || f.Name == "webhook-cert-dir" })
	if wh.Enabled || certDirSet {
		// The controllers trust only requesters the webhook sealed, with a
		// key derived from the same certificate folder (a manager without
		// webhooks, another --instance, verifies with the folder of the
		// one that serves them), and only while the webhook
		// configurations send every write through the webhooks.
		guard := &admission.ConfigGuard{Reader: mgr.GetAPIReader(), CertDir: wh.CertDir,
			MutatingName: wh.MutatingName, ValidatingName: wh.ValidatingName}
		if err := mgr.Add(guard); err != nil {
			fail(err)
		}
		setupOpts = append(setupOpts, controllers.WithRequesterSealer(entitlement.NewCertDirSealer(wh.CertDir).WithTrust(guard.Err)))
	}
	readyz := healthz.Ping
	if wh.Enabled {
		if readyz, err = setupWebhooks(mgr, wh, admission.Setup); err != nil {
			fail(err)
		}
	}
	if err := controllers.Setup(mgr, cfg, setupOpts...); err != nil {
		fail(err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		fail(err)
	}
	if err := mgr.AddReadyzCheck("readyz", readyz); err != nil {
		fail(err)
	}
	ctrl.Log.Info("starting packline manager", "workerImage", cfg.WorkerImage, "instance", cfg.Instance)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "packline manager:", err)
	os.Exit(1)
}

// quantityFlag is a resource.Quantity flag.
type quantityFlag struct{ q *resource.Quantity }

func (f quantityFlag) String() string {
	if f.q == nil {
		return ""
	}
	return f.q.String()
}

func (f quantityFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return err
	}
	*f.q = q
	return nil
}
