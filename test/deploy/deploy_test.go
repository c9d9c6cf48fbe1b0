// Package deploy installs config/default into the sandbox the way a user
// installs it into a cluster: the manager and worker images are built and
// pushed to a registry, the rendered manifests are applied, and the
// Deployment's two pods run on the process node with the credentials of
// their ServiceAccount token. Both serve the admission webhooks to the API
// server, with a certificate they provision themselves. It then checks
// that a Claim is denied to a user without the claim verb and admitted and
// Ready for an entitled one, that an Artifact reaches Ready through them,
// and that the standby takes over when the leader dies.
package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/manifests"
	"github.com/packline/packline/test/regtest"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/sandbox/procnode"
	"github.com/packline/packline/test/testenv"
)

const (
	ns        = "packline-system"
	leaseName = "packline-manager.packline.dev"
	saPath    = "/var/run/secrets/kubernetes.io/serviceaccount"
	// certPath is where the Deployment mounts the webhook certificate.
	certPath = "/tmp/k8s-webhook-server/serving-certs"
	// clientCAPath is where it mounts the webhook client CA ConfigMap.
	clientCAPath = "/var/run/packline/webhook-client-ca"
	// client-go's leader election logs this once a replica leads, with
	// the lock's namespace/name in the same line (as lock="..." through
	// klog's text format, "lock":"..." through the manager's JSON logger).
	acquiredLease = "Successfully acquired lease"
)

func TestDeployedManager(t *testing.T) {
	if testing.Short() {
		t.Skip("builds images and runs the whole sandbox")
	}
	ctx := context.Background()
	root := testenv.RepoRoot()
	images := buildImages(t, root, regtest.Start(t))

	s := startSandbox(t, root, images)
	deploy(t, s, root, images)
	pods := waitDeployment(t, s)
	if len(pods) != 2 {
		t.Fatalf("want 2 manager pods, got %d", len(pods))
	}
	for _, p := range pods {
		if p.Spec.ServiceAccountName != "packline-manager" {
			t.Errorf("pod %s runs as %q", p.Name, p.Spec.ServiceAccountName)
		}
	}

	checkSelfProvisionedCerts(t, s)
	checkClaimEntitlement(t, s)

	artifact := sampleArtifact(t, s)
	first := artifact.DeepCopy()
	first.SetName("deployed-1")
	ref := runArtifact(t, s, first)
	t.Logf("artifact Ready through the deployed manager: %s", ref)
	checkWorkerJob(t, s, first.GetName())
	checkInstancePublished(t, s)

	leader := leaderPod(t, s, pods)
	holder := lease(t, s).Spec.HolderIdentity

	// An Artifact created before the kill must still complete, exactly once.
	second := artifact.DeepCopy()
	second.SetName("deployed-2")
	if err := s.Apply(ctx, second); err != nil {
		t.Fatal(err)
	}
	t.Logf("leader is pod %s (lease holder %s); deleting it", leader.Name, *holder)
	zero := int64(0)
	if err := s.Client.Delete(ctx, &leader, &client.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The standby normally wins; under load the ReplicaSet's replacement can
	// be first, which is a correct failover too. What must hold: another
	// live manager pod holds the lease and says so.
	var successor string
	eventually(t, 90*time.Second, "another manager takes the lease", func() error {
		h := lease(t, s).Spec.HolderIdentity
		if h == nil || *h == *holder {
			return fmt.Errorf("lease still held by %v", h)
		}
		var live corev1.PodList
		if err := s.Client.List(ctx, &live, client.InNamespace("packline-system")); err != nil {
			return err
		}
		for _, p := range live.Items {
			if p.Name != leader.Name && saysItLeads(s, p) {
				successor = p.Name
				return nil
			}
		}
		return fmt.Errorf("lease held by %s, but no live manager pod logged acquiring it", *h)
	}, func() {
		for _, p := range pods {
			b, _ := os.ReadFile(podLog(s, p))
			t.Logf("pod %s log (last 3000 bytes):\n%s", p.Name, tail(b, 3000))
		}
	})
	t.Logf("pod %s took the lease %s after the leader was killed", successor, time.Since(killed).Round(time.Second))

	ref = waitReady(t, s, second)
	t.Logf("artifact created before the kill is Ready after failover: %s", ref)
	var jobs batchv1.JobList
	if err := s.Client.List(ctx, &jobs, client.InNamespace("default"),
		client.MatchingLabels{"packline.dev/owner-name": second.GetName()}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Errorf("%s has %d Jobs, want exactly 1 across the failover", second.GetName(), len(jobs.Items))
	}
	// The ReplicaSet replaces the deleted pod, as on a real node failure.
	if got := waitDeployment(t, s); len(got) != 2 {
		t.Errorf("after failover: %d manager pods", len(got))
	}
	// The webhook Service follows: the replacement serves once ready, and
	// the API server calls only ready pods.
	waitWebhookEndpoints(t, s)
	checkDenied(t, s, "after-failover")
}

// checkWorkerJob: the deployed flags reach the Job, so its pod runs as the
// worker ServiceAccount with no token, not as the manager.
func checkWorkerJob(t *testing.T, s *sandbox.Sandbox, owner string) {
	t.Helper()
	var jobs batchv1.JobList
	if err := s.Client.List(context.Background(), &jobs, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range jobs.Items {
		if !strings.HasPrefix(j.Name, owner) {
			continue
		}
		n++
		pod := j.Spec.Template.Spec
		// The namespace's default account, with no token: the default install
		// names no worker ServiceAccount that tenant namespaces would lack.
		if pod.ServiceAccountName != "" || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("Job %s: serviceAccountName %q, automount %v", j.Name, pod.ServiceAccountName, pod.AutomountServiceAccountToken)
		}
	}
	if n == 0 {
		t.Errorf("no Job for %s", owner)
	}
}

// startSandbox runs the control plane and process node without a manager
// process of its own: the manager comes from config/default.
func startSandbox(t *testing.T, root string, images map[string]image) *sandbox.Sandbox {
	t.Helper()
	assets, err := testenv.Assets()
	if err != nil {
		t.Fatal(err)
	}
	regBin, err := regtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), "manager-pod")
	s, err := sandbox.Start(context.Background(), sandbox.Options{
		Dir: t.TempDir(), RepoRoot: root, Assets: assets, RegistryBin: regBin,
		WorkerBin: images["worker"].binary,
		Images: map[string]procnode.Image{
			images["manager"].ref: {Binary: wrapper, PathEnv: map[string]string{saPath: "PACKLINE_SA_DIR", certPath: "PACKLINE_CERT_DIR", clientCAPath: "PACKLINE_CLIENT_CA_DIR"}},
			images["worker"].ref:  sandbox.WorkerImageMapping(images["worker"].binary),
		},
		Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	writeWrapper(t, wrapper, s.Config.Host, images["manager"].binary)
	return s
}

// writeWrapper is the manager image's entrypoint on the process node. A
// kubelet gives a pod in-cluster config: the token folder at a fixed path
// and the apiserver's address in the environment. Processes on one host
// cannot share that path, so the wrapper turns the pod's own token folder
// into a kubeconfig: still the ServiceAccount's bound token and the
// cluster's CA, and so exactly its RBAC. All pods here share the host's
// network, each with an address of its own (PROCNODE_POD_IP, its podIP), so
// the wrapper binds the webhook, probe and metrics servers to that address:
// two replicas can then both listen on :9443, :8081 and :8443, the node's
// readiness probe reaches the pod's own /readyz, and the webhook Service's
// endpoints are the pods' addresses. The certificate folder is the pod's
// Secret volume, which the node keeps in step with the Secret.
func writeWrapper(t *testing.T, path, server, manager string) {
	t.Helper()
	script := `#!/bin/sh
set -eu
kc="$HOME/kubeconfig"
cat >"$kc" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sandbox
  cluster: {server: "` + server + `", certificate-authority: "$PACKLINE_SA_DIR/ca.crt"}
users:
- name: pod
  user: {tokenFile: "$PACKLINE_SA_DIR/token"}
contexts:
- name: pod
  context: {cluster: sandbox, user: pod, namespace: "$(cat "$PACKLINE_SA_DIR/namespace")"}
current-context: pod
EOF
export KUBECONFIG="$kc"
exec "` + manager + `" "$@" \
  --webhook-host="$PROCNODE_POD_IP" --webhook-cert-dir="$PACKLINE_CERT_DIR" \
  --webhook-client-ca="$PACKLINE_CLIENT_CA_DIR/ca.crt" \
  --metrics-bind-address="$PROCNODE_POD_IP:8443" --health-probe-bind-address="$PROCNODE_POD_IP:8081"
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// deploy renders config/default, points it at the pushed images and applies
// every object as `kubectl apply --server-side -k` would.
func deploy(t *testing.T, s *sandbox.Sandbox, root string, images map[string]image) {
	t.Helper()
	rendered, err := manifests.Render(filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	// Namespaces first, as kubectl orders them, so the objects in them can
	// be created.
	var objs []*unstructured.Unstructured
	for _, u := range rendered {
		if u.GetKind() == "Deployment" {
			pointAtImages(t, u, images)
		}
		if u.GetKind() == "Namespace" {
			objs = append([]*unstructured.Unstructured{u}, objs...)
		} else {
			objs = append(objs, u)
		}
	}
	for i, u := range objs {
		if err := s.Apply(context.Background(), u); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if i+1 < len(objs) && objs[i+1].GetKind() != "Namespace" && u.GetKind() == "Namespace" {
			// The admin's install step: the CA of the API server's
			// webhook client certificate (see the README).
			applyClientCA(t, s)
		}
	}
}

// applyClientCA creates ConfigMap packline-webhook-client-ca with the CA of
// the sandbox API server's webhook client certificate.
func applyClientCA(t *testing.T, s *sandbox.Sandbox) {
	t.Helper()
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "packline-webhook-client-ca", "namespace": ns},
		"data":     map[string]any{"ca.crt": string(s.WebhookClientCA())},
	}}
	if err := s.Apply(context.Background(), cm); err != nil {
		t.Fatalf("applying the webhook client CA: %v", err)
	}
}

func pointAtImages(t *testing.T, u *unstructured.Unstructured, images map[string]image) {
	t.Helper()
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		t.Fatal(err)
	}
	c := &d.Spec.Template.Spec.Containers[0]
	c.Image = images["manager"].ref
	found := false
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--worker-image=") {
			c.Args[i], found = "--worker-image="+images["worker"].ref, true
		}
	}
	if !found {
		t.Fatal("the Deployment has no --worker-image")
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		t.Fatal(err)
	}
	u.Object = m
}

// waitDeployment waits for the Deployment's two replicas to be ready and
// returns its running pods.
func waitDeployment(t *testing.T, s *sandbox.Sandbox) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, 2*time.Minute, "the manager Deployment is available", func() error {
		var d appsv1.Deployment
		if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "packline-manager"}, &d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 2 || d.Status.UpdatedReplicas != 2 {
			return fmt.Errorf("ready %d, updated %d; %s", d.Status.ReadyReplicas, d.Status.UpdatedReplicas, replicaSetProblems(s))
		}
		var list corev1.PodList
		if err := s.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				pods = append(pods, p)
			}
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d running pods", len(pods))
		}
		return nil
	})
	return pods
}

// replicaSetProblems explains a Deployment that does not come up, e.g. pods
// refused by Pod Security admission.
func replicaSetProblems(s *sandbox.Sandbox) string {
	var list appsv1.ReplicaSetList
	if err := s.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var out []string
	for _, rs := range list.Items {
		for _, c := range rs.Status.Conditions {
			out = append(out, fmt.Sprintf("%s %s: %s", rs.Name, c.Type, c.Message))
		}
	}
	return strings.Join(out, "; ")
}

// checkInstancePublished: the deployed manager, with its own RBAC and
// namespace, publishes its instance in the Lease the admission webhook
// reads (TestInstanceLabel covers the warnings).
func checkInstancePublished(t *testing.T, s *sandbox.Sandbox) {
	t.Helper()
	eventually(t, 60*time.Second, "the default instance is published", func() error {
		var l coordinationv1.Lease
		if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pipeline.InstanceLeaseName("")}, &l); err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > pipeline.InstanceLeaseDuration {
			return fmt.Errorf("instance Lease not renewed: %+v", l.Spec)
		}
		return nil
	})
}

func lease(t *testing.T, s *sandbox.Sandbox) *coordinationv1.Lease {
	t.Helper()
	var l coordinationv1.Lease
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: leaseName}, &l); err != nil {
		t.Fatalf("leader election Lease: %v", err)
	}
	return &l
}

// leaderPod finds the pod that logged winning the election: both replicas
// share this host's name, so the Lease's holder identity cannot tell them
// apart.
func leaderPod(t *testing.T, s *sandbox.Sandbox, pods []corev1.Pod) corev1.Pod {
	t.Helper()
	var leader []corev1.Pod
	for _, p := range pods {
		if saysItLeads(s, p) {
			leader = append(leader, p)
		}
	}
	if len(leader) != 1 {
		for _, p := range pods {
			b, _ := os.ReadFile(podLog(s, p))
			t.Logf("pod %s log:\n%s", p.Name, b)
		}
		t.Fatalf("%d pods say they lead, want exactly 1", len(leader))
	}
	return leader[0]
}

// saysItLeads reads the container log the process node keeps for a pod.
func saysItLeads(s *sandbox.Sandbox, p corev1.Pod) bool {
	b, err := os.ReadFile(podLog(s, p))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, acquiredLease) && strings.Contains(line, ns+"/"+leaseName) {
			return true
		}
	}
	return false
}

func podLog(s *sandbox.Sandbox, p corev1.Pod) string {
	return filepath.Join(s.Dir, "node", "pods", p.Namespace+"_"+p.Name+"_"+string(p.UID), "manager.log")
}

// sampleArtifact is config/samples' Artifact, pointed at the sandbox.
func sampleArtifact(t *testing.T, s *sandbox.Sandbox) *unstructured.Unstructured {
	t.Helper()
	samples, err := s.Samples("")
	if err != nil {
		t.Fatal(err)
	}
	for _, smp := range samples {
		if smp.Obj.GetKind() == "Artifact" {
			return smp.Obj
		}
	}
	t.Fatal("no Artifact sample")
	return nil
}

// runArtifact applies a and waits for Ready, then pulls the digest back.
func runArtifact(t *testing.T, s *sandbox.Sandbox, a *unstructured.Unstructured) string {
	t.Helper()
	if err := s.Apply(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return waitReady(t, s, a)
}

// waitReady waits for an applied Artifact to be Ready and pulls its digest.
func waitReady(t *testing.T, s *sandbox.Sandbox, a *unstructured.Unstructured) string {
	t.Helper()
	ctx := context.Background()
	var ref string
	eventually(t, 3*time.Minute, a.GetName()+" is Ready", func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(a.GroupVersionKind())
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(a), u); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				ref, _, _ = unstructured.NestedString(u.Object, "status", "reference")
				return nil
			}
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return fmt.Errorf("phase %q, conditions %v", phase, conds)
	})
	if _, err := s.Pull(ctx, ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

// eventually polls check until it passes; an API wait, not a sleep.
// onTimeout, when given, runs before the test fails (for diagnostics).
func eventually(t *testing.T, timeout time.Duration, what string, check func() error, onTimeout ...func()) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			for _, f := range onTimeout {
				f()
			}
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		<-tick.C
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
