package admission

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// Setup registers the four webhooks on mgr's webhook server. certDir holds
// the serving certificate; the requester seal's key is derived from it (see
// entitlement.NewCertDirSealer), so the controller reading the same folder
// verifies what the webhook sealed.
func Setup(mgr ctrl.Manager, certDir string) error {
	return Register(mgr, entitlement.NewCertDirSealer(certDir))
}

// Register is Setup with a given sealer (tests).
func Register(mgr ctrl.Manager, sealer *entitlement.Sealer) error {
	dec := admission.NewDecoder(mgr.GetScheme())
	checker, err := entitlement.NewChecker(mgr.GetConfig(), mgr.GetRESTMapper(), mgr.GetScheme())
	if err != nil {
		return err
	}
	claimChecks := &claimChecker{client: mgr.GetClient(), checker: checker}
	in := &instances{reader: mgr.GetAPIReader(), namespace: pipeline.ManagerNamespace(), now: time.Now}
	srv := mgr.GetWebhookServer()
	for path, h := range map[string]admission.Handler{
		MutateClaimPath:      &Stamper{kind: claimKind, decoder: dec, sealer: sealer},
		MutateArtifactPath:   &Stamper{kind: artifactKind, decoder: dec, sealer: sealer},
		ValidateClaimPath:    &Validator{kind: claimKind, decoder: dec, sealer: sealer, check: claimChecks.check, instances: in},
		ValidateArtifactPath: &Validator{kind: artifactKind, decoder: dec, sealer: sealer, check: checkArtifact(checker), instances: in},
	} {
		srv.Register(path, &webhook.Admission{Handler: h})
	}
	return nil
}
