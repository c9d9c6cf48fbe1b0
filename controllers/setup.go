package controllers

import (
	"context"
	"reflect"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/internal/undecodable"
	"github.com/packline/packline/controllers/pipeline"
)

// NewScheme knows the built-in kinds and packline's.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	// Flux's kinds, for delivered Claims (controllers/delivery).
	_ = sourcev1.AddToScheme(s)
	_ = kustomizev1.AddToScheme(s)
	return s
}

// CacheOptions keep only packline's own Jobs, Pods and PVCs in memory, so
// the manager's footprint does not grow with the rest of the cluster.
//
// With several managers on one cluster (--instance), each caches only the
// Artifacts and Claims labelled for it, and the children it made.
//
// The label selectors filter server-side; the transforms then keep a stub
// of any child whose labels were merely copied, and trim every object to
// what the reconcilers read (see controllers/pipeline/cachetrim.go).
func CacheOptions(cfg pipeline.Config, rc *rest.Config) (cache.Options, error) {
	own := pipeline.OwnedSelector(cfg.Instance)
	mine := pipeline.InstanceSelector(cfg.Instance)
	job, pod, pvc := pipeline.ChildTransforms(cfg.TemplateNamespace)
	// One stored object that does not decode must not stop the cache of
	// its kind (see internal/undecodable); the guard applies the same selectors.
	guard, err := undecodable.NewGuard(rc, NewScheme(), map[reflect.Type]labels.Selector{
		reflect.TypeOf(&v1alpha1.Artifact{}): mine,
		reflect.TypeOf(&v1alpha1.Claim{}):    mine,
	})
	if err != nil {
		return cache.Options{}, err
	}
	return cache.Options{
		DefaultTransform: pipeline.TrimOwned,
		NewInformer:      guard.NewInformer,
		ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}:                  {Label: own, Transform: job},
			&corev1.Pod{}:                   {Label: own, Transform: pod},
			&corev1.PersistentVolumeClaim{}: {Label: own, Transform: pvc},
			&v1alpha1.Artifact{}:            {Label: mine},
			&v1alpha1.Claim{}:               {Label: mine},
		},
	}, nil
}

// Option changes what Setup wires.
type Option func(*setupOptions)

// setupOptions is what the Options set.
type setupOptions struct {
	seals sealCheck
	// entitlementCacheTTL overrides the checker's verdict cache; nil keeps
	// entitlement.DefaultCacheTTL.
	entitlementCacheTTL *time.Duration
}

// WithRequesterSealer lets the controllers trust the requester that the
// admission webhook recorded (see controllers/entitlement). Without it,
// Artifacts and Claims that name a Secret, a PVC or an Artifact, and
// Claims of templates that restrict who may claim them, do not run.
// Its key also seals the pushes recorded in status (status.pushSeal), so
// that they survive a restart and a change of leader.
func WithRequesterSealer(s *entitlement.Sealer) Option {
	return func(o *setupOptions) { o.seals.Sealer = s }
}

// WithEntitlementCacheTTL sets how long the controllers keep a
// SubjectAccessReview's verdict (entitlement.DefaultCacheTTL by default);
// tests that revoke a right use 0.
func WithEntitlementCacheTTL(d time.Duration) Option {
	return func(o *setupOptions) { o.entitlementCacheTTL = &d }
}

// WithUnverifiedReferences lets Artifacts and Claims without a verified
// seal name Secrets, PVCs and Artifacts, unchecked: for a cluster without
// tenants (--insecure-unverified-references). Template restrictions
// (spec.access) are still enforced.
func WithUnverifiedReferences() Option {
	return func(o *setupOptions) { o.seals.TrustUnsealed = true }
}

// The manager's metrics server reviews each scraper's token (cmd/manager's
// metricsOptions); the marker is here because RBAC is generated from
// ./controllers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// Setup registers every reconciler with mgr.
func Setup(mgr ctrl.Manager, cfg pipeline.Config, opts ...Option) error {
	if err := pipeline.IndexChildren(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	var o setupOptions
	for _, opt := range opts {
		opt(&o)
	}
	seals := o.seals
	// Push seals need a key only the manager holds: the webhook's, shared
	// by every replica, else one of this process (see NewEphemeralSealer).
	var pushSealer pipeline.PushSealer = entitlement.NewEphemeralSealer()
	if seals.Sealer != nil {
		pushSealer = seals.Sealer
	}
	// One progress reader for both kinds: its bounds are the manager's.
	var progress *pipeline.ProgressReader
	if cfg.ProgressInterval > 0 {
		cs, err := kubernetes.NewForConfig(mgr.GetConfig())
		if err != nil {
			return err
		}
		progress = pipeline.NewProgressReader(pipeline.PodLogs{Client: cs}, cfg.ProgressInterval, cfg.ProgressQPS, cfg.ProgressConcurrency)
	}
	newPipeline := func(kind string) *pipeline.Pipeline {
		return &pipeline.Pipeline{
			Client:     mgr.GetClient(),
			APIReader:  mgr.GetAPIReader(),
			Recorder:   mgr.GetEventRecorder("packline-" + kind),
			Config:     cfg,
			Kind:       kind,
			PushSealer: pushSealer,
			Progress:   progress,
		}
	}
	checker, err := entitlement.NewChecker(mgr.GetConfig(), mgr.GetRESTMapper(), mgr.GetScheme())
	if err != nil {
		return err
	}
	if o.entitlementCacheTTL != nil {
		checker.CacheTTL = *o.entitlementCacheTTL
	}
	if err := (&ArtifactReconciler{Client: mgr.GetClient(), Pipeline: newPipeline("Artifact"), seals: seals, Checker: checker}).SetupWithManager(mgr); err != nil {
		return err
	}
	claims := &ClaimReconciler{Client: mgr.GetClient(), Pipeline: newPipeline("Claim"), Checker: checker, seals: seals}
	if err := claims.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&pipeline.InstancePublisher{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Namespace: pipeline.ManagerNamespace(), Instance: cfg.Instance}); err != nil {
		return err
	}
	if cfg.Instance != "" {
		return nil
	}
	if err := (&EnvironmentProfileReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	tr := &ClaimTemplateReconciler{Client: mgr.GetClient(), Mapper: mgr.GetRESTMapper()}
	if cfg.TemplateCheck {
		tr.Checker = &TemplateChecker{Client: mgr.GetClient(), Config: cfg}
	}
	return tr.SetupWithManager(mgr)
}
