package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// scope carries what one reconcile loaded and decided.
type scope struct {
	obj    Object
	owner  Owner
	status *v1alpha1.PipelineStatus
	// before is the status as loaded, for the patch and the phase event.
	before  *v1alpha1.PipelineStatus
	base    client.Object
	work    Work
	blocked *Blocked
	// jobs of the current run, by attempt; stale holds the others, in any
	// namespace (see loadJobs).
	jobs  map[int32]*batchv1.Job
	stale []batchv1.Job
	// staleWorkspaces are workspace PVCs outside the run's namespace.
	staleWorkspaces []corev1.PersistentVolumeClaim
	// job is the current attempt's Job, once ensured.
	job *batchv1.Job
	// verifyJob is the newest periodic verification Job of the run.
	verifyJob *batchv1.Job
	// resolveJobs read dispatched attempts' results from the registry.
	resolveJobs []*batchv1.Job
	// stop ends the step list early (nothing more to do this reconcile).
	stop bool
	// resolved: the attempt's result was read back from the registry (see
	// resultFromRegistry), not from the worker's pod; it is not sealed.
	resolved bool
}

// namespace is where this run's Job and workspace live: the Work's
// namespace (a private template's Claims render in the template namespace),
// else the owner's.
func (s *scope) namespace() string {
	if s.work.Namespace != "" {
		return s.work.Namespace
	}
	return s.owner.Namespace
}

// remote reports whether the run's children live outside the owner's namespace.
func (s *scope) remote() bool { return s.namespace() != s.owner.Namespace }

// ours reports whether a child object found by the owner-uid label was made
// for this owner (see OwnsWorkspace): in its namespace, with a controller
// reference to the owner's UID; elsewhere, labelled with the owner's UID
// and namespace. A tenant can label an object of its own namespace with any
// uid; such an object is neither adopted, nor read, nor deleted.
func (s *scope) ours(o metav1.Object) bool {
	return ownsChild(s.owner, o)
}

func (p *Pipeline) newScope(obj Object) (*scope, error) {
	gvk, err := p.Client.GroupVersionKindFor(obj)
	if err != nil {
		return nil, err
	}
	return &scope{
		obj:    obj,
		owner:  Owner{GVK: gvk, Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: string(obj.GetUID()), Instance: p.Config.Instance},
		status: obj.GetPipelineStatus(),
		before: obj.GetPipelineStatus().DeepCopy(),
		base:   obj.DeepCopyObject().(client.Object),
	}, nil
}

// startRun resets status when the generation or the effective inputs
// changed, from any phase: Succeeded and Failed included.
func (p *Pipeline) startRun(_ context.Context, s *scope) (ctrl.Result, error) {
	st := s.status
	requested := s.obj.GetAnnotations()[v1alpha1.AnnotationRequestedAt]
	rerun := requested != "" && requested != st.LastHandledRequestedAt
	if st.ObservedGeneration == s.obj.GetGeneration() && st.InputsHash == s.work.InputsHash && st.Phase != "" {
		if rerun {
			st.LastHandledRequestedAt = requested
			p.enact(s, Transition(s.run(), RerunRequested(requested), p.retryPolicy(p.runSpec(s))))
		}
		return ctrl.Result{}, nil
	}
	*st = v1alpha1.PipelineStatus{
		ObservedGeneration:     s.obj.GetGeneration(),
		InputsHash:             s.work.InputsHash,
		Phase:                  v1alpha1.PhasePending,
		Conditions:             st.Conditions,
		LastHandledRequestedAt: requested,
	}
	clearSigned(st)
	return ctrl.Result{}, nil
}

// loadJobs lists the owner's Jobs and splits current from stale. It looks
// in every namespace (the cache holds packline's Jobs cluster-wide, indexed
// by owner, see IndexOwnerUID): when a
// template turns private or public, the Jobs of the earlier runs are in the
// other namespace, and they are stale too.
func (p *Pipeline) loadJobs(ctx context.Context, s *scope) (ctrl.Result, error) {
	var list batchv1.JobList
	if err := p.Client.List(ctx, &list, client.MatchingFields{IndexOwnerUID: s.owner.UID}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing Jobs: %w", err)
	}
	s.jobs = map[int32]*batchv1.Job{}
	gen := strconv.FormatInt(s.obj.GetGeneration(), 10)
	for i := range list.Items {
		j := &list.Items[i]
		if !s.ours(j) {
			continue
		}
		if isResolveJob(j) {
			if s.blocked == nil && j.Labels[LabelInputs] == resolveInputs(s.work.InputsHash) && j.Labels[LabelGeneration] == gen {
				s.resolveJobs = append(s.resolveJobs, j)
			} else {
				s.stale = append(s.stale, *j)
			}
			continue
		}
		if isVerifyJob(j) && s.blocked == nil && j.Labels[LabelInputs] == verifyInputs(s.status.InputsHash) && j.Labels[LabelGeneration] == gen {
			// The current run's periodic verifications: keep the newest.
			if s.verifyJob == nil || attemptOf(j) > attemptOf(s.verifyJob) {
				s.verifyJob = j
			}
			continue
		}
		if j.Namespace != s.namespace() || j.Labels[LabelGeneration] != gen || j.Labels[LabelInputs] != s.work.InputsHash || s.blocked != nil {
			s.stale = append(s.stale, *j)
			continue
		}
		if a, err := strconv.Atoi(j.Labels[LabelAttempt]); err == nil {
			s.jobs[int32(a)] = j
		}
	}
	return ctrl.Result{}, nil
}

// deleteStaleJobs removes Jobs of older generations or inputs, so a spec
// edit stops the superseded run at once.
func (p *Pipeline) deleteStaleJobs(ctx context.Context, s *scope) (ctrl.Result, error) {
	for i := range s.stale {
		j := &s.stale[i]
		if !j.DeletionTimestamp.IsZero() {
			continue
		}
		err := p.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("deleting superseded Job %s: %w", j.Name, err)
		}
		logf.FromContext(ctx).Info("deleted superseded Job", "job", j.Name)
	}
	return ctrl.Result{}, nil
}

// reportBlocked turns a kind's *Blocked into status, and runs nothing.
func (p *Pipeline) reportBlocked(_ context.Context, s *scope) (ctrl.Result, error) {
	if s.blocked == nil {
		return ctrl.Result{}, nil
	}
	b := s.blocked
	if b.Permanent {
		return ctrl.Result{}, &Stalling{Reason: b.Reason, Message: b.Message, RetryAfter: b.RetryAfter}
	}
	return ctrl.Result{}, &Waiting{Reason: b.Reason, Message: b.Message, RetryAfter: b.RetryAfter}
}

// workspaceParams: spec.workspace (bounded, see runSpec), over the kind's
// defaults (a profile's).
func (p *Pipeline) workspaceParams(s *scope) WorkspaceParams {
	ws := p.runSpec(s).Workspace
	params := s.work.WorkspaceDefaults
	params.Owner, params.Namespace = s.owner, s.namespace()
	if ws != nil && ws.Size != nil {
		params.Size = ws.Size
	}
	if ws != nil && ws.StorageClassName != nil {
		params.StorageClass = ws.StorageClassName
	}
	return params
}

// ensureJob makes sure the current attempt's Job exists, waiting out the
// retry backoff first. It never edits an existing Job.
func (p *Pipeline) ensureJob(ctx context.Context, s *scope) (ctrl.Result, error) {
	st := s.status
	if st.Phase == v1alpha1.PhaseSucceeded || st.Phase == v1alpha1.PhaseFailed {
		s.stop = true
		return ctrl.Result{}, nil
	}
	attempt := max(st.Attempts, highestAttempt(s.jobs))
	if st.Phase == v1alpha1.PhaseRetrying && attempt == st.Attempts {
		if st.NextAttemptTime != nil {
			if wait := Until(p.now(), st.NextAttemptTime.Time); wait > 0 {
				s.stop = true
				return ctrl.Result{RequeueAfter: wait}, nil
			}
		}
		attempt++
	}
	if attempt == 0 {
		attempt = 1
	}
	job := s.jobs[attempt]
	if job == nil {
		if missing, err := p.workerServiceAccountMissing(ctx, s.namespace()); err != nil || missing != "" {
			if missing != "" {
				// Without this check the Job controller could not create the
				// pod, and the run would sit silently until its deadline.
				return ctrl.Result{}, &Waiting{Reason: ReasonServiceAccountMissing, Message: missing, RetryAfter: p.Config.BackoffBase}
			}
			return ctrl.Result{}, err
		}
		var err error
		if job, err = p.createJob(ctx, s, attempt); errors.Is(err, errPredecessorJob) {
			return ctrl.Result{}, &Waiting{Reason: ReasonWaitingForPod, Message: err.Error(), RetryAfter: p.Config.BackoffBase}
		} else if err != nil {
			return ctrl.Result{}, err
		}
	}
	s.job = job
	if st.Attempts != attempt {
		p.enact(s, Transition(s.run(), AttemptStarted(attempt), p.retryPolicy(p.runSpec(s))))
	}
	st.JobRef = &corev1.LocalObjectReference{Name: job.Name}
	st.Tag = s.work.Tag
	if st.StartTime == nil {
		st.StartTime = &metav1.Time{Time: p.now()}
	}
	return ctrl.Result{}, nil
}

// workerServiceAccountMissing explains why worker pods could not start when
// --worker-service-account names an account the namespace lacks.
func (p *Pipeline) workerServiceAccountMissing(ctx context.Context, ns string) (string, error) {
	name := p.Config.WorkerServiceAccount
	if name == "" {
		return "", nil
	}
	err := p.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ServiceAccount{})
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("ServiceAccount %q (the manager's --worker-service-account) does not exist in namespace %s: "+
			"create it (kubectl -n %s create serviceaccount %s) or unset the flag", name, ns, ns, name), nil
	}
	return "", err
}

func (p *Pipeline) createJob(ctx context.Context, s *scope, attempt int32) (*batchv1.Job, error) {
	doc, err := workerv1.EncodeSpec(s.work.Spec)
	if err != nil {
		return nil, fmt.Errorf("encoding worker spec: %w", err)
	}
	pushed, err := p.pushedEarlier(ctx, s, attempt)
	if err != nil {
		return nil, err
	}
	ps := p.runSpec(s)
	timeout := p.Config.DefaultTimeout
	if ps.Timeout != nil {
		timeout = ps.Timeout.Duration
	}
	job := p.Config.NewJob(JobRun, JobParams{
		Owner: s.owner, Namespace: s.namespace(), Generation: s.obj.GetGeneration(), Attempt: attempt, InputsHash: s.work.InputsHash,
		Command: s.work.Command, SpecJSON: doc,
		Env: s.work.Mounts.Env, Volumes: s.work.Mounts.Volumes, Mounts: s.work.Mounts.Mounts,
		Timeout: timeout, QueueName: ps.QueueName, PriorityClass: ps.WorkloadPriorityClassName,
		WorkspaceSize:       workspaceSize(p.workspaceParams(s)),
		Pushed:              pushed,
		DispatchedWorkspace: ptr.To(p.workspaceParams(s)),
	}, s.work.Resources, ps.Resources)
	err = p.Client.Create(ctx, job)
	if apierrors.IsAlreadyExists(err) {
		// The cache lagged behind a Job we (or a previous manager) made.
		found := &batchv1.Job{}
		if err := p.APIReader.Get(ctx, client.ObjectKeyFromObject(job), found); err != nil {
			return nil, fmt.Errorf("reading existing Job %s: %w", job.Name, err)
		}
		if uid := found.Labels[LabelOwnerUID]; uid != s.owner.UID {
			// A deleted and re-created resource of the same name: the Job
			// is its predecessor's, which the garbage collector is
			// removing. Adopting it would report the old run as this one's.
			return nil, fmt.Errorf("%w: Job %s belongs to an earlier %s of the same name (uid %s); waiting for it to be garbage-collected",
				errPredecessorJob, job.Name, s.owner.GVK.Kind, uid)
		}
		if !s.ours(found) {
			// A look-alike: the owner's labels, not its controller
			// reference. Its pods' results are never read.
			return nil, fmt.Errorf("%w: Job %s/%s carries this %s's labels but was not made for it (no controller reference to it): packline neither adopts nor deletes it; delete it",
				errPredecessorJob, found.Namespace, found.Name, s.owner.GVK.Kind)
		}
		return found, p.takeOver(ctx, found)
	}
	if err != nil {
		return nil, &StepError{Reason: ReasonJobRejected, Err: fmt.Errorf("creating Job %s/%s: %w", job.Namespace, job.Name, err)}
	}
	logf.FromContext(ctx).Info("created Job", "job", job.Name, "attempt", attempt)
	return job, nil
}

// errPredecessorJob: the Job's name is taken by a deleted predecessor's Job.
var errPredecessorJob = errors.New("predecessor's Job")

// observe reads the Job and its pods and moves the phase.
func (p *Pipeline) observe(ctx context.Context, s *scope) (ctrl.Result, error) {
	pods, err := JobPods(ctx, p.Client, s.job)
	if err != nil {
		return ctrl.Result{}, err
	}
	o, poll, err := observePods(ctx, p.APIReader, s.job, pods)
	if err != nil {
		return ctrl.Result{}, err
	}
	if o.State == StateQueued && s.job.Labels[QueueLabel] != "" {
		wl, err := p.workloadOf(ctx, s.job)
		if err != nil {
			return ctrl.Result{}, err
		}
		o = QueuedBy(o, wl)
	}
	if o.Reason == ReasonResultNotMirrored {
		s.resolved = true
		if o, err = p.resultFromRegistry(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	res := p.apply(s, o)
	res = lowestRequeue(res, ctrl.Result{RequeueAfter: poll})
	res = lowestRequeue(res, ctrl.Result{RequeueAfter: p.refreshProgress(ctx, s, pods, o)})
	return res, nil
}

// apply moves status according to an observation.
func (p *Pipeline) apply(s *scope, o Observation) ctrl.Result {
	// Hints name what the user must fix (the Secret behind a 401, or the
	// one a pod cannot start without), which neither the worker nor the
	// kubelet knows.
	if hint := s.work.Hints[o.Reason]; hint != "" && o.State != StateSucceeded {
		o.Message += ": " + hint
	}
	if hint := s.work.Mounts.MountHint(o); hint != "" && o.State == StatePending {
		if s.remote() && o.Reason == ReasonFailedMount {
			// The pod runs in the template namespace, with an admin's
			// Secrets: the kubelet's message would name them to the tenant.
			o.Message = fmt.Sprintf("volume %q cannot be mounted", blockedVolume(o, s.work.Mounts))
		}
		o.Message += ": " + hint
	}
	recordSigning(s.status, o)
	res := p.enact(s, Transition(s.run(), Observed(o), p.retryPolicy(p.runSpec(s))))
	p.sealPush(s, o)
	return res
}

// run is the state Transition reads.
func (s *scope) run() Run { return Run{Phase: s.status.Phase, Attempts: s.status.Attempts} }

// enact writes a transition into status.
func (p *Pipeline) enact(s *scope, next Next) ctrl.Result {
	st := s.status
	switch next.Action {
	case ActionNone:
		return ctrl.Result{}
	case ActionSucceed:
		r := next.Result
		st.Phase = next.Phase
		st.Digest, st.Reference, st.SourceRevision = r.Digest, r.Reference, r.SourceRevision
		st.ImageDigest, st.ImageReference = r.ImageDigest, r.ImageReference
		if r.Tag != "" {
			st.Tag = r.Tag
		}
		st.CompletionTime = &metav1.Time{Time: p.now()}
		setReady(st, next.Reason, next.Message)
		return ctrl.Result{}
	case ActionFail:
		st.Phase, st.NextAttemptTime = next.Phase, nil
		if st.CompletionTime == nil {
			st.CompletionTime = &metav1.Time{Time: p.now()}
		}
		setStalled(st, next.Reason, next.Message)
		return ctrl.Result{}
	case ActionRetry:
		st.Phase, st.CompletionTime = next.Phase, nil
		st.NextAttemptTime = &metav1.Time{Time: RetryAt(p.now(), next.Wait)}
		setProgress(st, next.Reason, next.Message)
		return ctrl.Result{RequeueAfter: next.Wait}
	case ActionStart:
		st.Phase, st.Attempts, st.NextAttemptTime = next.Phase, next.Attempt, nil
		return ctrl.Result{}
	case ActionStall:
		st.Phase = next.Phase
		setStalled(st, next.Reason, next.Message)
		return ctrl.Result{}
	}
	st.Phase = next.Phase
	setProgress(st, next.Reason, next.Message)
	return ctrl.Result{}
}

func highestAttempt(jobs map[int32]*batchv1.Job) int32 {
	var h int32
	for a := range jobs {
		h = max(h, a)
	}
	return h
}

// attemptOf is a Job's attempt label as a number (0 when absent).
func attemptOf(j *batchv1.Job) int {
	a, _ := strconv.Atoi(j.Labels[LabelAttempt])
	return a
}
