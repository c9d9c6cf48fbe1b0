package plugin

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestReasonNamesTheMissingRight: a refused read says which right is
// missing, as the API server put it, whatever was read (it once said "ask
// for get on namespaces" for a refused EnvironmentProfile list, and "get
// on jobs, pods" for a refused Kustomization).
func TestReasonNamesTheMissingRight(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{{
		err: apierrors.NewForbidden(schema.GroupResource{Group: "kustomize.toolkit.fluxcd.io", Resource: "kustomizations"}, "my-ide",
			errors.New(`User "alice" cannot get resource "kustomizations" in API group "kustomize.toolkit.fluxcd.io" in the namespace "team-a"`)),
		want: `forbidden for you: User "alice" cannot get resource "kustomizations" in API group "kustomize.toolkit.fluxcd.io" in the namespace "team-a"`,
	}, {
		err:  apierrors.NewForbidden(schema.GroupResource{Group: "packline.dev", Resource: "environmentprofiles"}, "", errors.New(`User "alice" cannot list resource "environmentprofiles" in API group "packline.dev" at the cluster scope`)),
		want: `forbidden for you: User "alice" cannot list resource "environmentprofiles" in API group "packline.dev" at the cluster scope`,
	}, {
		err:  errors.New("connection refused"),
		want: "connection refused",
	}} {
		if got := reason(tc.err); got != tc.want {
			t.Errorf("reason(%v)\n got %s\nwant %s", tc.err, got, tc.want)
		}
	}
}
