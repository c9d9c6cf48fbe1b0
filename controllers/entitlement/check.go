package entitlement

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/claims"
)

// Right is one permission a spec needs, and the field that needs it.
type Right struct {
	// Field is the spec field that asks for the right, e.g. "spec.target.pushSecretRef".
	Field string
	// Why says what the right is for, in the denial.
	Why  string
	Attr authorizationv1.ResourceAttributes
}

// Denied lists every missing right; it is the error of Check.
type Denied struct {
	Requester string
	Missing   []string
}

func (d *Denied) Error() string {
	return fmt.Sprintf("user %q is not entitled to this: %s", d.Requester, strings.Join(d.Missing, "; "))
}

// Checker asks the API server, through SubjectAccessReviews, whether a
// requester holds rights. Reviews run concurrently: admission latency is
// the slowest review, not their sum. Decisions are kept for CacheTTL, as
// the API server's own webhook authorizer does, so a tenant applying many
// Claims pays for each distinct right once.
type Checker struct {
	Client client.Client
	Mapper meta.RESTMapper
	// CacheTTL keeps decisions this long; zero disables the cache.
	CacheTTL time.Duration

	mu    sync.Mutex
	cache map[string]decision
}

type decision struct {
	allowed bool
	at      time.Time
}

// DefaultCacheTTL is short enough that a grant or a revocation is seen
// within seconds.
const DefaultCacheTTL = 10 * time.Second

// NewChecker reviews through a client of its own, with the default cache.
// SubjectAccessReviews touch no storage, so they get a rate limit of their
// own: behind the controllers' client limit, admission latency would
// depend on how busy the controllers are.
func NewChecker(cfg *rest.Config, m meta.RESTMapper, scheme *runtime.Scheme) (*Checker, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: m})
	if err != nil {
		return nil, err
	}
	return &Checker{Client: c, Mapper: m, CacheTTL: DefaultCacheTTL}, nil
}

func (c *Checker) cached(key string) (allowed, ok bool) {
	if c.CacheTTL <= 0 {
		return false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.cache[key]
	if !ok || time.Since(d.at) > c.CacheTTL {
		return false, false
	}
	return d.allowed, true
}

func (c *Checker) remember(key string, allowed bool) {
	if c.CacheTTL <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil || len(c.cache) > 10000 {
		c.cache = map[string]decision{}
	}
	c.cache[key] = decision{allowed: allowed, at: time.Now()}
}

// Check reviews every right for r and returns *Denied naming each missing
// one, or nil.
func (c *Checker) Check(ctx context.Context, r Requester, rights []Right) error {
	allowed := make([]bool, len(rights))
	g, gctx := errgroup.WithContext(ctx)
	for i, right := range rights {
		attr := right.Attr
		spec := authorizationv1.SubjectAccessReviewSpec{User: r.Username, UID: r.UID, Groups: r.Groups, ResourceAttributes: &attr}
		key, _ := json.Marshal(spec)
		if ok, hit := c.cached(string(key)); hit {
			allowed[i] = ok
			continue
		}
		g.Go(func() error {
			sar := &authorizationv1.SubjectAccessReview{Spec: spec}
			if err := c.Client.Create(gctx, sar); err != nil {
				return fmt.Errorf("SubjectAccessReview for %s: %w", right.Field, err)
			}
			allowed[i] = sar.Status.Allowed
			c.remember(string(key), sar.Status.Allowed)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	d := &Denied{Requester: r.Username}
	for i, right := range rights {
		if !allowed[i] {
			d.Missing = append(d.Missing, fmt.Sprintf("%s: %s needs %s", right.Field, right.Why, Describe(right.Attr)))
		}
	}
	if len(d.Missing) > 0 {
		return d
	}
	return nil
}

// Describe spells a right the way an admin writes it in a Role.
func Describe(a authorizationv1.ResourceAttributes) string {
	res := a.Resource
	if a.Group != "" {
		res += "." + a.Group
	}
	s := fmt.Sprintf("%q on %s", a.Verb, res)
	if a.Name != "" {
		s += fmt.Sprintf(" named %q", a.Name)
	}
	if a.Namespace != "" {
		s += " in namespace " + a.Namespace
	}
	return s
}

// InGroups enforces a template's spec.access.groups for r.
func InGroups(r Requester, tpl *v1alpha1.ClaimTemplate) error {
	groups := tpl.Spec.Access.Groups
	if len(groups) == 0 {
		return nil
	}
	for _, g := range groups {
		if slices.Contains(r.Groups, g) {
			return nil
		}
	}
	return &Denied{Requester: r.Username, Missing: []string{fmt.Sprintf(
		"spec.templateRef: ClaimTemplate %s may be claimed only by members of the groups in its spec.access.groups (%s)",
		tpl.Name, strings.Join(groups, ", "))}}
}

// Delivery is how a Claim is delivered, for its rights; nil when it is not.
type Delivery struct {
	// ServiceAccount is the one the Claim itself names for Flux to apply
	// as (delivery.ClaimServiceAccount); empty when the profile chose it.
	ServiceAccount string
}

// rbacKinds can grant rights: rendering one needs the rights it could grant.
var rbacKinds = map[string]bool{"Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true}

// ClaimRights are the rights a Claim needs beyond creating it: the claim
// verb on its template, create on every kind the template renders (the
// GitOps tool that applies the output usually holds more rights than the
// tenant), and get on every Secret the spec names. A delivered Claim (d
// not nil) also needs what delivery asks (DeliveryRights). A declared kind
// this cluster does not serve is an error naming it, returned with the
// others: whoever checks them (or stalls for want of a requester) must see
// every Secret.
func (c *Checker) ClaimRights(claim *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, d *Delivery) ([]Right, error) {
	ns := claim.Namespace
	var rights []Right
	if tpl.Spec.Access.ClaimVerbRequired() {
		rights = append(rights, Right{Field: "spec.templateRef", Why: "claiming ClaimTemplate " + tpl.Name,
			Attr: authorizationv1.ResourceAttributes{Namespace: ns, Verb: v1alpha1.ClaimVerb,
				Group: v1alpha1.GroupVersion.Group, Resource: "claimtemplates", Name: tpl.Name}})
	}
	kinds, kindsErr := c.kindRights(ns, tpl, d != nil)
	rights = append(rights, kinds...)
	if d != nil {
		rights = append(rights, serviceAccountRights(ns, *d)...)
	}
	if t := claim.Spec.Target; t != nil {
		rights = append(rights, SecretRights(ns, "spec.target", t.PushSecretRef, t.CASecretRef)...)
	}
	// A bound Artifact's reference lands in the rendered workload: binding
	// one is reading it.
	bound := claims.BoundArtifacts(claim, tpl)
	keys := make([]string, 0, len(bound))
	for k := range bound {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rights = append(rights, Right{Field: "spec.values." + k, Why: "binding Artifact " + bound[k],
			Attr: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Group: v1alpha1.GroupVersion.Group, Resource: "artifacts", Name: bound[k]}})
	}
	if d := claim.Spec.Delivery; d != nil && d.Flux != nil && d.Flux.VerifySecretRef != nil {
		rights = append(rights, secretRight(ns, "spec.delivery.flux.verifySecretRef", d.Flux.VerifySecretRef.Name))
	}
	rights = append(rights, PriorityRights(claim.Spec.PipelineSpec)...)
	return append(rights, SigningRights(ns, claim.Spec.Signing)...), kindsErr
}

// DeliveryRights are what a delivered Claim's requester must hold before
// the manager applies its Flux objects: impersonate on the ServiceAccount
// the Claim names, and create, patch and delete on every kind the template
// renders (Flux server-side applies with force, and prunes), with bind and
// escalate for RBAC kinds.
func (c *Checker) DeliveryRights(claim *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, d Delivery) ([]Right, error) {
	rights, err := c.kindRights(claim.Namespace, tpl, true)
	return append(rights, serviceAccountRights(claim.Namespace, d)...), err
}

// kindRights are create (and, delivered, patch and delete) on every kind
// the template renders; an RBAC kind also needs bind and escalate on roles
// and clusterroles, the rights the API server asks of a user who writes
// one, so that the GitOps identity never grants what the tenant could not.
// Kinds this cluster does not serve make an error naming them, returned
// with the rights of the others.
func (c *Checker) kindRights(ns string, tpl *v1alpha1.ClaimTemplate, delivered bool) ([]Right, error) {
	verbs := []string{"create"}
	if delivered {
		verbs = append(verbs, "patch", "delete")
	}
	var rights []Right
	var unknown, nsRBAC, clusterRBAC []string
	for _, k := range tpl.Spec.Kinds {
		m, err := c.Mapper.RESTMapping(schema.GroupKind{Group: k.Group, Kind: k.Kind})
		if err != nil {
			unknown = append(unknown, k.String())
			continue
		}
		namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
		for _, verb := range verbs {
			attr := authorizationv1.ResourceAttributes{Verb: verb, Group: k.Group, Resource: m.Resource.Resource}
			if namespaced {
				attr.Namespace = ns
			}
			rights = append(rights, Right{Field: "spec.templateRef", Why: fmt.Sprintf("ClaimTemplate %s renders %s", tpl.Name, k), Attr: attr})
		}
		if k.Group == rbacv1.GroupName && rbacKinds[k.Kind] {
			if namespaced {
				nsRBAC = append(nsRBAC, k.String())
			} else {
				clusterRBAC = append(clusterRBAC, k.String())
			}
		}
	}
	escalation := func(ns string, kinds []string) {
		if len(kinds) == 0 {
			return
		}
		why := fmt.Sprintf("ClaimTemplate %s renders %s, and granting rights through it", tpl.Name, strings.Join(kinds, ", "))
		for _, res := range []string{"roles", "clusterroles"} {
			if ns == "" && res == "roles" {
				continue
			}
			for _, verb := range []string{"bind", "escalate"} {
				rights = append(rights, Right{Field: "spec.templateRef", Why: why,
					Attr: authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: rbacv1.GroupName, Resource: res}})
			}
		}
	}
	escalation(ns, nsRBAC)
	escalation("", clusterRBAC)
	if len(unknown) > 0 {
		return rights, fmt.Errorf("ClaimTemplate %s spec.kinds names kinds this cluster does not serve: %s", tpl.Name, strings.Join(unknown, ", "))
	}
	return rights, nil
}

// serviceAccountRights: naming the identity Flux applies as is acting as
// it, so it needs impersonate, as kubectl --as would (the built-in edit
// and admin roles hold it for their namespace's ServiceAccounts).
func serviceAccountRights(ns string, d Delivery) []Right {
	if d.ServiceAccount == "" {
		return nil
	}
	return []Right{{Field: "spec.delivery.flux.serviceAccountName", Why: "delivering as ServiceAccount " + d.ServiceAccount + " (Flux applies as it)",
		Attr: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "impersonate", Resource: "serviceaccounts", Name: d.ServiceAccount}}}
}

// ArtifactRights are get on every Secret and PVC an Artifact names: without
// them, creating an Artifact would let a user send any Secret of the
// namespace to an endpoint of their choice.
func ArtifactRights(a *v1alpha1.Artifact) []Right {
	ns, src := a.Namespace, a.Spec.Source
	var rights []Right
	add := func(field, name string) {
		if name != "" {
			rights = append(rights, secretRight(ns, field, name))
		}
	}
	if hf := src.HuggingFace; hf != nil && hf.TokenSecretRef != nil {
		add("spec.source.huggingFace.tokenSecretRef", hf.TokenSecretRef.Name)
	}
	if g := src.Git; g != nil && g.SecretRef != nil {
		add("spec.source.git.secretRef", g.SecretRef.Name)
	}
	if o := src.OCI; o != nil && o.PullSecretRef != nil {
		add("spec.source.oci.pullSecretRef", o.PullSecretRef.Name)
	}
	if v := src.Volume; v != nil {
		rights = append(rights, Right{Field: "spec.source.volume.claimName", Why: "reading PersistentVolumeClaim " + v.ClaimName,
			Attr: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "persistentvolumeclaims", Name: v.ClaimName}})
	}
	t := a.Spec.Target
	rights = append(rights, SecretRights(ns, "spec.target", t.PushSecretRef, t.CASecretRef)...)
	rights = append(rights, PriorityRights(a.Spec.PipelineSpec)...)
	return append(rights, SigningRights(ns, a.Spec.Signing)...)
}

// VerbUsePriority is the verb on workloadpriorityclasses.kueue.x-k8s.io
// that lets a user name one (Kueue defines no verb of its own).
const VerbUsePriority = "use"

// PriorityRights: a Kueue WorkloadPriorityClass puts a run ahead of every
// other tenant's runs on the same ClusterQueue, and may preempt them, so
// naming one is an entitlement: "use" on that class, which an admin grants
// in a ClusterRole. A run without a queue ignores the class, and needs none.
func PriorityRights(p v1alpha1.PipelineSpec) []Right {
	if p.WorkloadPriorityClassName == "" || p.QueueName == "" {
		return nil
	}
	return []Right{{Field: "spec.workloadPriorityClassName", Why: "queueing ahead of others with WorkloadPriorityClass " + p.WorkloadPriorityClassName,
		Attr: authorizationv1.ResourceAttributes{Verb: VerbUsePriority, Group: "kueue.x-k8s.io", Resource: "workloadpriorityclasses", Name: p.WorkloadPriorityClassName}}}
}

// SigningRights are get on the signing key Secret a resource names: the
// key signs in the name of whoever holds it, so using it is reading it.
func SigningRights(ns string, s *v1alpha1.SigningSpec) []Right {
	if s == nil || s.KeySecretRef.Name == "" {
		return nil
	}
	return []Right{secretRight(ns, "spec.signing.keySecretRef", s.KeySecretRef.Name)}
}

// SecretRights are get on the push and CA Secrets a target names.
func SecretRights(ns, prefix string, push, ca *corev1.LocalObjectReference) []Right {
	var rights []Right
	if push != nil && push.Name != "" {
		rights = append(rights, secretRight(ns, prefix+".pushSecretRef", push.Name))
	}
	if ca != nil && ca.Name != "" {
		rights = append(rights, secretRight(ns, prefix+".caSecretRef", ca.Name))
	}
	return rights
}

func secretRight(ns, field, name string) Right {
	return Right{Field: field, Why: "using Secret " + name,
		Attr: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets", Name: name}}
}
