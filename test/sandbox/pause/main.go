// Command pause is the real node's pod sandbox image (containerd's
// "sandbox" pinned image): it holds a pod's namespaces open and does
// nothing else until it is told to stop. The sandbox builds it into an image
// and pushes it to its own registry, since registry.k8s.io is out of reach.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As registry.k8s.io/pause: exit on SIGINT or SIGTERM, and reap
	// whatever gets reparented to the pod's init (it is PID 1 when the pod
	// shares its PID namespace).
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	chld := make(chan os.Signal, 8)
	signal.Notify(chld, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-chld:
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
