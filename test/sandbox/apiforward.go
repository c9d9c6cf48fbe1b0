package sandbox

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
)

// apiForward makes the API server reachable from the real node's pods: it
// listens on the bridge's gateway address (the sandbox's own) and relays
// every connection, TLS untouched, to the API server on loopback. Pods on
// a real cluster reach it through the kubernetes Service, whose ClusterIP
// kube-proxy routes; nothing routes ClusterIPs here (no kube-proxy, no
// iptables), so a pod that needs the API server (the manager of
// config/default) is given this address in KUBERNETES_SERVICE_HOST and
// _PORT, and the API server's certificate names the gateway address too.
type apiForward struct {
	ln   net.Listener
	wg   sync.WaitGroup
	port int
}

func startAPIForward(apiserver string) (*apiForward, error) {
	u, err := url.Parse(apiserver)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(BridgeGateway, "0"))
	if err != nil {
		return nil, fmt.Errorf("API server relay on the bridge: %w", err)
	}
	_, pods, err := net.ParseCIDR(BridgeSubnet)
	if err != nil {
		return nil, err
	}
	f := &apiForward{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !fromBridge(c, pods) {
				// The gateway address is the host's own: a machine that
				// routes the subnet through this host could reach it. Only
				// the sandbox's pods may.
				_ = c.Close()
				continue
			}
			go relay(c, u.Host)
		}
	}()
	return f, nil
}

// fromBridge says c comes from an address on the pods' bridge.
func fromBridge(c net.Conn, pods *net.IPNet) bool {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	return ok && pods.Contains(a.IP)
}

func relay(c net.Conn, to string) {
	defer c.Close()
	up, err := net.Dial("tcp", to)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (f *apiForward) stop() {
	_ = f.ln.Close()
	f.wg.Wait()
}

// APIServerOnBridge is the address and port at which the real node's pods
// reach the API server, for their KUBERNETES_SERVICE_HOST and _PORT; ""
// and 0 on the process node.
func (s *Sandbox) APIServerOnBridge() (string, int) {
	if s.real == nil || s.real.api == nil {
		return "", 0
	}
	return BridgeGateway, s.real.api.port
}
