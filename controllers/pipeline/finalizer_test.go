package pipeline

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/wrappers"
)

// TestPatchFinalizersNeverDropsAnothers: the finalizer patch carries the
// resourceVersion it was computed from. A merge patch replaces the whole
// list, so from a stale copy it would drop a finalizer another controller
// added since; with the lock it is refused with a Conflict instead, and
// from a fresh read both finalizers stay.
func TestPatchFinalizersNeverDropsAnothers(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	a := wrappers.MakeArtifact("a", "ns").Obj()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(a).Build()
	p := &Pipeline{Client: c}

	stale := &v1alpha1.Artifact{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), stale); err != nil {
		t.Fatal(err)
	}
	other := stale.DeepCopy()
	controllerutil.AddFinalizer(other, "example.com/keep")
	if err := c.Update(ctx, other); err != nil {
		t.Fatal(err)
	}

	err := p.patchFinalizers(ctx, stale, func() { controllerutil.AddFinalizer(stale, Finalizer) })
	if !apierrors.IsConflict(err) {
		t.Fatalf("patch from a stale copy: err = %v, want a Conflict", err)
	}
	fresh := &v1alpha1.Artifact{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), fresh); err != nil {
		t.Fatal(err)
	}
	if err := p.patchFinalizers(ctx, fresh, func() { controllerutil.AddFinalizer(fresh, Finalizer) }); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.Artifact{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(got, "example.com/keep") || !controllerutil.ContainsFinalizer(got, Finalizer) {
		t.Errorf("finalizers = %v, want both", got.Finalizers)
	}
}
