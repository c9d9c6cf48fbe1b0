package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/test/manifests"
)

// The sandbox manager's webhook objects, as config/default names them.
const (
	ManagerNamespace   = "packline-system"
	webhookService     = "packline-webhook-service"
	webhookSecret      = "packline-webhook-server-cert"
	webhookServicePort = "webhook"
)

// webhookKinds are the objects of config/default the sandbox installs for
// its manager process (which is not a pod: no Deployment, ServiceAccount
// or pod-only settings).
var webhookKinds = map[string]bool{
	"Namespace": true, "Secret": true, "Service": true,
	"Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
}

// installWebhooks makes the real kube-apiserver call the sandbox's manager
// process through config/default's own webhook configurations, Service and
// certificate Secret, with the certificates the manager provisions itself:
//
//   - The RBAC of config/default (the certificate Secret's Role, the webhook
//     configurations' ClusterRole) is bound to the manager's user instead of
//     its ServiceAccount, so the manager runs with exactly config/rbac.
//   - The Service loses its selector (there is no pod to select: the manager
//     is a process on this host) and gets a hand-made EndpointSlice, the
//     documented way to point a Service at something outside the cluster.
//     The API server runs with --enable-aggregator-routing, so it resolves
//     webhook Services through their EndpointSlices (kube-aggregator's
//     endpoint resolver) rather than dialling the ClusterIP, which nothing
//     routes here. Loopback IPs are refused in IPv4 EndpointSlices, so the
//     address is 127.0.0.1 as an FQDN slice, which the resolver dials as is.
//   - The certificate Secret reaches --webhook-cert-dir the way a kubelet
//     mounts it (mirrorSecret).
func (s *Sandbox) installWebhooks(ctx context.Context) error {
	s.step("webhook configurations, Service, certificate Secret and RBAC")
	objs, err := manifests.Render(filepath.Join(s.o.RepoRoot, "config", "default"))
	if err != nil {
		return fmt.Errorf("rendering config/default: %w", err)
	}
	for _, namespaceFirst := range []bool{true, false} {
		for _, u := range objs {
			if !webhookKinds[u.GetKind()] || (u.GetKind() == "Namespace") != namespaceFirst {
				continue
			}
			switch u.GetKind() {
			case "ClusterRole":
				if u.GetName() == "packline-manager" {
					continue // installed from config/rbac/role.yaml by install
				}
			case "RoleBinding", "ClusterRoleBinding":
				if err := bindToManagerUser(u); err != nil {
					return err
				}
			case "Service":
				if u.GetName() != webhookService {
					continue
				}
				unstructured.RemoveNestedField(u.Object, "spec", "selector")
			}
			if err := s.Apply(ctx, u); err != nil {
				return fmt.Errorf("installing %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	if s.webhookPort, err = freePort(); err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: webhookService + "-sandbox", Namespace: ManagerNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: webhookService,
			discoveryv1.LabelManagedBy:   "sandbox.packline.dev",
		}},
		AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(webhookServicePort), Port: ptr.To(int32(s.webhookPort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	// FQDN slices draw a deprecation warning; client-go would print it.
	cfg := rest.CopyConfig(s.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	quiet, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if err := quiet.Patch(ctx, slice, client.Apply, client.FieldOwner("packline-sandbox"), client.ForceOwnership); err != nil {
		return fmt.Errorf("installing the webhook EndpointSlice: %w", err)
	}
	s.webhookCertDir = filepath.Join(s.Dir, "manager", "webhook-certs")
	if err := os.MkdirAll(s.webhookCertDir, 0o700); err != nil {
		return err
	}
	mirrorCtx, cancel := context.WithCancel(context.Background())
	s.mirrorCancel = cancel
	return mirrorSecret(mirrorCtx, s, ManagerNamespace, webhookSecret, s.webhookCertDir)
}

// webhookArgs point the manager at what installWebhooks set up.
func (s *Sandbox) webhookArgs() []string {
	if s.webhookCertDir == "" {
		return []string{"--enable-webhooks=false"}
	}
	return []string{
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(s.webhookPort),
		"--webhook-cert-dir=" + s.webhookCertDir,
		"--webhook-namespace=" + ManagerNamespace,
		"--webhook-client-ca=" + s.cp.webhookClient.CA,
	}
}

// verifyArgs let a manager that serves no webhooks (another --instance)
// verify the seals of the one that does, from the same certificate folder.
func (s *Sandbox) verifyArgs() []string {
	if s.webhookCertDir == "" {
		return nil
	}
	return []string{"--webhook-cert-dir=" + s.webhookCertDir}
}

// WebhookClientCA is the CA of the API server's webhook client certificate,
// for config/default's packline-webhook-client-ca ConfigMap.
func (s *Sandbox) WebhookClientCA() []byte { return s.cp.webhookClient.CAPEM }

// bindToManagerUser points a binding of config/default at the manager's
// client-certificate user instead of its ServiceAccount.
func bindToManagerUser(u *unstructured.Unstructured) error {
	var subjects []any
	raw, _, _ := unstructured.NestedSlice(u.Object, "subjects")
	for _, r := range raw {
		m, _ := r.(map[string]any)
		if m["kind"] == rbacv1.ServiceAccountKind && m["name"] == ManagerUser {
			m = map[string]any{"kind": rbacv1.UserKind, "apiGroup": rbacv1.GroupName, "name": ManagerUser}
		}
		subjects = append(subjects, m)
	}
	return unstructured.SetNestedSlice(u.Object, subjects, "subjects")
}

// mirrorSecret is the kubelet's Secret volume for the manager process:
// every key of the Secret is a file in dir, replaced (write, then rename)
// whenever the Secret changes. It reads the Secret with the sandbox's
// admin identity, as a kubelet reads it with its own; the manager's own
// identity only ever writes it.
func mirrorSecret(ctx context.Context, s *Sandbox, ns, name, dir string) error {
	factory := informers.NewSharedInformerFactoryWithOptions(s.Kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := factory.Core().V1().Secrets().Informer()
	write := func(obj any) {
		sec, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		for k, b := range sec.Data {
			tmp := filepath.Join(dir, ".."+k+".tmp")
			if err := os.WriteFile(tmp, b, 0o600); err == nil {
				_ = os.Rename(tmp, filepath.Join(dir, k))
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: write, UpdateFunc: func(_, o any) { write(o) }}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("watching Secret %s/%s did not sync", ns, name)
	}
	return nil
}
