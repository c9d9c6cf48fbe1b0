package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/pipeline"
)

// Reasons of a ClaimTemplate's Ready condition while and after its check.
const (
	// ReasonChecking: the check render is queued or running.
	ReasonChecking = "Checking"
	// ReasonCheckValuesInvalid: the schema's defaults and examples do not
	// make values the schema accepts, so no check can render.
	ReasonCheckValuesInvalid = "CheckValuesInvalid"
	// ReasonTemplateNotReady: a Claim waits for its template's check.
	ReasonTemplateNotReady = "TemplateNotReady"
)

// checkClaimName names the Claim a check renders as (the rendered objects'
// default names and namespace come from it).
const checkClaimName = "template-check"

// TemplateChecker runs a ClaimTemplate's check render: the same worker
// command and steps a Claim's render runs, in the template namespace,
// pushing nothing. An admin then sees a wrong ref, path or kind on the
// template, not on the first user's Claim.
type TemplateChecker struct {
	Client client.Client
	Config pipeline.Config
	Now    func() time.Time
}

// check moves the template's check one step and returns its Ready
// condition; the template's status.check is updated on success.
func (k *TemplateChecker) check(ctx context.Context, tpl *v1alpha1.ClaimTemplate) (metav1.Condition, ctrl.Result, error) {
	cond := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: tpl.Generation}
	}
	hash := checkHash(tpl)
	if c := tpl.Status.Check; c != nil && c.ObservedGeneration == tpl.Generation && c.InputsHash == hash {
		return cond(metav1.ConditionTrue, "Valid", checkedMessage(c)), ctrl.Result{}, nil
	}
	doc, err := checkSpec(tpl, k.Config.TemplateNamespace)
	if err != nil {
		return cond(metav1.ConditionFalse, ReasonCheckValuesInvalid, err.Error()), ctrl.Result{}, nil
	}
	jobs, err := k.jobs(ctx, tpl)
	if err != nil {
		return metav1.Condition{}, ctrl.Result{}, err
	}
	attempt, job := int32(0), (*batchv1.Job)(nil)
	for i := range jobs {
		j := &jobs[i]
		if j.Labels[pipeline.LabelInputs] != hash || j.Labels[pipeline.LabelGeneration] != strconv.FormatInt(tpl.Generation, 10) {
			// A check of an earlier version: its verdict no longer counts.
			if err := k.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return metav1.Condition{}, ctrl.Result{}, err
			}
			continue
		}
		if a, _ := strconv.Atoi(j.Labels[pipeline.LabelAttempt]); int32(a) > attempt {
			attempt, job = int32(a), j
		}
	}
	if job == nil {
		name, err := k.start(ctx, tpl, doc, hash, 1)
		if err != nil {
			// Not the template's fault (a missing namespace, a quota):
			// Unknown, so its Claims do not wait on it.
			return cond(metav1.ConditionUnknown, pipeline.ReasonJobRejected, err.Error()), ctrl.Result{RequeueAfter: k.Config.BackoffCap}, nil
		}
		return cond(metav1.ConditionUnknown, ReasonChecking, "check render Job "+name+" started"), ctrl.Result{}, nil
	}
	o, _, err := pipeline.ObserveJob(ctx, k.Client, nil, job)
	if err != nil {
		return metav1.Condition{}, ctrl.Result{}, err
	}
	// The run's state machine and retry clock: a check keeps no phase, its
	// state is its Jobs, and its backoff counts from the Job's failure.
	policy := pipeline.RetryPolicy{Limit: k.Config.DefaultRetryLimit, Base: k.Config.BackoffBase, Cap: k.Config.BackoffCap}
	next := pipeline.Transition(pipeline.Run{Attempts: attempt}, pipeline.Observed(o), policy)
	switch next.Action {
	case pipeline.ActionSucceed:
		tpl.Status.Check = &v1alpha1.TemplateCheck{ObservedGeneration: tpl.Generation, InputsHash: hash, ResolvedCommit: o.Result.SourceRevision,
			Kinds: o.Result.Kinds, JobRef: job.Namespace + "/" + job.Name, CompletionTime: &metav1.Time{Time: k.now()}}
		return cond(metav1.ConditionTrue, "Valid", checkedMessage(tpl.Status.Check)), ctrl.Result{}, nil
	case pipeline.ActionFail:
		return cond(metav1.ConditionFalse, o.Reason, "check render failed: "+o.Message), ctrl.Result{}, nil
	case pipeline.ActionRetry:
		at := pipeline.RetryAt(pipeline.FailedAt(job, job.CreationTimestamp.Time), next.Wait)
		if wait := pipeline.Until(k.now(), at); wait > 0 {
			return cond(metav1.ConditionUnknown, ReasonChecking, fmt.Sprintf("check attempt %d failed (%s: %s); retrying", attempt, o.Reason, o.Message)),
				ctrl.Result{RequeueAfter: wait}, nil
		}
		name, err := k.start(ctx, tpl, doc, hash, attempt+1)
		if err != nil {
			return metav1.Condition{}, ctrl.Result{}, err
		}
		return cond(metav1.ConditionUnknown, ReasonChecking, "check render Job "+name+" started"), ctrl.Result{}, nil
	}
	return cond(metav1.ConditionUnknown, ReasonChecking, fmt.Sprintf("check render Job %s: %s", job.Name, o.Message)), ctrl.Result{}, nil
}

func (k *TemplateChecker) jobs(ctx context.Context, tpl *v1alpha1.ClaimTemplate) ([]batchv1.Job, error) {
	var list batchv1.JobList
	if err := k.Client.List(ctx, &list, client.InNamespace(k.Config.TemplateNamespace),
		client.MatchingLabels{pipeline.LabelOwnerUID: string(tpl.UID)}); err != nil {
		return nil, err
	}
	var live []batchv1.Job
	for _, j := range list.Items {
		if j.DeletionTimestamp.IsZero() {
			live = append(live, j)
		}
	}
	return live, nil
}

// start creates the check Job for one attempt. Its workspace is an
// emptyDir (a check keeps nothing), and a private template's credentials
// are mounted exactly as for its Claims' renders.
func (k *TemplateChecker) start(ctx context.Context, tpl *v1alpha1.ClaimTemplate, doc workerv1.Claim, hash string, attempt int32) (string, error) {
	var m pipeline.Mounts
	if tpl.Spec.Private() {
		m.SecretKeys("template-auth", tpl.Spec.Source.SecretRef.Name, workerv1.TemplateAuthDir, pipeline.GitCredentialKeys...)
	}
	raw, err := workerv1.EncodeSpec(doc)
	if err != nil {
		return "", err
	}
	owner := pipeline.Owner{GVK: v1alpha1.GroupVersion.WithKind("ClaimTemplate"), Name: tpl.Name, UID: string(tpl.UID), Instance: k.Config.Instance}
	job := k.Config.NewJob(pipeline.JobTemplateCheck, pipeline.JobParams{
		Owner: owner, Namespace: k.Config.TemplateNamespace, Generation: tpl.Generation, Attempt: attempt, InputsHash: hash,
		SpecJSON: raw, Env: m.Env, Volumes: m.Volumes, Mounts: m.Mounts,
	})
	return job.Name, pipeline.CreateJob(ctx, k.Client, job)
}

func (k *TemplateChecker) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// checkHash identifies what a check rendered: the template spec and the
// re-run annotation, so that packline.dev/requestedAt checks again (for
// example after the branch moved).
func checkHash(tpl *v1alpha1.ClaimTemplate) string {
	b, _ := json.Marshal(tpl.Spec)
	return pipeline.InputsHash(b, []byte(tpl.Annotations[v1alpha1.AnnotationRequestedAt]))
}

func checkedMessage(c *v1alpha1.TemplateCheck) string {
	return fmt.Sprintf("check rendered %s at commit %s", strings.Join(c.Kinds, ", "), c.ResolvedCommit)
}

// checkSpec is the worker document of a check: the template as a Claim
// would render it with the schema's defaults (else first examples), the
// first exposure on offer and no profile.
func checkSpec(tpl *v1alpha1.ClaimTemplate, ns string) (workerv1.Claim, error) {
	values, err := checkValues(tpl)
	if err != nil {
		return workerv1.Claim{}, err
	}
	exposure := v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP}
	if len(tpl.Spec.Exposures) > 0 {
		exposure.Type = tpl.Spec.Exposures[0].Type
	}
	if exposure.Type == v1alpha1.ExposureIngress {
		exposure.Host = "template-check.example.com"
	}
	opt, err := claims.CheckExposure(tpl, exposure)
	if err != nil {
		return workerv1.Claim{}, err
	}
	t := *tpl.Spec.DeepCopy()
	t.Exposures = []v1alpha1.ExposureOption{opt}
	t.Parameters = checkParameters(t.Parameters)
	return workerv1.Claim{Name: checkClaimName, Namespace: ns, Template: t, Values: values, Exposure: exposure, Check: true}, nil
}

// checkParameters drops Artifact bindings: their value names an Artifact,
// which a check has none of to resolve, and the worker knows only the
// kinds a Claim's render resolves them to (claims.ResolveArtifacts). The
// check still renders every other binding.
func checkParameters(params []v1alpha1.ParameterBinding) []v1alpha1.ParameterBinding {
	var kept []v1alpha1.ParameterBinding
	for _, b := range params {
		if b.Kind != v1alpha1.BindingArtifact {
			kept = append(kept, b)
		}
	}
	return kept
}

// checkValues takes each top-level property's default, else its first
// example, and checks the result against the schema.
func checkValues(tpl *v1alpha1.ClaimTemplate) (*apiextensionsv1.JSON, error) {
	if tpl.Spec.ValuesSchema == nil {
		return nil, nil
	}
	var s struct {
		Properties map[string]struct {
			Default  json.RawMessage   `json:"default"`
			Examples []json.RawMessage `json:"examples"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(tpl.Spec.ValuesSchema.Raw, &s); err != nil {
		return nil, fmt.Errorf("spec.valuesSchema: %w", err)
	}
	values := map[string]json.RawMessage{}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := s.Properties[k]
		switch {
		case len(p.Default) > 0:
			values[k] = p.Default
		case len(p.Examples) > 0:
			values[k] = p.Examples[0]
		}
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return nil, err
	}
	v := &apiextensionsv1.JSON{Raw: raw}
	schema, err := claims.CompileSchema(tpl.Spec.ValuesSchema)
	if err != nil {
		return nil, err
	}
	if err := claims.ValidateValues(schema, v); err != nil {
		return nil, fmt.Errorf("the check renders with the values schema's defaults, else its first examples, and those are not valid (%v): give the properties it names a default or an example", err)
	}
	return v, nil
}

// templateNotReady is the reason a Claim waits for its template: the
// template's check (or validation) failed for its current generation.
func templateNotReady(tpl *v1alpha1.ClaimTemplate) *metav1.Condition {
	c := apimeta.FindStatusCondition(tpl.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != tpl.Generation {
		return nil
	}
	return c
}
