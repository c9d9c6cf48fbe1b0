package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions serves metrics as Kubebuilder's scaffold does: over HTTPS
// (TLS 1.2+, HTTP/1.1, a self-signed certificate unless certDir holds one),
// and only to callers whose bearer token the API server authenticates
// (TokenReview) and authorizes for "get" on the non-resource URL of the
// request (SubjectAccessReview): bind config/rbac's packline-metrics-reader
// to Prometheus. secure=false serves plain HTTP to anyone, for local runs.
func metricsOptions(addr string, secure bool, certDir string) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if !secure {
		return o
	}
	o.SecureServing, o.CertDir = true, certDir
	o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.MinVersion, c.NextProtos = tls.VersionTLS12, []string{"http/1.1"} }}
	o.FilterProvider = authnAuthzFilter
	return o
}

// authnAuthzFilter is controller-runtime's filters.WithAuthenticationAndAuthorization
// without its dependency on k8s.io/apiserver: the same two reviews, with
// decisions kept for a minute as the API server's webhook authenticator
// does.
func authnAuthzFilter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return reviewFilter(kube), nil
}

// reviewFilter is the filter with the reviews sent through kube.
func reviewFilter(kube kubernetes.Interface) metricsserver.Filter {
	cache := &reviewCache{ttl: time.Minute, decisions: map[string]reviewDecision{}}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || token == "" {
				http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
				return
			}
			key := r.Method + " " + r.URL.Path + " " + token
			d, hit := cache.get(key)
			if !hit {
				d = review(r, kube, token)
				if d.err != nil {
					log.Error(d.err, "reviewing a metrics request")
					http.Error(w, "the request could not be reviewed", http.StatusInternalServerError)
					return
				}
				cache.put(key, d)
			}
			switch {
			case !d.authenticated:
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
			case !d.allowed:
				http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", d.user, strings.ToLower(r.Method), r.URL.Path), http.StatusForbidden)
			default:
				next.ServeHTTP(w, r)
			}
		}), nil
	}
}

type reviewDecision struct {
	authenticated, allowed bool
	user                   string
	err                    error
	at                     time.Time
}

func review(r *http.Request, kube kubernetes.Interface, token string) reviewDecision {
	ctx := r.Context()
	tr, err := kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return reviewDecision{err: err}
	}
	if !tr.Status.Authenticated {
		return reviewDecision{at: time.Now()}
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: r.URL.Path, Verb: strings.ToLower(r.Method)},
	}}, metav1.CreateOptions{})
	if err != nil {
		return reviewDecision{err: err}
	}
	return reviewDecision{authenticated: true, allowed: sar.Status.Allowed, user: u.Username, at: time.Now()}
}

type reviewCache struct {
	ttl       time.Duration
	mu        sync.Mutex
	decisions map[string]reviewDecision
}

func (c *reviewCache) get(key string) (reviewDecision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.decisions[key]
	return d, ok && time.Since(d.at) < c.ttl
}

func (c *reviewCache) put(key string, d reviewDecision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.decisions) > 1000 {
		c.decisions = map[string]reviewDecision{}
	}
	c.decisions[key] = d
}
