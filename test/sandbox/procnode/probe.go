package procnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeInterval is how often the node runs readiness probes. It ignores
// the probe's initialDelaySeconds and periodSeconds: tests wait on a pod
// becoming ready, and should not wait on probe timing. A container with a
// readiness probe is not ready until its probe passes; the pod is Ready,
// and so behind its Services (see network.go), when all its containers are.
const probeInterval = 500 * time.Millisecond

// probe runs the readiness probes of r's containers until they exit and
// writes each change of readiness to the pod's status, as the kubelet's
// prober does. httpGet and tcpSocket probes are run; exec and grpc probes
// are not supported and count as passing.
func (n *Node) probe(r *podRun, ip string) {
	defer n.wg.Done()
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-tick.C:
		}
		changed := false
		for _, c := range r.pod.Spec.Containers {
			if c.ReadinessProbe == nil {
				continue
			}
			if r.setReady(c.Name, runProbe(c.ReadinessProbe, c, ip) == nil) {
				changed = true
			}
		}
		if !changed {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := n.writeStatus(ctx, r.pod, func(st *corev1.PodStatus) {
			if st.Phase == corev1.PodRunning {
				readiness(st, r)
			}
		})
		cancel()
		if err != nil {
			n.logf("pod %s/%s: writing readiness: %v", r.pod.Namespace, r.pod.Name, err)
		} else {
			n.logf("pod %s/%s ready: %v", r.pod.Namespace, r.pod.Name, r.allReady())
		}
	}
}

// runProbe is one probe of container c of a pod at ip.
func runProbe(p *corev1.Probe, c corev1.Container, ip string) error {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	switch {
	case p.HTTPGet != nil:
		g := p.HTTPGet
		host := g.Host
		if host == "" {
			host = ip
		}
		port, err := containerPort(c, g.Port)
		if err != nil {
			return err
		}
		scheme := strings.ToLower(string(g.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		path := g.Path
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+path, nil)
		if err != nil {
			return err
		}
		for _, h := range g.HTTPHeaders {
			req.Header.Add(h.Name, h.Value)
		}
		hc := &http.Client{Timeout: timeout, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true,
		}}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return nil
	case p.TCPSocket != nil:
		host := p.TCPSocket.Host
		if host == "" {
			host = ip
		}
		port, err := containerPort(c, p.TCPSocket.Port)
		if err != nil {
			return err
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), timeout)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return nil
}

func containerPort(c corev1.Container, p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, p.StrVal)
}

// setReady records a container's readiness and says whether it changed.
func (r *podRun) setReady(name string, ready bool) bool {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	if r.notReady[name] == !ready {
		return false
	}
	r.notReady[name] = !ready
	return true
}

func (r *podRun) containerReady(name string) bool {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	return !r.notReady[name]
}

func (r *podRun) allReady() bool {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	for _, nr := range r.notReady {
		if nr {
			return false
		}
	}
	return true
}

// readiness writes r's container readiness into a running pod's status.
func readiness(st *corev1.PodStatus, r *podRun) {
	for i := range st.ContainerStatuses {
		st.ContainerStatuses[i].Ready = r.containerReady(st.ContainerStatuses[i].Name)
	}
	if r.allReady() {
		setCondition(st, corev1.ContainersReady, corev1.ConditionTrue, "")
		setCondition(st, corev1.PodReady, corev1.ConditionTrue, "")
	} else {
		setCondition(st, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady")
		setCondition(st, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")
	}
}
