package plugin

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/controllers/entitlement"
)

// access decides, with the admission webhook's own rules, whether the
// user may claim templates in one namespace. The webhook reviews the
// requester with SubjectAccessReviews; the plugin asks the same questions
// about the user with SelfSubjectAccessReviews, so it needs no right
// beyond the user's own.
type access struct {
	e        *env
	ns       string
	me       entitlement.Requester
	nsLabels map[string]string
	// nsErr is why the namespace's labels could not be read; a template
	// with a namespace selector is then "unknown", never "yes".
	nsErr   error
	checker *entitlement.Checker
}

func (e *env) newAccess(ctx context.Context) (*access, error) {
	a := &access{e: e, ns: e.ns}
	ssr := &authenticationv1.SelfSubjectReview{}
	if err := e.c.Create(ctx, ssr); err != nil {
		return nil, fmt.Errorf("asking the API server who you are (SelfSubjectReview): %w", err)
	}
	a.me = entitlement.FromUserInfo(ssr.Status.UserInfo)
	var ns corev1.Namespace
	if err := e.c.Get(ctx, client.ObjectKey{Name: e.ns}, &ns); err != nil {
		a.nsErr = err
	} else {
		a.nsLabels = ns.Labels
	}
	dc, err := discovery.NewDiscoveryClientForConfig(e.cfg)
	if err != nil {
		return nil, err
	}
	// The Checker only maps kinds to resources here: the reviews run as
	// SelfSubjectAccessReviews below.
	a.checker = &entitlement.Checker{Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
	return a, nil
}

// verdict is whether the user may claim one template here, and if not why.
type verdict struct {
	Claimable bool
	// Unknown: a rule could not be checked (fail closed: not claimable).
	Unknown bool
	Why     []string
}

// check applies, in the webhook's order: the namespace selector, the
// groups, and every right of entitlement.ClaimRights (the claim verb,
// create on each rendered kind, get on named Secrets), plus creating the
// Claim itself.
func (a *access) check(ctx context.Context, tpl *v1alpha1.ClaimTemplate, c *v1alpha1.Claim) verdict {
	var v verdict
	if tpl.Spec.Access.NamespaceSelector != nil {
		if a.nsErr != nil {
			v.Unknown = true
			v.Why = append(v.Why, fmt.Sprintf("cannot read namespace %s's labels for spec.access.namespaceSelector: %s", a.ns, reason(a.nsErr)))
		} else if err := claims.CheckAccess(tpl, a.ns, a.nsLabels); err != nil {
			v.Why = append(v.Why, err.Error())
		}
	}
	if err := entitlement.InGroups(a.me, tpl); err != nil {
		v.Why = append(v.Why, err.Error())
	}
	if c == nil {
		c = &v1alpha1.Claim{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns}, Spec: v1alpha1.ClaimSpec{TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name}}}
	}
	// Delivery is judged from the Claim alone: a tenant cannot always read
	// the cluster's EnvironmentProfiles, which the webhook also consults.
	var d *entitlement.Delivery
	if c.Spec.Delivery != nil && c.Spec.Delivery.Flux != nil {
		d = &entitlement.Delivery{ServiceAccount: delivery.ClaimServiceAccount(c, nil)}
	}
	rights, err := a.checker.ClaimRights(c, tpl, d)
	if err != nil {
		v.Why = append(v.Why, err.Error())
	}
	rights = append(rights, entitlement.Right{Field: "metadata", Why: "creating a Claim",
		Attr: authorizationv1.ResourceAttributes{Namespace: a.ns, Verb: "create", Group: v1alpha1.GroupVersion.Group, Resource: "claims"}})
	for _, r := range rights {
		attr := r.Attr
		ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}
		if err := a.e.c.Create(ctx, ssar); err != nil {
			v.Unknown = true
			v.Why = append(v.Why, fmt.Sprintf("%s: cannot check %s: %v", r.Field, r.Why, err))
			continue
		}
		if !ssar.Status.Allowed {
			v.Why = append(v.Why, fmt.Sprintf("%s: %s needs %s", r.Field, r.Why, entitlement.Describe(attr)))
		}
	}
	v.Claimable = len(v.Why) == 0
	return v
}

// reason is why a read failed. A refusal says which right is missing in
// the API server's own words (the verb, resource, group and namespace it
// checked), not a fixed guess: the same helper serves reads of namespaces,
// EnvironmentProfiles, Secrets, events and Flux objects.
func reason(err error) string {
	if apierrors.IsForbidden(err) {
		msg := err.Error()
		if _, after, ok := strings.Cut(msg, " is forbidden: "); ok {
			msg = after
		}
		return "forbidden for you: " + msg
	}
	return err.Error()
}

func joinWhy(why []string) string { return strings.Join(why, "; ") }
