package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// The phases of a Claim's reconcile (Cluster API's *_controller_phases.go):
// what Reconcile hands the run engine as its prepare step.

// ClaimInputs is everything a Claim's render depends on besides itself.
type ClaimInputs struct {
	// Template is nil when the ClaimTemplate does not exist.
	Template        *v1alpha1.ClaimTemplate
	NamespaceLabels map[string]string
	Profiles        []v1alpha1.EnvironmentProfile
	// TemplateNamespace is where Claims of a private template render (the
	// manager's --template-namespace).
	TemplateNamespace string
	// Artifacts are the Artifacts the Claim's Artifact bindings name, by
	// name, from the Claim's namespace; a missing one is absent.
	Artifacts map[string]*v1alpha1.Artifact
	// WorkerImage is the manager's --worker-image: the init container of
	// a binding with mount InitPull runs it.
	WorkerImage string
}

func (r *ClaimReconciler) load(ctx context.Context, c *v1alpha1.Claim) (ClaimInputs, error) {
	in := ClaimInputs{TemplateNamespace: r.Pipeline.Config.TemplateNamespace, WorkerImage: r.Pipeline.Config.WorkerImage}
	tpl := &v1alpha1.ClaimTemplate{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: c.Spec.TemplateRef.Name}, tpl); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return in, err
	default:
		in.Template = tpl
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: c.Namespace}, ns); err != nil {
		return in, err
	}
	in.NamespaceLabels = ns.Labels
	if in.Template != nil {
		for _, name := range claims.BoundArtifacts(c, in.Template) {
			a := &v1alpha1.Artifact{}
			switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, a); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return in, err
			default:
				if in.Artifacts == nil {
					in.Artifacts = map[string]*v1alpha1.Artifact{}
				}
				in.Artifacts[name] = a
			}
		}
	}
	var profiles v1alpha1.EnvironmentProfileList
	if err := r.Client.List(ctx, &profiles); err != nil {
		return in, err
	}
	in.Profiles = profiles.Items
	return in, nil
}

// ClaimWork is the render job for a Claim, or *pipeline.Blocked saying
// what to fix. It is pure, so every rule is a table test.
func ClaimWork(c *v1alpha1.Claim, in ClaimInputs) (pipeline.Work, error) {
	tpl, profile, hash, err := claimReady(c, in)
	if err != nil {
		return pipeline.Work{}, err
	}
	adminRun, err := claimAllowed(c, tpl, profile, in, hash)
	if err != nil {
		return pipeline.Work{}, err
	}
	p := claimPlacement(c, tpl, in.TemplateNamespace, adminRun)
	doc, hash, err := claimDoc(c, tpl, in.Artifacts, p.target, hash)
	if err != nil {
		return pipeline.Work{}, err
	}
	doc.InitPull = claims.InitPullOf(c, tpl, in.Artifacts, in.WorkerImage)
	if doc.InitPull != nil {
		// The init container's image and each registry's transport are in
		// the render: a change of either renders again.
		b, err := json.Marshal(doc.InitPull)
		if err != nil {
			return pipeline.Work{}, err
		}
		hash = pipeline.InputsHash([]byte(hash), b)
	}
	doc.Signing = claimSigning(&p.mounts, c, tpl, profile, p.hints)
	ws, resources := profileWorkspace(profile)
	if profile != nil {
		doc.Profile = profile.Spec.DeepCopy()
	}
	return pipeline.Work{
		Command: "claim", Spec: doc, Mounts: p.mounts, InputsHash: hash, Tag: p.target.Tag,
		WorkspaceDefaults: ws, Hints: p.hints, Resources: resources, Namespace: p.ns,
	}, nil
}

// claimReady waits for what the Claim renders with: its template, ready,
// and a valid profile. It returns them and the Claim's inputs hash.
func claimReady(c *v1alpha1.Claim, in ClaimInputs) (*v1alpha1.ClaimTemplate, *v1alpha1.EnvironmentProfile, string, error) {
	tpl := in.Template
	if tpl == nil {
		return nil, nil, "", &pipeline.Blocked{Reason: ReasonTemplateNotFound,
			Message:    fmt.Sprintf("spec.templateRef: ClaimTemplate %q does not exist; waiting for it to be created", c.Spec.TemplateRef.Name),
			InputsHash: pipeline.InputsHash([]byte("no-template"), []byte(c.Spec.TemplateRef.Name))}
	}
	if cond := templateNotReady(tpl); cond != nil {
		// The template is invalid or its check failed: rendering this
		// Claim would fail the same way, or render what the admin did not
		// mean. The template watch brings the Claim back once it passes.
		return nil, nil, "", &pipeline.Blocked{Reason: ReasonTemplateNotReady,
			Message: fmt.Sprintf("spec.templateRef: ClaimTemplate %s is not ready (%s: %s); the Claim renders once a platform admin fixes it",
				tpl.Name, cond.Reason, cond.Message),
			InputsHash: pipeline.InputsHash([]byte("template-not-ready"), []byte(tpl.Name), []byte(cond.Reason), []byte(cond.Message))}
	}
	profile, err := claims.SelectProfile(in.Profiles, in.NamespaceLabels)
	var broken *claims.ProfileError
	if errors.As(err, &broken) {
		// The profile watch brings the Claim back once it is fixed.
		return nil, nil, "", &pipeline.Blocked{Reason: ReasonProfileInvalid, Message: err.Error(),
			InputsHash: pipeline.InputsHash([]byte("profile-invalid"), []byte(broken.Name))}
	}
	if err != nil {
		return nil, nil, "", err
	}
	hash, err := claimInputsHash(c, tpl, profile, claims.CheckAccess(tpl, c.Namespace, in.NamespaceLabels) == nil)
	return tpl, profile, hash, err
}

// claimAllowed checks the Claim against its template, profile and
// delivery; a refusal is permanent until those inputs change. adminRun
// says the render runs in the template namespace: the template is
// private, or the profile signs (its key lives there).
func claimAllowed(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, profile *v1alpha1.EnvironmentProfile, in ClaimInputs, hash string) (adminRun bool, err error) {
	blocked := func(reason string, err error) (bool, error) {
		return false, &pipeline.Blocked{Reason: reason, Message: err.Error(), Permanent: true, InputsHash: hash}
	}
	if v := claims.Violations(c, tpl, in.NamespaceLabels); len(v) > 0 {
		return blocked(v[0].Reason, v[0].Err)
	}
	signs := profileSigns(profile)
	if signs {
		if err := claims.ProfileSignedTarget(profile.Name, tpl, c); err != nil {
			return blocked(claims.ReasonTargetNotAllowed, err)
		}
	}
	adminRun = tpl.Spec.Private() || signs
	if adminRun && in.TemplateNamespace == "" {
		return blocked(claims.ReasonInvalidTemplate, fmt.Errorf("ClaimTemplate %s has spec.source.secretRef, or the EnvironmentProfile signs, but the manager has no --template-namespace to render it in", tpl.Name))
	}
	if _, err := delivery.Resolve(c, profileSpec(profile)); err != nil {
		reason := delivery.ReasonServiceAccountRequired
		var refusal *delivery.Refusal
		if errors.As(err, &refusal) {
			reason = refusal.Reason
		}
		return blocked(reason, err)
	}
	return adminRun, nil
}

// profileSigns says the profile signs every Claim it applies to: its key
// is in the template namespace, so the render goes there, as a private
// template's does.
func profileSigns(profile *v1alpha1.EnvironmentProfile) bool {
	return profile != nil && profile.Spec.Signing != nil
}

// placement is where a Claim's render runs and what it mounts and pushes
// to, with the hints its failures carry.
type placement struct {
	ns     string
	target workerv1.Target
	hints  map[string]string
	mounts pipeline.Mounts
}

// claimPlacement places the render: in the Claim's namespace with the
// tenant's Secrets, or (adminRun) in the template namespace with the
// template's, whose names the tenant is not told.
func claimPlacement(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, templateNS string, adminRun bool) placement {
	// Violations checked it.
	repo, _ := claims.TargetRepository(tpl, c)
	var p placement
	var t v1alpha1.Target
	if c.Spec.Target != nil {
		t = *c.Spec.Target
	}
	p.hints = targetHints(t)
	p.hints[workerv1.ReasonTemplateAuth] = fmt.Sprintf("the template repository needs credentials: a platform admin must put them in a Secret of the template namespace and name it in ClaimTemplate %s spec.source.secretRef", tpl.Name)
	if adminRun {
		// The render runs in the template namespace, where the template's
		// (and the profile's) Secrets are; see claims.PrivateTarget.
		p.ns = templateNS
		t.PushSecretRef = tpl.Spec.PushSecretRef
		// The transport of the admin's credential is the template's, never
		// the tenant's (claims.PrivateTarget refuses a weaker one).
		t.PlainHTTP, t.InsecureSkipTLSVerify = tpl.Spec.PushPlainHTTP, tpl.Spec.PushInsecureSkipTLSVerify
		p.hints = privateHints(tpl)
	}
	if tpl.Spec.Private() {
		// Only the credential keys, never the rest of the Secret. A
		// Secret volume whose items name a key the Secret lacks fails to
		// mount ("references non-existent secret key", kubelet's
		// pkg/volume/secret MakePayload) unless the volume is optional,
		// which skips missing keys; SecretKeys makes it optional, since a
		// credential uses only some of the keys.
		p.mounts.SecretKeys("template-auth", tpl.Spec.Source.SecretRef.Name, workerv1.TemplateAuthDir, pipeline.GitCredentialKeys...)
	}
	if adminRun {
		// In the template namespace: an admin fixes them, and the tenant is
		// not told the admin's Secret names.
		p.hints[pipeline.ReasonConfigError] = fmt.Sprintf("the render pod in the template namespace cannot start until the Secrets named in ClaimTemplate %s spec.source.secretRef and spec.pushSecretRef exist: a platform admin must create them; the run goes on by itself once they do", tpl.Name)
	} else {
		p.hints = configErrorHint(entitlement.SecretRights(c.Namespace, "spec.target", t.PushSecretRef, t.CASecretRef), p.hints)
	}
	p.hints[workerv1.ReasonUndeclaredKind] = fmt.Sprintf("only kinds declared in ClaimTemplate %s spec.kinds may be rendered", tpl.Name)
	p.target = p.mounts.Target(t, repo)
	if adminRun && t.PushSecretRef != nil {
		// The template's Secret, in the template namespace: named by the
		// template's field, never by its name (see privateHints).
		p.mounts.Source(pipeline.VolumePushAuth, fmt.Sprintf("the push Secret of ClaimTemplate %s spec.pushSecretRef in the template namespace (a platform admin must create it)", tpl.Name))
	}
	return p
}

// claimDoc is the worker's document: the template with the bound
// Artifacts' values and the chosen exposure only. A bound Artifact's
// digest is part of the returned inputs hash, so a new one renders again.
func claimDoc(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, artifacts map[string]*v1alpha1.Artifact, target workerv1.Target, hash string) (workerv1.Claim, string, error) {
	values, params, refs, err := claims.ResolveArtifacts(c, tpl, artifacts)
	var notReady *claims.ArtifactNotReady
	switch {
	case errors.As(err, &notReady):
		// The Artifact watch brings the Claim back when it is Ready.
		return workerv1.Claim{}, "", &pipeline.Blocked{Reason: ReasonArtifactNotReady, Message: err.Error(),
			InputsHash: pipeline.InputsHash([]byte(hash), []byte(err.Error()))}
	case err != nil:
		return workerv1.Claim{}, "", &pipeline.Blocked{Reason: claims.ReasonInvalidValues, Message: err.Error(), Permanent: true, InputsHash: hash}
	}
	if len(refs) > 0 {
		hash = pipeline.InputsHash([]byte(hash), []byte(strings.Join(refs, "\n")))
	}
	// Violations checked it.
	exposure, _ := claims.CheckExposure(tpl, c.Spec.Exposure)
	tplSpec := *tpl.Spec.DeepCopy()
	tplSpec.Parameters = params
	// The worker applies only the chosen exposure's component.
	tplSpec.Exposures = []v1alpha1.ExposureOption{exposure}
	return workerv1.Claim{Name: c.Name, Namespace: c.Namespace, Template: tplSpec, Values: values,
		Exposure: c.Spec.Exposure, Target: target}, hash, nil
}

// claimSigning is the signing the render does: the profile's key when it
// signs, else the Claim's own spec.signing; nil for none.
func claimSigning(m *pipeline.Mounts, c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, profile *v1alpha1.EnvironmentProfile, hints map[string]string) *workerv1.Signing {
	var s *workerv1.Signing
	if profileSigns(profile) {
		s = profileSigning(m, profile, resourceOf("Claim", c), hints)
	} else {
		s = resourceSigning(m, c.Spec.Signing, resourceOf("Claim", c), hints)
	}
	if s != nil {
		s.Template = tpl.Name
	}
	return s
}

// profileWorkspace is the render's workspace and resources, from the
// profile; zero values take the manager's defaults.
func profileWorkspace(profile *v1alpha1.EnvironmentProfile) (pipeline.WorkspaceParams, *corev1.ResourceRequirements) {
	var ws pipeline.WorkspaceParams
	if profile == nil {
		return ws, nil
	}
	ws.Size = profile.Spec.WorkspaceSize
	if profile.Spec.StorageClassName != "" {
		ws.StorageClass = &profile.Spec.StorageClassName
	}
	return ws, profile.Spec.WorkerResources
}

// cleanupPlacement runs the cleanup Job (deletionPolicy Delete) of a
// private template's Claim where its render ran, with the template's push
// Secret. The Claim's status names what to delete; the Job deletes it only
// inside the repository the template forces on this Claim, so a forged
// status cannot point the admin's credential at anything else.
func (r *ClaimReconciler) cleanupPlacement(ctx context.Context, obj pipeline.Object) (string, v1alpha1.Target, error) {
	c := obj.(*v1alpha1.Claim)
	tpl := &v1alpha1.ClaimTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: c.Spec.TemplateRef.Name}, tpl); err != nil {
		// A deleted template's Claims clean up with their own target.
		return "", v1alpha1.Target{}, client.IgnoreNotFound(err)
	}
	if !tpl.Spec.Private() {
		signs, err := r.profileSigns(ctx, c)
		if err != nil || !signs {
			return "", v1alpha1.Target{}, err
		}
	}
	repo := strings.TrimSuffix(tpl.Spec.RepositoryPrefix, "/") + "/" + c.Namespace + "/" + c.Name
	if tpl.Spec.RepositoryPrefix == "" || !strings.HasPrefix(c.Status.Reference, repo+"@") {
		return "", v1alpha1.Target{}, &pipeline.Blocked{Reason: claims.ReasonTargetNotAllowed,
			Message: fmt.Sprintf("ClaimTemplate %s reads a private repository, and its Claims may only delete from %s", tpl.Name, repo)}
	}
	t := c.GetPushTarget()
	return r.Pipeline.Config.TemplateNamespace, v1alpha1.Target{Tag: t.Tag, PlainHTTP: tpl.Spec.PushPlainHTTP,
		InsecureSkipTLSVerify: tpl.Spec.PushInsecureSkipTLSVerify, PushSecretRef: tpl.Spec.PushSecretRef}, nil
}

// deliveryOf is what a Claim's delivery asks of its requester's rights: nil
// when it is not delivered (d, resolved).
func deliveryOf(c *v1alpha1.Claim, d *v1alpha1.FluxDelivery, profile *v1alpha1.EnvironmentProfileSpec) *entitlement.Delivery {
	if d == nil {
		return nil
	}
	return &entitlement.Delivery{ServiceAccount: delivery.ClaimServiceAccount(c, profile)}
}

func profileSpec(p *v1alpha1.EnvironmentProfile) *v1alpha1.EnvironmentProfileSpec {
	if p == nil {
		return nil
	}
	return &p.Spec
}

// profileSigns reports whether the Claim's EnvironmentProfile signs it (its
// runs then go to the template namespace, like a private template's).
func (r *ClaimReconciler) profileSigns(ctx context.Context, c *v1alpha1.Claim) (bool, error) {
	in, err := r.load(ctx, c)
	if err != nil {
		return false, err
	}
	p, err := claims.SelectProfile(in.Profiles, in.NamespaceLabels)
	return err == nil && p != nil && p.Spec.Signing != nil, nil
}

// claimInputsHash covers the template, the chosen profile and the claim
// spec: a change to any of them renders again, even with no new generation.
//
// Every input a rule reads is in it: the namespace's labels enter through
// what they decide (the access rule's verdict and the chosen profile), so a
// Claim denied access renders once its namespace is labelled to match, and
// an unrelated label change renders nothing again.
func claimInputsHash(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, p *v1alpha1.EnvironmentProfile, accessAllowed bool) (string, error) {
	parts := [][]byte{[]byte(fmt.Sprintf("access=%t", accessAllowed))}
	for _, v := range []any{c.Spec, tpl.Spec} {
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		parts = append(parts, b)
	}
	if p != nil {
		b, err := json.Marshal(p.Spec)
		if err != nil {
			return "", err
		}
		parts = append(parts, []byte(p.Name), b)
	}
	return pipeline.InputsHash(parts...), nil
}
