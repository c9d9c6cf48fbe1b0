package claims

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
)

// CheckAccess enforces the template's namespace selector. (Groups need the
// requester's identity, which only an admission webhook sees.)
func CheckAccess(tpl *v1alpha1.ClaimTemplate, ns string, nsLabels map[string]string) error {
	sel := tpl.Spec.Access.NamespaceSelector
	if sel == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return fmt.Errorf("ClaimTemplate %s has an invalid spec.access.namespaceSelector: %w", tpl.Name, err)
	}
	if !s.Matches(labels.Set(nsLabels)) {
		return fmt.Errorf("namespace %s may not claim ClaimTemplate %s: its labels do not match the template's spec.access.namespaceSelector (%s)", ns, tpl.Name, s.String())
	}
	return nil
}

// CheckExposure makes sure the template offers the claimed exposure, and
// returns the matching option. A template that lists none offers ClusterIP.
func CheckExposure(tpl *v1alpha1.ClaimTemplate, e v1alpha1.Exposure) (v1alpha1.ExposureOption, error) {
	t := e.Type
	if t == "" {
		t = v1alpha1.ExposureClusterIP
	}
	offered := tpl.Spec.Exposures
	if len(offered) == 0 {
		offered = []v1alpha1.ExposureOption{{Type: v1alpha1.ExposureClusterIP}}
	}
	var names []string
	for _, o := range offered {
		if o.Type == t {
			return o, nil
		}
		names = append(names, string(o.Type))
	}
	return v1alpha1.ExposureOption{}, fmt.Errorf("spec.exposure.type: %s is not offered by ClaimTemplate %s (offered: %s)", t, tpl.Name, strings.Join(names, ", "))
}

// SelectProfile picks the EnvironmentProfile for a namespace: among those
// whose selector matches, the highest priority, then the smallest name, so
// the choice never depends on list order. Nil when none matches.
//
// A profile that is not valid (ValidateProfile) is skipped, so one broken
// profile never stops every Claim in the cluster. But when its selector's
// matchLabels alone match the namespace, it was probably meant for this
// Claim, and rendering with another profile (or none) could put the
// workload in the wrong place: that is an error naming the profile.
func SelectProfile(profiles []v1alpha1.EnvironmentProfile, nsLabels map[string]string) (*v1alpha1.EnvironmentProfile, error) {
	var matched []v1alpha1.EnvironmentProfile
	for _, p := range profiles {
		if err := ValidateProfile(&p); err != nil {
			if labels.SelectorFromSet(p.Spec.NamespaceSelector.MatchLabels).Matches(labels.Set(nsLabels)) {
				return nil, &ProfileError{Name: p.Name, Err: err}
			}
			continue
		}
		s, _ := metav1.LabelSelectorAsSelector(&p.Spec.NamespaceSelector)
		if s.Matches(labels.Set(nsLabels)) {
			matched = append(matched, p)
		}
	}
	if len(matched) == 0 {
		return nil, nil
	}
	sort.Slice(matched, func(i, j int) bool {
		if matched[i].Spec.Priority != matched[j].Spec.Priority {
			return matched[i].Spec.Priority > matched[j].Spec.Priority
		}
		return matched[i].Name < matched[j].Name
	})
	return &matched[0], nil
}

// ProfileError: a profile meant for this namespace is not valid.
type ProfileError struct {
	Name string
	Err  error
}

func (e *ProfileError) Error() string {
	return fmt.Sprintf("EnvironmentProfile %s, which selects this namespace, is not valid (%v): a platform admin must fix it; the Claim waits", e.Name, e.Err)
}

// ValidateProfile checks what the CRD schema cannot: the selector, the
// keys and values of nodeSelector and labels (the API server's CEL cost
// budget refuses rules over maps of unbounded strings), and workerResources
// (no negative quantity, no request above its limit, which would be
// lowered silently). It also repeats the CRD's rules on the delivery
// durations, for a profile stored before the CRD had them.
func ValidateProfile(p *v1alpha1.EnvironmentProfile) error {
	if msg, ok := p.Annotations[v1alpha1.AnnotationUndecodable]; ok {
		return errors.New(msg)
	}
	if _, err := metav1.LabelSelectorAsSelector(&p.Spec.NamespaceSelector); err != nil {
		return fmt.Errorf("spec.namespaceSelector: %w", err)
	}
	if bad := pipeline.ResourceProblems("spec.workerResources", p.Spec.WorkerResources); len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	if d := p.Spec.Delivery; d != nil && d.Flux != nil {
		for _, f := range []struct {
			field string
			d     *metav1.Duration
		}{{"spec.delivery.flux.timeout", d.Flux.Timeout}, {"spec.delivery.flux.interval", d.Flux.Interval}} {
			if f.d != nil && f.d.Duration < time.Millisecond {
				return fmt.Errorf("%s: %s is not a duration of at least 1ms: Flux refuses zero, negative and sub-millisecond durations", f.field, f.d.Duration)
			}
		}
	}
	for _, f := range []struct {
		field string
		m     map[string]string
	}{{"spec.nodeSelector", p.Spec.NodeSelector}, {"spec.labels", p.Spec.Labels}} {
		keys := make([]string, 0, len(f.m))
		for k := range f.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return fmt.Errorf("%s: key %q: %s", f.field, k, strings.Join(errs, "; "))
			}
			if errs := validation.IsValidLabelValue(f.m[k]); len(errs) > 0 {
				return fmt.Errorf("%s[%s]: value %q: %s", f.field, k, f.m[k], strings.Join(errs, "; "))
			}
		}
	}
	return nil
}

// TargetRepository is the claim's override, else
// <template repositoryPrefix>/<namespace>/<name>.
func TargetRepository(tpl *v1alpha1.ClaimTemplate, c *v1alpha1.Claim) (string, error) {
	if c.Spec.Target != nil && c.Spec.Target.Repository != "" {
		return c.Spec.Target.Repository, nil
	}
	if p := strings.TrimSuffix(tpl.Spec.RepositoryPrefix, "/"); p != "" {
		return p + "/" + c.Namespace + "/" + c.Name, nil
	}
	return "", fmt.Errorf("spec.target.repository: not set, and ClaimTemplate %s has no spec.repositoryPrefix", tpl.Name)
}

// Reasons a Claim does not fit its template.
const (
	ReasonAccessDenied       = "AccessDenied"
	ReasonExposureNotOffered = "ExposureNotOffered"
	ReasonInvalidTemplate    = "InvalidTemplate"
	ReasonInvalidValues      = "InvalidValues"
	ReasonNoTarget           = "NoTargetRepository"
	// ReasonTargetNotAllowed: a Claim of a private template sets a part of
	// spec.target that only the template may set.
	ReasonTargetNotAllowed = "TargetNotAllowed"
)

// Violation is one rule a Claim breaks.
type Violation struct {
	Reason string
	Err    error
}

// Violations checks a Claim against its template and namespace, in the
// order the controller reports them: access, exposure, the template's
// schema, values, a private template's target rule, target. The webhook reports them all; the controller
// stops at the first.
func Violations(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, nsLabels map[string]string) []Violation {
	var out []Violation
	add := func(reason string, err error) {
		if err != nil {
			out = append(out, Violation{Reason: reason, Err: err})
		}
	}
	add(ReasonAccessDenied, CheckAccess(tpl, c.Namespace, nsLabels))
	_, err := CheckExposure(tpl, c.Spec.Exposure)
	add(ReasonExposureNotOffered, err)
	schema, err := CompileSchema(tpl.Spec.ValuesSchema)
	if err != nil {
		add(ReasonInvalidTemplate, fmt.Errorf("ClaimTemplate %s: %w", tpl.Name, err))
	} else {
		add(ReasonInvalidValues, ValidateValues(schema, c.Spec.Values))
	}
	add(ReasonInvalidValues, ImageValues(c, tpl))
	add(ReasonInvalidValues, FieldValues(c, tpl))
	if tpl.Spec.Private() {
		add(ReasonTargetNotAllowed, PrivateTarget(tpl, c))
	}
	_, err = TargetRepository(tpl, c)
	add(ReasonNoTarget, err)
	return out
}

// Admissible joins every violation into one error for an admission denial.
func Admissible(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, nsLabels map[string]string) error {
	var msgs []string
	for _, v := range Violations(c, tpl, nsLabels) {
		msgs = append(msgs, v.Err.Error())
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// PrivateTarget applies the rule for Claims of a template with credentials
// (spec.source.secretRef). Their render runs in the template namespace,
// never in the Claim's, so that no Job, pod, PVC or env var in a tenant's
// namespace can expose the credential; and it pushes only where the
// template says, with the template's spec.pushSecretRef. A tenant who could
// pick the repository, push Secret or CA would choose where a render made
// with the admin's credential goes, or make the render mount a Secret of
// the template namespace by name (spec.signing's key Secret too). Nor may
// it weaken the transport the admin's credential travels over: plain HTTP
// or skipped TLS verification would hand it to whoever sits on the path,
// so they are the template's (spec.pushPlainHTTP,
// spec.pushInsecureSkipTLSVerify), and a Claim may only repeat them. The
// tag stays the Claim's.
func PrivateTarget(tpl *v1alpha1.ClaimTemplate, c *v1alpha1.Claim) error {
	return adminRunFields(tpl, c, fmt.Sprintf("ClaimTemplate %s reads a private repository", tpl.Name))
}

// ProfileSignedTarget is the same rule for Claims whose EnvironmentProfile
// signs them: the profile's key is in the template namespace, so their
// render runs there too, and their signing key is the profile's.
func ProfileSignedTarget(profile string, tpl *v1alpha1.ClaimTemplate, c *v1alpha1.Claim) error {
	return adminRunFields(tpl, c, fmt.Sprintf("EnvironmentProfile %s signs the Claims of this namespace with its own key", profile))
}

// adminRunFields refuses the fields a Claim that renders in the template
// namespace may not set.
func adminRunFields(tpl *v1alpha1.ClaimTemplate, c *v1alpha1.Claim, because string) error {
	var fields []string
	if t := c.Spec.Target; t != nil {
		if t.Repository != "" {
			fields = append(fields, "spec.target.repository")
		}
		if t.PushSecretRef != nil {
			fields = append(fields, "spec.target.pushSecretRef")
		}
		if t.CASecretRef != nil {
			fields = append(fields, "spec.target.caSecretRef")
		}
		if t.PlainHTTP && !tpl.Spec.PushPlainHTTP {
			fields = append(fields, "spec.target.plainHTTP")
		}
		if t.InsecureSkipTLSVerify && !tpl.Spec.PushInsecureSkipTLSVerify {
			fields = append(fields, "spec.target.insecureSkipTLSVerify")
		}
	}
	if c.Spec.Signing != nil {
		fields = append(fields, "spec.signing")
	}
	if len(fields) == 0 {
		return nil
	}
	return fmt.Errorf("%s: not allowed, because %s: such Claims render in the template namespace and push only to the template's spec.repositoryPrefix, with its spec.pushSecretRef, over the transport its spec.pushPlainHTTP and spec.pushInsecureSkipTLSVerify set; remove %s (only the tag is the Claim's)",
		strings.Join(fields, ", "), because, map[bool]string{false: "it", true: "them"}[len(fields) > 1])
}
