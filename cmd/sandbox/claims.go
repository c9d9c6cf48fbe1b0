package main

import (
	"context"
	"fmt"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"

	"github.com/packline/packline/test/sandbox"
)

// templateRepo commits test/fixtures/templates into a Git repository and
// serves it, standing in for the platform team's template repo that the
// ClaimTemplate sample names.
func templateRepo(s *sandbox.Sandbox, root string) (url string, closeFn func(), err error) {
	g, err := sandbox.ServeGitRepo(s.ServeIP(), filepath.Join(s.Dir, "git"), "workloads", filepath.Join(root, "test", "fixtures", "templates"))
	if err != nil {
		return "", nil, err
	}
	return g.URL, func() { _ = g.Close() }, nil
}

// prepareNamespace labels "default" as a tenant namespace, which the
// ClaimTemplate sample's access rule requires.
func prepareNamespace(ctx context.Context, s *sandbox.Sandbox) error {
	return s.LabelNamespace(ctx, "default", sandbox.TenantLabels)
}

// printDelivered lists what Flux applied for a delivered Claim: the objects
// kustomize-controller labels with its Kustomization's name.
func printDelivered(ctx context.Context, s *sandbox.Sandbox, claim *unstructured.Unstructured) error {
	c := &v1alpha1.Claim{}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(claim), c); err != nil {
		return err
	}
	if c.Status.Delivery == nil {
		return nil
	}
	fmt.Printf("%s %s: delivered by Flux, applied revision %s:\n", claim.GetKind(), name(claim), c.Status.Delivery.LastAppliedRevision)
	sel := client.MatchingLabels{"kustomize.toolkit.fluxcd.io/name": c.Status.Delivery.Kustomization,
		"kustomize.toolkit.fluxcd.io/namespace": c.Namespace}
	lists := []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &networkingv1.IngressList{}, &corev1.PersistentVolumeClaimList{}}
	for _, l := range lists {
		if err := s.Client.List(ctx, l, client.InNamespace(c.Namespace), sel); err != nil {
			return err
		}
		items, err := apimeta.ExtractList(l)
		if err != nil {
			return err
		}
		for _, it := range items {
			o := it.(client.Object)
			gvk, _ := s.Client.GroupVersionKindFor(o)
			fmt.Printf("  %s %s/%s\n", gvk.Kind, o.GetNamespace(), o.GetName())
		}
	}
	return nil
}
