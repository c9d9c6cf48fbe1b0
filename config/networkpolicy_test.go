package config

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/manifests"
)

// The shipped worker egress policy selects the worker pods packline makes,
// keeps them off link-local addresses (the cloud metadata service), lets
// them reach the Internet, and is accepted by the API server.
func TestWorkerEgressPolicy(t *testing.T) {
	objs, err := manifests.Render("networkpolicy")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "NetworkPolicy" {
		t.Fatalf("config/networkpolicy renders %d objects, want one NetworkPolicy", len(objs))
	}
	var np networkingv1.NetworkPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(objs[0].Object, &np, true); err != nil {
		t.Fatal(err)
	}

	job := pipeline.BuildJob(pipeline.JobParams{Owner: pipeline.Owner{Name: "m", Namespace: "team-a", UID: "u"}, Image: "w", Command: "artifact"})
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(job.Spec.Template.Labels)) {
		t.Errorf("podSelector %v does not select a worker pod (labels %v)", sel, job.Spec.Template.Labels)
	}
	if sel.Matches(labels.Set{"app.kubernetes.io/name": "packline", "app.kubernetes.io/component": "manager"}) {
		t.Error("the policy selects the manager's pods, which must reach the API server")
	}

	allowed := func(ip string) bool {
		addr := netip.MustParseAddr(ip)
		for _, rule := range np.Spec.Egress {
			for _, peer := range rule.To {
				b := peer.IPBlock
				if b == nil || !netip.MustParsePrefix(b.CIDR).Contains(addr) {
					continue
				}
				excepted := false
				for _, e := range b.Except {
					excepted = excepted || netip.MustParsePrefix(e).Contains(addr)
				}
				if !excepted {
					return true
				}
			}
		}
		return false
	}
	for ip, want := range map[string]bool{
		"169.254.169.254": false, // cloud metadata (AWS, GCP, Azure)
		"169.254.1.1":     false,
		"fe80::1":         false,
		"fd00:ec2::254":   false,
		"140.82.112.3":    true, // a Git host
		"2606:4700::1":    true,
	} {
		if got := allowed(ip); got != want {
			t.Errorf("egress to %s allowed = %v, want %v", ip, got, want)
		}
	}

	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "netpol-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	np.Namespace = ns.Name
	if err := env.Client.Create(ctx, &np); err != nil {
		t.Errorf("the API server refuses the policy: %v", err)
	}
}
