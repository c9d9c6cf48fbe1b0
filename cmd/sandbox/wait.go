package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/test/sandbox"
)

type status struct {
	phase, digest, reference string
	attempts                 int64
}

// waitReady polls the object until its Ready condition is True, and gives
// up early when it is Stalled (a permanent failure will not heal).
func waitReady(ctx context.Context, s *sandbox.Sandbox, obj *unstructured.Unstructured, timeout time.Duration) (status, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(obj.GroupVersionKind())
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(obj), u); err == nil {
			var st status
			st.phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
			st.digest, _, _ = unstructured.NestedString(u.Object, "status", "digest")
			st.reference, _, _ = unstructured.NestedString(u.Object, "status", "reference")
			st.attempts, _, _ = unstructured.NestedInt64(u.Object, "status", "attempts")
			ready, readyMsg := condition(u, "Ready")
			if ready == "True" {
				return st, nil
			}
			if stalled, msg := condition(u, "Stalled"); stalled == "True" {
				return st, fmt.Errorf("%s %s is %w: %s", obj.GetKind(), name(obj), errStalled, msg)
			}
			if line := st.phase + ": " + readyMsg; st.phase != "" && line != last {
				fmt.Printf("  %s %s: %s\n", obj.GetKind(), name(obj), line)
				last = line
			}
		}
		select {
		case <-ctx.Done():
			return status{}, fmt.Errorf("%s %s not Ready: %w (logs in %s)", obj.GetKind(), name(obj), ctx.Err(), s.Logs())
		case <-tick.C:
		}
	}
}

func condition(u *unstructured.Unstructured, typ string) (status, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			return s, msg
		}
	}
	return "", ""
}
