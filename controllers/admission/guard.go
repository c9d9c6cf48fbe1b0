package admission

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	pathpkg "path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// A seal proves that the mutating webhook saw a write only if every write
// of a Claim or Artifact must pass the webhooks. ConfigGuard checks that
// the manager's own webhook configurations say so; until they do, the
// controllers trust no seal (entitlement.Sealer.WithTrust).

// expectedWebhooks are the webhooks the +kubebuilder:webhook markers declare.
var expectedWebhooks = []struct {
	name, path, resource string
	mutating             bool
}{
	{"mclaim.packline.dev", MutateClaimPath, "claims", true},
	{"martifact.packline.dev", MutateArtifactPath, "artifacts", true},
	{"vclaim.packline.dev", ValidateClaimPath, "claims", false},
	{"vartifact.packline.dev", ValidateArtifactPath, "artifacts", false},
}

// webhookView is what the check reads of a mutating or validating webhook.
type webhookView struct {
	rules             []admissionregistrationv1.RuleWithOperations
	failurePolicy     *admissionregistrationv1.FailurePolicyType
	namespaceSelector *metav1.LabelSelector
	objectSelector    *metav1.LabelSelector
	matchConditions   int
	clientConfig      admissionregistrationv1.WebhookClientConfig
}

// CheckConfigurations says why m and v do not send every create and update
// of Claims and Artifacts to packline's webhooks, served with serving (the
// certificate the webhook server presents), or nil when they do. Each
// webhook must have rules for both operations, no namespace or object
// selector and no match conditions (each can leave writes out),
// failurePolicy Fail (Ignore lets writes through when the webhook is
// down), the path the manager serves it on, and a caBundle that verifies
// serving.
func CheckConfigurations(m *admissionregistrationv1.MutatingWebhookConfiguration, v *admissionregistrationv1.ValidatingWebhookConfiguration, serving *x509.Certificate) error {
	var problems []string
	for _, want := range expectedWebhooks {
		config, view, found := v.Name, webhookView{}, false
		if want.mutating {
			config = m.Name
			for _, w := range m.Webhooks {
				if w.Name == want.name {
					view, found = webhookView{w.Rules, w.FailurePolicy, w.NamespaceSelector, w.ObjectSelector, len(w.MatchConditions), w.ClientConfig}, true
				}
			}
		} else {
			for _, w := range v.Webhooks {
				if w.Name == want.name {
					view, found = webhookView{w.Rules, w.FailurePolicy, w.NamespaceSelector, w.ObjectSelector, len(w.MatchConditions), w.ClientConfig}, true
				}
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("%s has no webhook %s", config, want.name))
			continue
		}
		for _, p := range view.problems(want.resource, want.path, serving) {
			problems = append(problems, fmt.Sprintf("%s webhook %s: %s", config, want.name, p))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func (w webhookView) problems(resource, path string, serving *x509.Certificate) []string {
	var out []string
	for _, op := range []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update} {
		if !slices.ContainsFunc(w.rules, func(r admissionregistrationv1.RuleWithOperations) bool { return covers(r, resource, op) }) {
			out = append(out, fmt.Sprintf("no rule sends %s of packline.dev/v1alpha1 %s", op, resource))
		}
	}
	if w.failurePolicy != nil && *w.failurePolicy != admissionregistrationv1.Fail {
		out = append(out, fmt.Sprintf("failurePolicy is %s, not Fail", *w.failurePolicy))
	}
	if !emptySelector(w.namespaceSelector) {
		out = append(out, "it has a namespaceSelector")
	}
	if !emptySelector(w.objectSelector) {
		out = append(out, "it has an objectSelector")
	}
	if w.matchConditions > 0 {
		out = append(out, "it has matchConditions")
	}
	if got := clientPath(w.clientConfig); pathpkg.Clean("/"+got) != path {
		out = append(out, fmt.Sprintf("it calls path %q, not %q", got, path))
	}
	if err := verifies(w.clientConfig.CABundle, serving); err != nil {
		out = append(out, err.Error())
	}
	return out
}

func covers(r admissionregistrationv1.RuleWithOperations, resource string, op admissionregistrationv1.OperationType) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	ops := make([]string, 0, len(r.Operations))
	for _, o := range r.Operations {
		ops = append(ops, string(o))
	}
	scopeOK := r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes || *r.Scope == admissionregistrationv1.NamespacedScope
	return has(ops, string(op)) && has(r.APIGroups, "packline.dev") && has(r.APIVersions, "v1alpha1") && has(r.Resources, resource) && scopeOK
}

func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

func clientPath(c admissionregistrationv1.WebhookClientConfig) string {
	if c.Service != nil && c.Service.Path != nil {
		return *c.Service.Path
	}
	if c.URL != nil {
		if u, err := url.Parse(*c.URL); err == nil {
			return u.Path
		}
	}
	return ""
}

// verifies checks that the API server, trusting bundle, trusts serving.
func verifies(bundle []byte, serving *x509.Certificate) error {
	pool := x509.NewCertPool()
	if len(bundle) == 0 || !pool.AppendCertsFromPEM(bundle) {
		return errors.New("its caBundle is empty")
	}
	if _, err := serving.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("its caBundle does not verify the webhook server's certificate: %v", err)
	}
	return nil
}

// ConfigGuard runs CheckConfigurations on every replica, at start and then
// every Interval (every FailingInterval while it fails: at first start
// the CA is injected a few seconds after the manager starts), and keeps
// the answer for the controllers.
type ConfigGuard struct {
	// Reader reads past the cache (the manager's API reader).
	Reader                       client.Reader
	MutatingName, ValidatingName string
	// CertDir holds tls.crt, the certificate the webhook server serves.
	CertDir                   string
	Interval, FailingInterval time.Duration

	mu      sync.Mutex
	checked bool
	err     error
}

// Err is nil when seals can be trusted, else why not.
func (g *ConfigGuard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.checked {
		return errors.New("the manager has not checked its webhook configurations yet")
	}
	return g.err
}

// Check reads the configurations and the serving certificate once.
func (g *ConfigGuard) Check(ctx context.Context) error {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := g.Reader.Get(ctx, client.ObjectKey{Name: g.MutatingName}, m); err != nil {
		return fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", g.MutatingName, err)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := g.Reader.Get(ctx, client.ObjectKey{Name: g.ValidatingName}, v); err != nil {
		return fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", g.ValidatingName, err)
	}
	b, err := os.ReadFile(filepath.Join(g.CertDir, "tls.crt"))
	if err != nil {
		return fmt.Errorf("reading the webhook serving certificate: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return errors.New("the webhook serving certificate tls.crt is not PEM")
	}
	serving, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("the webhook serving certificate: %w", err)
	}
	return CheckConfigurations(m, v, serving)
}

// Start checks until ctx ends, logging each change of the answer.
func (g *ConfigGuard) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook-config-guard")
	interval, failing := g.Interval, g.FailingInterval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	if failing <= 0 {
		failing = 2 * time.Second
	}
	last := "unchecked"
	for {
		err := g.Check(ctx)
		g.mu.Lock()
		g.checked, g.err = true, err
		g.mu.Unlock()
		if now := fmt.Sprint(err); now != last {
			if err != nil {
				log.Info("the admission webhook configurations do not send every write through the webhooks; requester seals are not trusted", "reason", err.Error())
			} else {
				log.Info("the admission webhook configurations are in place; requester seals are trusted")
			}
			last = now
		}
		wait := interval
		if err != nil {
			wait = failing
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// NeedLeaderElection: every replica's controllers may read seals.
func (g *ConfigGuard) NeedLeaderElection() bool { return false }
