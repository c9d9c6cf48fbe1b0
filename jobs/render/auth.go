package render

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/packline/packline/api/redact"
	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/internal/gitrepo"
)

// URLs with credentials in them, as the ClaimTemplate's CEL rules refuse
// them: any userinfo over HTTP(S), a password over SSH ("ssh://git@host" is
// only a user name).
var embeddedCredentials = []*regexp.Regexp{
	regexp.MustCompile(`(?i)^https?://[^/?#]*@`),
	regexp.MustCompile(`(?i)^ssh://[^/@]*:[^/@]*@`),
}

// templateAuth returns the credential to clone a template with: nil for a
// public template, whatever is mounted; for a private one (with
// spec.source.secretRef), the mounted Secret's, which must hold one. A URL
// that carries credentials itself is refused: the URL is copied into every
// Claim's Job and status, so credentials belong in spec.source.secretRef.
func templateAuth(t v1alpha1.ClaimTemplateSpec, dir string) (transport.AuthMethod, error) {
	url := t.Source.URL
	for _, re := range embeddedCredentials {
		if re.MatchString(url) {
			return nil, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf(
				"the ClaimTemplate's spec.source.url (%s) embeds credentials: put them in a Secret of the template namespace and name it in spec.source.secretRef", redact.Public(url)))
		}
	}
	if !t.Private() {
		return nil, nil
	}
	auth, err := gitrepo.LoadAuth(dir, url, workerv1.ReasonTemplateAuth)
	if err != nil {
		return nil, err
	}
	if auth == nil {
		want := `"token", or "username" and "password"`
		if strings.HasPrefix(url, "ssh://") {
			want = `"ssh-privatekey" and "known_hosts"`
		}
		// The Secret is mounted optional, so a missing one looks like an
		// empty one here: name it, so the admin can check which.
		return nil, failure.Permanent(workerv1.ReasonTemplateAuth, fmt.Errorf(
			"spec.source.secretRef: the Secret %q of the ClaimTemplate (in the manager's template namespace) does not exist or holds no credential for %s: it needs %s",
			t.Source.SecretRef.Name, redact.Public(url), want))
	}
	return auth, nil
}

// templateAuthError words an authentication failure of the template
// repository as the template's, since only its admin can fix it.
func templateAuthError(t v1alpha1.ClaimTemplateSpec, err error) error {
	var fe *failure.Error
	if !errors.As(err, &fe) || (fe.Reason != workerv1.ReasonSourceAuth && fe.Reason != workerv1.ReasonTemplateAuth) {
		return err
	}
	if t.Private() {
		return failure.Permanent(workerv1.ReasonTemplateAuth, fmt.Errorf("the template repository refused the credentials of the ClaimTemplate's spec.source.secretRef: %w", err))
	}
	return failure.Permanent(workerv1.ReasonTemplateAuth, fmt.Errorf("the template repository needs credentials, and the ClaimTemplate has no spec.source.secretRef: %w", err))
}
