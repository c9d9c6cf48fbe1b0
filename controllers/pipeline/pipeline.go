// Package pipeline is the kind-agnostic run engine shared by the Artifact
// and Claim reconcilers: workspace PVC, one Job per (generation, inputs,
// attempt), observation, retries with backoff, stale-Job cleanup, and a
// single status patch at the end of each reconcile.
package pipeline

import (
	"context"
	"errors"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// Config is the manager-wide pipeline configuration (manager flags).
type Config struct {
	// WorkerImage runs every Job.
	WorkerImage string
	// DefaultRetryLimit applies when spec.retryLimit is unset.
	DefaultRetryLimit int32
	// BackoffBase doubles per attempt up to BackoffCap.
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// DefaultTimeout applies when spec.timeout is unset.
	DefaultTimeout time.Duration
	// JobTTL is the Jobs' ttlSecondsAfterFinished.
	JobTTL time.Duration
	// CleanupGiveUp is how long a deleted resource waits for a cleanup pod
	// that cannot start (missing Secret, image, node) before it is let go.
	CleanupGiveUp time.Duration
	// WorkerServiceAccount runs the worker pods; its token is never mounted.
	WorkerServiceAccount string
	// WorkerResources are the worker container's default requests and
	// limits; an EnvironmentProfile's workerResources and spec.resources
	// override them per resource name.
	WorkerResources corev1.ResourceRequirements
	// WorkerTmpSize bounds the worker's writable /tmp (an emptyDir).
	WorkerTmpSize resource.Quantity
	// MaxConcurrentReconciles per kind. Reconciles of distinct objects are
	// independent (one object is never reconciled twice at once), and most
	// of their time is apiserver round trips.
	MaxConcurrentReconciles int
	// TemplateNamespace (--template-namespace) holds the credential Secrets
	// of private ClaimTemplates, and the render Jobs and workspaces of their
	// Claims, so that nothing in a tenant's namespace can expose them.
	TemplateNamespace string
	// Instance (--instance) is this manager's name among several on one
	// cluster; see LabelInstance. Empty is the default instance.
	Instance string
	// JobManagedBy (--job-managed-by) is set as spec.managedBy on queued
	// Jobs: kueue.x-k8s.io/multikueue dispatches them to a worker cluster.
	JobManagedBy string
	// TemplateCheck (--template-check) renders every valid ClaimTemplate
	// once per generation in TemplateNamespace, before Claims rely on it.
	TemplateCheck bool
	// ProgressInterval (--progress-interval) is the least time between two
	// reads of one running worker's progress; 0 reads none. ProgressQPS
	// and ProgressConcurrency bound the reads of the whole manager.
	ProgressInterval    time.Duration
	ProgressQPS         float32
	ProgressConcurrency int
	// Now is the manager's clock; nil is time.Now. Tests step it through a
	// retry backoff, so that they see each Retrying phase for certain.
	Now func() time.Time
}

// DefaultTemplateNamespace is the manager's own namespace ($POD_NAMESPACE),
// else "packline-system".
func DefaultTemplateNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "packline-system"
}

// DefaultConfig holds the documented defaults.
func DefaultConfig() Config {
	return Config{
		WorkerImage:       "ghcr.io/packline/worker:latest",
		DefaultRetryLimit: 3,
		BackoffBase:       10 * time.Second,
		BackoffCap:        5 * time.Minute,
		DefaultTimeout:    6 * time.Hour,
		JobTTL:            time.Hour,
		CleanupGiveUp:     3 * time.Minute,
		// Streaming pack-and-push needs little memory whatever the model's
		// size; no CPU limit, so hashing is not throttled.
		WorkerResources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
		},
		WorkerTmpSize: resource.MustParse("1Gi"),

		MaxConcurrentReconciles: 4,
		TemplateNamespace:       DefaultTemplateNamespace(),
		TemplateCheck:           true,

		ProgressInterval:    DefaultProgressInterval,
		ProgressQPS:         DefaultProgressQPS,
		ProgressConcurrency: DefaultProgressConcurrency,
	}
}

// Object is a resource the pipeline can drive.
type Object interface {
	client.Object
	GetPipelineSpec() *v1alpha1.PipelineSpec
	GetPipelineStatus() *v1alpha1.PipelineStatus
}

// ExtraStatus is an Object whose status holds more than PipelineStatus
// (a Claim's delivery): finish patches it when that part changed too.
type ExtraStatus interface {
	GetExtraStatus() any
}

// Work is what a kind's reconciler asks the pipeline to run.
type Work struct {
	// Command is the worker subcommand.
	Command string
	// Spec is encoded into the worker's PACKLINE_SPEC; no secrets.
	Spec any
	// Mounts carry credentials by reference.
	Mounts Mounts
	// InputsHash identifies the effective inputs; a change starts a new run
	// even without a new generation (for example, a Claim's template moved).
	InputsHash string
	// Tag is the pushed tag, reported in status.
	Tag string
	// WorkspaceDefaults fill in what spec.workspace leaves unset.
	WorkspaceDefaults WorkspaceParams
	// Resources (an EnvironmentProfile's workerResources) override the
	// manager's worker defaults; spec.resources overrides both.
	Resources *corev1.ResourceRequirements
	// Hints, by failure reason, are appended to the failure message: they
	// name what the user must fix (for example the Secret behind a 401),
	// which the worker cannot know.
	Hints map[string]string
	// After is the kind's own last step (a Claim's delivery), run after the
	// run's steps when nothing blocked the run. It may change the object's
	// status; finish patches it with the rest (see ExtraStatus).
	After func(ctx context.Context) (ctrl.Result, error)
	// Namespace runs the Job and holds the workspace; empty means the
	// owner's. Elsewhere, children carry no owner reference (it cannot
	// cross namespaces) but the owner-namespace label, and RemoteFinalizer
	// deletes them with the owner.
	Namespace string
}

// Blocked is returned by a kind's prepare step when no Job can run yet.
type Blocked struct {
	Reason  string
	Message string
	// Permanent marks input the user must fix (Stalled); otherwise the
	// resource waits (for example, for its template to appear).
	Permanent bool
	// InputsHash identifies what was checked, so that fixing it starts a new run.
	InputsHash string
	// RetryAfter, when set, checks again after this long: for a cause no
	// watch sees fixed (for example an RBAC grant).
	RetryAfter time.Duration
}

func (b *Blocked) Error() string { return b.Reason + ": " + b.Message }

// PrepareFunc loads what a kind needs and returns the Work, or *Blocked.
type PrepareFunc func(ctx context.Context) (Work, error)

// Pipeline runs the shared reconcile steps.
type Pipeline struct {
	Client client.Client
	// APIReader reads past the cache: a Job that the cache has not seen yet
	// must still be found after AlreadyExists.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Config    Config
	// Kind labels metrics and child objects ("Artifact", "Claim").
	Kind string
	// PushSealer seals the pushes the manager records in status, so that a
	// later run trusts only those (see SealedReference); nil trusts none.
	PushSealer PushSealer
	// CleanupPlacement, when set, places deletionPolicy Delete's cleanup
	// Jobs; by default they run in the owner's namespace with its target.
	CleanupPlacement CleanupPlacement
	// Workloads reads Kueue's Workloads (the cache), when the cluster
	// serves them; nil without Kueue.
	Workloads client.Reader

	// Progress reads running workers' progress into status.progress
	// (progress.go); nil shows none.
	Progress *ProgressReader

	// patched detects a cache that has not caught up with the last status
	// patch (see stale.go).
	patched patched
}

// Reconcile runs the steps in order and patches status once, at the end.
func (p *Pipeline) Reconcile(ctx context.Context, obj Object, prepare PrepareFunc) (res ctrl.Result, retErr error) {
	if !obj.GetDeletionTimestamp().IsZero() {
		return p.ReconcileDelete(ctx, obj)
	}
	if p.patched.behind(obj) {
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	s, err := p.newScope(obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := p.finish(ctx, s); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	work, err := prepare(ctx)
	if err == nil {
		err = checkSpecSize(work)
	}
	var blocked *Blocked
	switch {
	case errors.As(err, &blocked):
		s.blocked = blocked
		s.work.InputsHash = blocked.InputsHash
	case err != nil:
		return ctrl.Result{}, err
	default:
		s.work = work
	}

	steps := []func(context.Context, *scope) (ctrl.Result, error){
		p.syncFinalizer,
		p.syncRemoteFinalizer,
		p.startRun,
		p.loadJobs,
		p.loadWorkspaces,
		p.deleteStaleJobs,
		p.deleteStaleWorkspaces,
		p.reportBlocked,
		p.verifyPushed,
		p.ensureWorkspace,
		p.ensureJob,
		p.observe,
	}
	for _, step := range steps {
		r, err := step(ctx, s)
		if held, ok := p.hold(s, err); ok {
			res = lowestRequeue(res, held)
			break
		}
		if err != nil {
			// The error also reaches the resource (patched in finish), so
			// a user sees what the API server refused without the logs.
			p.reportStepError(s, err)
			return ctrl.Result{}, err
		}
		res = lowestRequeue(res, r)
		if s.stop {
			break
		}
	}
	if s.blocked == nil {
		if err := p.releaseWorkspace(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		if s.work.After != nil {
			r, err := s.work.After(ctx)
			if err != nil {
				p.reportStepError(s, err)
				return ctrl.Result{}, err
			}
			res = lowestRequeue(res, r)
		}
	}
	return res, nil
}

// lowestRequeue keeps the soonest requeue of two step results.
func lowestRequeue(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0:
		return a
	case b.RequeueAfter < a.RequeueAfter:
		return b
	}
	return a
}

func (p *Pipeline) now() time.Time {
	if p.Config.Now != nil {
		return p.Config.Now()
	}
	return time.Now()
}
