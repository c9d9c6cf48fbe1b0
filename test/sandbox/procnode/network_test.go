package procnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/test/testenv"
)

func TestPodIPsAreDistinctLoopbackAddresses(t *testing.T) {
	n := New(Options{})
	seen := map[string]bool{}
	for i := range 70000 {
		ip := n.podIP(types.UID(fmt.Sprint(i)))
		parsed := net.ParseIP(ip)
		if parsed == nil || !parsed.IsLoopback() || ip == "127.0.0.1" || strings.HasSuffix(ip, ".0") || strings.HasSuffix(ip, ".255") {
			t.Fatalf("pod %d got %q", i, ip)
		}
		if seen[ip] {
			t.Fatalf("%s given twice", ip)
		}
		seen[ip] = true
	}
	if again := n.podIP("5"); again != n.podIP("5") {
		t.Error("a pod's address changes")
	}
}

func TestRefreshFilesReplacesChangedAndRemovesStale(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := writeFiles(dir, map[string][]byte{"a": []byte("1"), "b": []byte("2")}, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(filepath.Join(dir, "a"))
	changed, err := refreshFiles(dir, map[string][]byte{"a": []byte("1"), "c": []byte("3")}, nil, nil, false)
	if err != nil || !changed {
		t.Fatalf("refresh: changed %v, %v", changed, err)
	}
	for name, want := range map[string]string{"a": "1", "c": "3"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Errorf("stale file b kept: %v", err)
	}
	after, _ := os.Stat(filepath.Join(dir, "a"))
	if !os.SameFile(before, after) {
		t.Error("an unchanged file was replaced")
	}
	if changed, err := refreshFiles(dir, map[string][]byte{"a": []byte("1"), "c": []byte("3")}, nil, nil, false); err != nil || changed {
		t.Errorf("a refresh without changes reports %v, %v", changed, err)
	}
	if _, err := os.Stat(dir + "..new"); !os.IsNotExist(err) {
		t.Error("temporary folder left behind")
	}
}

func TestServicePortsResolveNamedTargetPorts(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
		{Name: "webhook-server", ContainerPort: 9443, Protocol: corev1.ProtocolTCP}}}}}}
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "webhook", Port: 443, TargetPort: intstr.FromString("webhook-server"), Protocol: corev1.ProtocolTCP},
		{Name: "plain", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
		{Name: "same", Port: 81, Protocol: corev1.ProtocolTCP},
		{Name: "missing", Port: 82, TargetPort: intstr.FromString("nope"), Protocol: corev1.ProtocolTCP},
	}}}
	got := map[string]int32{}
	for _, p := range servicePorts(svc, pod) {
		got[*p.Name] = *p.Port
	}
	want := map[string]int32{"webhook": 9443, "plain": 8080, "same": 81}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ports %v, want %v", got, want)
	}
}

// TestHelperServer is the container of TestNodeServesPodsBehindServices: it
// serves on its pod's own address, and reports ready while its mounted
// Secret says so.
func TestHelperServer(t *testing.T) {
	if os.Getenv("PROCNODE_HELPER") != "1" {
		t.Skip("run by the process node only")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(os.Getenv(PodIPEnv), "8080"))
	if err != nil {
		t.Fatal(err)
	}
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := os.ReadFile(filepath.Join(os.Getenv("APP_DIR"), "state"))
		if r.URL.Path == "/readyz" && !bytes.Equal(b, []byte("ready")) {
			http.Error(w, "not ready: "+string(b), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, os.Getenv(PodIPEnv))
	}))
}

// TestNodeServesPodsBehindServices runs two pods of one Service on a real
// API server: each gets its own loopback address and binds the same port
// on it; a pod is Ready only once its readiness probe passes, which here
// happens when its Secret volume follows a Secret update; and the node's
// FQDN EndpointSlice lists both addresses with that readiness.
func TestNodeServesPodsBehindServices(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rest.NoWarnings{} // "FQDN endpoints are deprecated"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := "default"
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Logf("default ServiceAccount: %v", err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "state"},
		Data: map[string][]byte{"state": []byte("starting")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const image = "procnode.test/helper"
	var log bytes.Buffer
	n := New(Options{Name: "test-node", Dir: t.TempDir(), Client: kube, Log: &syncWriter{w: &log},
		Images: map[string]Image{image: {Binary: self, Env: []string{"PROCNODE_HELPER=1"}, PathEnv: map[string]string{"/etc/app": "APP_DIR"}}}})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("node log:\n%s", log.String())
		}
	})

	labels := map[string]string{"app": "helper"}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "helper"}, Spec: corev1.ServiceSpec{
		Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"helper-a", "helper-b"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "main", Image: image, Args: []string{"-test.run=^TestHelperServer$"},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "state", MountPath: "/etc/app", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "state"}}}},
		}}
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Running, each on its own address, serving there, but not ready.
	ips := map[string]string{}
	poll(t, 60*time.Second, "both pods run and answer on their own address", func() error {
		for _, name := range []string{"helper-a", "helper-b"} {
			p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				return fmt.Errorf("%s: phase %s, ip %q", name, p.Status.Phase, p.Status.PodIP)
			}
			body, err := get("http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/")
			if err != nil {
				return err
			}
			if body != p.Status.PodIP {
				return fmt.Errorf("%s at %s says its address is %q", name, p.Status.PodIP, body)
			}
			ips[name] = p.Status.PodIP
		}
		return nil
	})
	if ips["helper-a"] == ips["helper-b"] || ips["helper-a"] == "127.0.0.1" {
		t.Fatalf("pod addresses %v", ips)
	}
	checkSlice := func(ready bool) func() error {
		return func() error {
			for _, name := range []string{"helper-a", "helper-b"} {
				p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if podReady(p) != ready {
					return fmt.Errorf("pod %s ready=%v", name, podReady(p))
				}
			}
			list, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=helper"})
			if err != nil {
				return err
			}
			if len(list.Items) != 1 {
				return fmt.Errorf("%d EndpointSlices", len(list.Items))
			}
			s := list.Items[0]
			got := map[string]bool{}
			for _, e := range s.Endpoints {
				got[e.Addresses[0]] = ptr.Deref(e.Conditions.Ready, false)
			}
			want := map[string]bool{ips["helper-a"]: ready, ips["helper-b"]: ready}
			if s.AddressType != discoveryv1.AddressTypeFQDN || fmt.Sprint(got) != fmt.Sprint(want) ||
				len(s.Ports) != 1 || *s.Ports[0].Port != 8080 || *s.Ports[0].Name != "http" {
				return fmt.Errorf("slice %s endpoints %v ports %v, want %v on http 8080", s.AddressType, got, s.Ports, want)
			}
			return nil
		}
	}
	poll(t, 30*time.Second, "the slice lists both pods, not ready", checkSlice(false))
	sec, err := kube.CoreV1().Secrets(ns).Get(ctx, "state", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data["state"] = []byte("ready")
	if _, err := kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the Secret update reaches the pods, whose probes then pass", checkSlice(true))
}

func get(url string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func poll(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		<-tick.C
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
