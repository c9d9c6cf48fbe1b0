package config

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/packline/packline/test/manifests"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

const installNamespace = "packline-system"

// rendered is config/default as `kubectl apply -k` would send it, once as
// unstructured objects (for the apiserver) and grouped by kind.
type rendered struct {
	objects []*unstructured.Unstructured
	byKind  map[string][]*unstructured.Unstructured
}

func render(t *testing.T) *rendered {
	t.Helper()
	objs, err := manifests.Render("default")
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	r := &rendered{byKind: map[string][]*unstructured.Unstructured{}}
	for _, u := range objs {
		r.objects = append(r.objects, u)
		r.byKind[u.GetKind()] = append(r.byKind[u.GetKind()], u)
	}
	return r
}

// one decodes the single object of kind named name into out.
func (r *rendered) one(t *testing.T, kind, name string, out any) {
	t.Helper()
	for _, u := range r.byKind[kind] {
		if u.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("config/default renders no %s %q", kind, name)
}

func TestDefaultRendersEveryKind(t *testing.T) {
	r := render(t)
	want := map[string]int{
		"Namespace": 1, "CustomResourceDefinition": 4, "ServiceAccount": 1,
		"ClusterRole": 3, "ClusterRoleBinding": 2, "Role": 2, "RoleBinding": 2,
		"Deployment": 1, "Service": 2, "Secret": 1,
		"MutatingWebhookConfiguration": 1, "ValidatingWebhookConfiguration": 1,
	}
	for kind, n := range want {
		if got := len(r.byKind[kind]); got != n {
			t.Errorf("%s: got %d objects, want %d", kind, got, n)
		}
	}
	for kind := range r.byKind {
		if _, ok := want[kind]; !ok {
			t.Errorf("unexpected kind %s in config/default", kind)
		}
	}
}

// TestDefaultNamespaces asks the real apiserver which kinds are namespaced,
// so a cluster-scoped object with a stray namespace fails too.
func TestDefaultNamespaces(t *testing.T) {
	r := render(t)
	mapper := env.Client.RESTMapper()
	for _, u := range r.objects {
		namespaced, err := apiutil.IsGVKNamespaced(u.GroupVersionKind(), mapper)
		if err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		switch {
		case namespaced && u.GetNamespace() != installNamespace:
			t.Errorf("%s %s is in namespace %q, want %q", u.GetKind(), u.GetName(), u.GetNamespace(), installNamespace)
		case !namespaced && u.GetNamespace() != "":
			t.Errorf("cluster-scoped %s %s has namespace %q", u.GetKind(), u.GetName(), u.GetNamespace())
		}
	}
	var ns corev1.Namespace
	r.one(t, "Namespace", installNamespace, &ns)
}

func TestManagerDeployment(t *testing.T) {
	r := render(t)
	var d appsv1.Deployment
	r.one(t, "Deployment", "packline-manager", &d)

	if d.Spec.Replicas == nil {
		t.Error("replicas unset (defaults to 1), want 2")
	} else if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	args := flags(c.Args)
	if _, ok := args["--leader-elect"]; !ok {
		t.Error("two replicas without --leader-elect would both reconcile")
	}
	// The Lease must be in the namespace the leader-election Role covers.
	if ns := args["--leader-election-namespace"]; ns != "$(POD_NAMESPACE)" || !fromPodNamespace(c.Env, "POD_NAMESPACE") {
		t.Errorf("--leader-election-namespace = %q; want $(POD_NAMESPACE) from metadata.namespace", ns)
	}

	// Images: the worker is the manager's sibling repository at the same tag,
	// so one release moves both.
	repo, tag, ok := strings.Cut(c.Image, ":")
	if !ok || !strings.HasSuffix(repo, "/manager") || tag == "" {
		t.Fatalf("manager image %q is not <prefix>/manager:<tag>", c.Image)
	}
	if want := strings.TrimSuffix(repo, "/manager") + "/worker:" + tag; args["--worker-image"] != want {
		t.Errorf("--worker-image = %q, want %q", args["--worker-image"], want)
	}

	// The probes must reach the manager's probe server on :8081.
	if args["--health-probe-bind-address"] != ":8081" {
		t.Errorf("--health-probe-bind-address = %q", args["--health-probe-bind-address"])
	}
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP probe for %s", name)
			continue
		}
		if p.HTTPGet.Path != name || containerPort(c, p.HTTPGet.Port) != 8081 {
			t.Errorf("probe %s: path %q port %v", name, p.HTTPGet.Path, p.HTTPGet.Port)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources not set: %+v", c.Resources)
	}
	checkHardened(t, pod, c)
}

func checkHardened(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("pod or container securityContext missing")
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"pod runAsNonRoot", psc.RunAsNonRoot != nil && *psc.RunAsNonRoot},
		{"pod runAsUser 65532", psc.RunAsUser != nil && *psc.RunAsUser == 65532},
		{"pod seccomp RuntimeDefault", psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"container runAsNonRoot", sc.RunAsNonRoot != nil && *sc.RunAsNonRoot},
		{"container runAsUser 65532", sc.RunAsUser != nil && *sc.RunAsUser == 65532},
		{"readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		{"allowPrivilegeEscalation false", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
		{"drop ALL", sc.Capabilities != nil && len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL" && len(sc.Capabilities.Add) == 0},
		{"no privileged", sc.Privileged == nil || !*sc.Privileged},
		{"no host namespaces", !pod.HostNetwork && !pod.HostPID && !pod.HostIPC},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("manager pod is not hardened: %s", c.what)
		}
	}
}

// TestServiceAccountsAreConsistent follows every name from the Deployment to
// the objects it must meet after kustomize: the pod's SA is the one bound to
// the ClusterRole and the leader-election Role, and no worker ServiceAccount
// that tenant namespaces lack is named.
func TestServiceAccountsAreConsistent(t *testing.T) {
	r := render(t)
	var d appsv1.Deployment
	r.one(t, "Deployment", "packline-manager", &d)
	managerSA := d.Spec.Template.Spec.ServiceAccountName
	var sa corev1.ServiceAccount
	r.one(t, "ServiceAccount", managerSA, &sa)

	var crb rbacv1.ClusterRoleBinding
	r.one(t, "ClusterRoleBinding", "packline-manager", &crb)
	var cr rbacv1.ClusterRole
	r.one(t, "ClusterRole", crb.RoleRef.Name, &cr)
	checkSubject(t, "ClusterRoleBinding", crb.Subjects, managerSA)

	var rb rbacv1.RoleBinding
	r.one(t, "RoleBinding", "packline-leader-election", &rb)
	var role rbacv1.Role
	r.one(t, "Role", rb.RoleRef.Name, &role)
	checkSubject(t, "RoleBinding", rb.Subjects, managerSA)
	if !grants(role.Rules, "coordination.k8s.io", "leases", "update") {
		t.Error("leader-election Role cannot update leases")
	}
	// The Lease lives in the manager's namespace: the namespaced Role is
	// enough, and the ClusterRole must not reach every namespace's Leases.
	for _, verb := range []string{"get", "create", "update", "delete"} {
		if grants(cr.Rules, "coordination.k8s.io", "leases", verb) {
			t.Errorf("the manager's ClusterRole grants %s on leases in every namespace", verb)
		}
	}

	// Worker Jobs run in tenant namespaces, where a ServiceAccount from
	// packline-system cannot be used; the default install leaves the flag
	// unset so workers use each namespace's default account, tokenless.
	if worker := flags(d.Spec.Template.Spec.Containers[0].Args)["--worker-service-account"]; worker != "" {
		t.Fatalf("--worker-service-account = %q: Jobs in other namespaces could not use it", worker)
	}
	// Only the manager holds rights.
	for _, b := range r.byKind["RoleBinding"] {
		var binding rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &binding); err != nil {
			t.Fatal(err)
		}
		for _, sub := range binding.Subjects {
			if sub.Name != managerSA {
				t.Errorf("RoleBinding %s grants rights to %s %s", b.GetName(), sub.Kind, sub.Name)
			}
		}
	}
	if !bindsSA(crb.Subjects, managerSA) || len(crb.Subjects) != 1 {
		t.Errorf("ClusterRoleBinding subjects = %+v, want only %s", crb.Subjects, managerSA)
	}
}

func bindsSA(subjects []rbacv1.Subject, sa string) bool {
	for _, s := range subjects {
		if s.Kind == "ServiceAccount" && s.Name == sa {
			return true
		}
	}
	return false
}

func checkSubject(t *testing.T, kind string, subjects []rbacv1.Subject, sa string) {
	t.Helper()
	for _, s := range subjects {
		if s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == installNamespace {
			return
		}
	}
	t.Errorf("%s does not bind ServiceAccount %s/%s: %+v", kind, installNamespace, sa, subjects)
}

// TestOnlySecretRightIsTheCertRole covers every Role and ClusterRole in the
// install, not only the generated one: credentials reach worker pods by
// reference and the manager must never be able to read them. Its one right
// on Secrets is a namespaced Role limited by resourceNames to its own
// webhook serving-certificate Secret, the one the Deployment mounts, with
// the verbs the certificate rotator uses (list and watch are authorized by
// resourceNames because it asks with a metadata.name field selector). No
// ClusterRole may name Secrets; wildcards would include them, so they fail
// too.
func TestOnlySecretRightIsTheCertRole(t *testing.T) {
	r := render(t)
	certSecret := mountedCertSecret(t, r)
	var certRoles []string
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, u := range r.byKind[kind] {
			var role rbacv1.ClusterRole // same rules shape as Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				t.Fatal(err)
			}
			for _, rule := range role.Rules {
				for _, g := range rule.APIGroups {
					if g == "*" {
						t.Errorf("%s %s grants all API groups", kind, u.GetName())
					}
				}
				for _, v := range rule.Verbs {
					if v == "*" {
						t.Errorf("%s %s grants all verbs on %v", kind, u.GetName(), rule.Resources)
					}
				}
				for _, res := range rule.Resources {
					if res == "*" {
						t.Errorf("%s %s grants %v on every resource", kind, u.GetName(), rule.Verbs)
					}
					if res != "secrets" || !contains(rule.APIGroups, "") {
						continue
					}
					if kind == "ClusterRole" {
						t.Errorf("ClusterRole %s grants %v on Secrets", u.GetName(), rule.Verbs)
						continue
					}
					certRoles = append(certRoles, u.GetName())
					if u.GetNamespace() != installNamespace || len(rule.ResourceNames) != 1 || rule.ResourceNames[0] != certSecret {
						t.Errorf("Role %s/%s grants %v on Secrets %v; only the webhook certificate Secret %s/%s may be named",
							u.GetNamespace(), u.GetName(), rule.Verbs, rule.ResourceNames, installNamespace, certSecret)
					}
					for _, v := range rule.Verbs {
						if !contains([]string{"get", "list", "watch", "update", "patch"}, v) {
							t.Errorf("Role %s grants %q on the certificate Secret", u.GetName(), v)
						}
					}
					for _, v := range []string{"get", "list", "watch", "update"} {
						if !contains(rule.Verbs, v) {
							t.Errorf("Role %s lacks %q on the certificate Secret, which the certificate rotator needs", u.GetName(), v)
						}
					}
				}
			}
		}
	}
	if len(certRoles) != 1 {
		t.Errorf("Roles granting Secret access: %v, want exactly the webhook certificate Role", certRoles)
	}
	// The Role is bound to the manager and to nobody else (checked for every
	// RoleBinding in TestServiceAccountsAreConsistent).
	bound := false
	for _, b := range r.byKind["RoleBinding"] {
		var binding rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &binding); err != nil {
			t.Fatal(err)
		}
		if len(certRoles) == 1 && binding.RoleRef.Kind == "Role" && binding.RoleRef.Name == certRoles[0] {
			bound = true
		}
	}
	if !bound {
		t.Error("the webhook certificate Role is not bound")
	}
	var secret corev1.Secret
	r.one(t, "Secret", certSecret, &secret)
	if len(secret.Data) != 0 || len(secret.StringData) != 0 {
		t.Error("the shipped certificate Secret has data: re-applying the install would overwrite the certificates")
	}
}

// mountedCertSecret is the Secret the manager mounts at --webhook-cert-dir.
func mountedCertSecret(t *testing.T, r *rendered) string {
	t.Helper()
	var d appsv1.Deployment
	r.one(t, "Deployment", "packline-manager", &d)
	return certVolume(t, d).Secret.SecretName
}

func certVolume(t *testing.T, d appsv1.Deployment) corev1.Volume {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	dir := flags(c.Args)["--webhook-cert-dir"]
	if dir == "" {
		t.Fatal("the Deployment sets no --webhook-cert-dir")
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("the certificate volume at %s is mounted writable", dir)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v
			}
		}
	}
	t.Fatalf("no Secret volume is mounted at --webhook-cert-dir %s", dir)
	return corev1.Volume{}
}

// TestWebhooks follows the webhook configurations to the manager: every
// webhook fails closed with a bounded timeout and no side effects, and
// calls the Service that selects the manager pods on the port it serves.
// The webhook-configuration ClusterRole names exactly these two.
func TestWebhooks(t *testing.T) {
	r := render(t)
	var d appsv1.Deployment
	r.one(t, "Deployment", "packline-manager", &d)
	c := d.Spec.Template.Spec.Containers[0]
	args := flags(c.Args)
	if v, ok := args["--enable-webhooks"]; ok && v != "true" {
		t.Errorf("--enable-webhooks=%s: the webhooks are on by default", v)
	}
	if p := args["--webhook-cert-provisioning"]; p != "self" {
		t.Errorf("--webhook-cert-provisioning=%q, want self", p)
	}

	var svc corev1.Service
	r.one(t, "Service", "packline-webhook-service", &svc)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("webhook Service selector %s=%s does not match the manager pods", k, v)
		}
	}
	if len(svc.Spec.Selector) == 0 {
		t.Error("the webhook Service selects nothing")
	}
	if len(svc.Spec.Ports) != 1 || fmt.Sprint(containerPort(c, svc.Spec.Ports[0].TargetPort)) != args["--webhook-port"] {
		t.Errorf("webhook Service ports %+v do not reach --webhook-port %s", svc.Spec.Ports, args["--webhook-port"])
	}

	names := map[string]bool{}
	check := func(kind, name string, hooks []webhookFields) {
		names[name] = true
		if len(hooks) != 2 {
			t.Errorf("%s %s has %d webhooks, want 2 (Claim and Artifact)", kind, name, len(hooks))
		}
		for _, h := range hooks {
			if h.FailurePolicy == nil || *h.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("%s webhook %s: failurePolicy %v, want Fail", kind, h.Name, h.FailurePolicy)
			}
			if h.SideEffects == nil || *h.SideEffects != admissionregistrationv1.SideEffectClassNone {
				t.Errorf("%s webhook %s: sideEffects %v, want None", kind, h.Name, h.SideEffects)
			}
			if h.TimeoutSeconds == nil || *h.TimeoutSeconds < 5 || *h.TimeoutSeconds > 15 {
				t.Errorf("%s webhook %s: timeoutSeconds %v, want set, 5 to 15", kind, h.Name, h.TimeoutSeconds)
			}
			s := h.ClientConfig.Service
			if s == nil || s.Name != svc.Name || s.Namespace != installNamespace || h.ClientConfig.URL != nil {
				t.Errorf("%s webhook %s calls %+v, want Service %s/%s", kind, h.Name, h.ClientConfig, installNamespace, svc.Name)
			} else if port := ptr.Deref(s.Port, 443); port != svc.Spec.Ports[0].Port {
				t.Errorf("%s webhook %s calls port %d, the Service serves %d", kind, h.Name, port, svc.Spec.Ports[0].Port)
			}
			if len(h.ClientConfig.CABundle) != 0 {
				t.Errorf("%s webhook %s ships a caBundle; the manager injects its own", kind, h.Name)
			}
		}
	}
	var m admissionregistrationv1.MutatingWebhookConfiguration
	r.one(t, "MutatingWebhookConfiguration", "packline-mutating-webhook-configuration", &m)
	var mh []webhookFields
	for _, h := range m.Webhooks {
		mh = append(mh, webhookFields{h.Name, h.FailurePolicy, h.SideEffects, h.TimeoutSeconds, h.ClientConfig})
	}
	check("mutating", m.Name, mh)
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	r.one(t, "ValidatingWebhookConfiguration", "packline-validating-webhook-configuration", &v)
	var vh []webhookFields
	for _, h := range v.Webhooks {
		vh = append(vh, webhookFields{h.Name, h.FailurePolicy, h.SideEffects, h.TimeoutSeconds, h.ClientConfig})
	}
	check("validating", v.Name, vh)

	// Only the manager's own two configurations, by name.
	for _, u := range r.byKind["ClusterRole"] {
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			for _, res := range rule.Resources {
				if !strings.HasSuffix(res, "webhookconfigurations") {
					continue
				}
				if len(rule.ResourceNames) == 0 {
					t.Errorf("ClusterRole %s grants %v on every %s", u.GetName(), rule.Verbs, res)
				}
				for _, n := range rule.ResourceNames {
					if !names[n] {
						t.Errorf("ClusterRole %s grants %v on %s %q, not packline's", u.GetName(), rule.Verbs, res, n)
					}
				}
			}
		}
	}
	for _, res := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
		if !grantsAny(r, "admissionregistration.k8s.io", res, "update") {
			t.Errorf("no ClusterRole lets the manager write its CA bundle into %s", res)
		}
	}
}

type webhookFields struct {
	Name           string
	FailurePolicy  *admissionregistrationv1.FailurePolicyType
	SideEffects    *admissionregistrationv1.SideEffectClass
	TimeoutSeconds *int32
	ClientConfig   admissionregistrationv1.WebhookClientConfig
}

func grantsAny(r *rendered, group, resource, verb string) bool {
	for _, u := range r.byKind["ClusterRole"] {
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err == nil && grants(role.Rules, group, resource, verb) {
			return true
		}
	}
	return false
}

// TestCertManagerOverlay renders config/certmanager (cert-manager's kinds
// cannot be dry-run without its CRDs): cert-manager issues the Secret the
// manager mounts, for the Service's name, with a key that is never rotated;
// its CA injector fills both webhook configurations; the manager serves
// external certificates and holds no right on Secrets or webhook
// configurations at all.
func TestCertManagerOverlay(t *testing.T) {
	objs, err := manifests.Render("certmanager")
	if err != nil {
		t.Fatalf("kustomize build config/certmanager: %v", err)
	}
	r := &rendered{byKind: map[string][]*unstructured.Unstructured{}}
	for _, u := range objs {
		r.objects = append(r.objects, u)
		r.byKind[u.GetKind()] = append(r.byKind[u.GetKind()], u)
	}
	var d appsv1.Deployment
	r.one(t, "Deployment", "packline-manager", &d)
	args := d.Spec.Template.Spec.Containers[0].Args
	last := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--webhook-cert-provisioning="); ok {
			last = v
		}
	}
	if last != "external" {
		t.Errorf("effective --webhook-cert-provisioning = %q, want external", last)
	}
	secretName := certVolume(t, d).Secret.SecretName
	if n := len(r.byKind["Secret"]); n != 0 {
		t.Errorf("the overlay ships %d Secrets; cert-manager creates the certificate Secret", n)
	}

	var cert struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			SecretName string
			DNSNames   []string
			IssuerRef  struct{ Kind, Name string }
			PrivateKey struct{ RotationPolicy string }
		}
	}
	certs := r.byKind["Certificate"]
	if len(certs) != 1 {
		t.Fatalf("want one Certificate, got %d", len(certs))
	}
	b, _ := json.Marshal(certs[0].Object)
	if err := json.Unmarshal(b, &cert); err != nil {
		t.Fatal(err)
	}
	if cert.Spec.SecretName != secretName {
		t.Errorf("Certificate writes Secret %q, the manager mounts %q", cert.Spec.SecretName, secretName)
	}
	if want := "packline-webhook-service." + installNamespace + ".svc"; !contains(cert.Spec.DNSNames, want) {
		t.Errorf("Certificate dnsNames %v lack %s", cert.Spec.DNSNames, want)
	}
	if cert.Spec.PrivateKey.RotationPolicy != "Never" {
		t.Errorf("privateKey.rotationPolicy = %q; the requester seal is derived from the key, want Never", cert.Spec.PrivateKey.RotationPolicy)
	}
	issuer := false
	for _, u := range r.byKind[cert.Spec.IssuerRef.Kind] {
		issuer = issuer || (u.GetName() == cert.Spec.IssuerRef.Name && u.GetNamespace() == cert.Metadata.Namespace)
	}
	if !issuer {
		t.Errorf("Certificate's issuer %s %s is not in the overlay", cert.Spec.IssuerRef.Kind, cert.Spec.IssuerRef.Name)
	}
	want := cert.Metadata.Namespace + "/" + cert.Metadata.Name
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		if len(r.byKind[kind]) != 1 {
			t.Fatalf("%d %s objects", len(r.byKind[kind]), kind)
		}
		if got := r.byKind[kind][0].GetAnnotations()["cert-manager.io/inject-ca-from"]; got != want {
			t.Errorf("%s inject-ca-from = %q, want %q", kind, got, want)
		}
	}
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, u := range r.byKind[kind] {
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				t.Fatal(err)
			}
			for _, rule := range role.Rules {
				for _, res := range rule.Resources {
					if res == "secrets" || strings.HasSuffix(res, "webhookconfigurations") || res == "*" {
						t.Errorf("%s %s grants %v on %s; with cert-manager the manager needs none", kind, u.GetName(), rule.Verbs, res)
					}
				}
			}
		}
	}
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		for _, u := range r.byKind[kind] {
			ref, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
			if len(r.byKind["Role"])+len(r.byKind["ClusterRole"]) > 0 && !hasObject(r, ref) {
				t.Errorf("%s %s refers to %s, which the overlay removed", kind, u.GetName(), ref)
			}
		}
	}
}

func hasObject(r *rendered, name string) bool {
	for _, kind := range []string{"Role", "ClusterRole"} {
		for _, u := range r.byKind[kind] {
			if u.GetName() == name {
				return true
			}
		}
	}
	return false
}

func TestMetricsService(t *testing.T) {
	r := render(t)
	var d appsv1.Deployment
	r.one(t, "Deployment", "packline-manager", &d)
	var svc corev1.Service
	r.one(t, "Service", "packline-manager-metrics", &svc)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not match the manager pods", k, v)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 ||
		containerPort(d.Spec.Template.Spec.Containers[0], svc.Spec.Ports[0].TargetPort) != 8443 {
		t.Errorf("metrics Service ports %+v do not reach the manager's :8443", svc.Spec.Ports)
	}
	// Metrics are served over HTTPS to authorized callers only (the
	// manager's --metrics-secure default), on the port the Service reaches.
	args := flags(d.Spec.Template.Spec.Containers[0].Args)
	if args["--metrics-bind-address"] != ":8443" || args["--metrics-secure"] == "false" {
		t.Errorf("metrics flags %q, %q: want :8443 and secure", args["--metrics-bind-address"], args["--metrics-secure"])
	}
	var reader rbacv1.ClusterRole
	r.one(t, "ClusterRole", "packline-metrics-reader", &reader)
}

// TestDefaultIsAcceptedByAPIServer sends every rendered object to a real
// apiserver: the Namespace is created, everything else is a server-side
// apply dry run, which runs schema validation and RBAC escalation checks
// without touching the other tests' CRDs.
func TestDefaultIsAcceptedByAPIServer(t *testing.T) {
	r := render(t)
	ctx := context.Background()
	for _, u := range r.byKind["Namespace"] {
		if err := client.IgnoreAlreadyExists(env.Client.Create(ctx, u.DeepCopy())); err != nil {
			t.Fatalf("Namespace %s: %v", u.GetName(), err)
		}
	}
	for _, u := range r.objects {
		if u.GetKind() == "Namespace" {
			continue
		}
		obj := u.DeepCopy()
		err := env.Client.Patch(ctx, obj, client.Apply, client.FieldOwner("config-test"), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			t.Errorf("%s %s rejected: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func fromPodNamespace(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
		}
	}
	return false
}

// flags turns ["--a=b", "--c"] into {"--a": "b", "--c": ""}.
func flags(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
	}
	return m
}

// containerPort resolves a probe or Service port (number or name) to the
// container's port number; 0 when it names no port.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if contains(r.APIGroups, group) && contains(r.Resources, resource) && contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
