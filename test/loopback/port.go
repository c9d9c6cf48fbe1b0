// Package loopback picks ports for the servers that tests run on 127.0.0.1.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePort returns a loopback port that was free a moment ago. Callers that
// lose the race retry with another port.
//
// The port is below the kernel's ephemeral range, never in it. Every
// process here shares one loopback, and the sandbox restarts some servers
// on the port they had (the manager's webhooks, a registry after an
// outage). A port in the ephemeral range can be taken, while its server is
// down, as the source port of any outgoing connection (kube-controller-
// manager, a worker, the apiserver), and the restart then fails with
// "address already in use"; in a cluster each pod has its own network
// namespace and this cannot happen.
//
// It never returns a port twice in one process. A server that the sandbox
// restarts leaves its port unbound while it is down, and a port picked then
// for another server (the manager's health probe, during the manager's own
// restart) would take it: the restart failed with "address already in use"
// on the manager's webhook port.
func FreePort() (int, error) {
	low := ephemeralLow()
	given.Lock()
	defer given.Unlock()
	for range 50 {
		port := freePortFloor + rand.IntN(low-freePortFloor)
		if given.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		given.ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d", freePortFloor, low-1)
}

// given is every port FreePort returned in this process.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePortFloor is above the ports that servers commonly take by default.
const freePortFloor = 10000

// ephemeralLow is the first port the kernel hands out for outgoing
// connections and for listening on port 0.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > freePortFloor+1000 {
				return n
			}
		}
	}
	return 32768 // Linux's default
}
