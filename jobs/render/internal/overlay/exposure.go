package overlay

import (
	"errors"
	"fmt"

	"sigs.k8s.io/kustomize/api/types"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// exposure adds the chosen exposure's component and the patches that carry
// the user's choices: a node port only when the user pinned one (Kubernetes
// allocates one otherwise, and a hard-coded port would collide between
// claims), and the Ingress host.
func exposure(k *types.Kustomization, in Input) error {
	typ := in.Exposure.Type
	if typ == "" {
		typ = v1alpha1.ExposureClusterIP
	}
	var opt *v1alpha1.ExposureOption
	for i := range in.Template.Exposures {
		if in.Template.Exposures[i].Type == typ {
			opt = &in.Template.Exposures[i]
		}
	}
	// ClusterIP is the default and exposes nothing outside the cluster, so
	// it is always on offer; the others only when the template lists them.
	if opt == nil && typ != v1alpha1.ExposureClusterIP {
		return invalid("exposure %s is not offered by the template", typ)
	}
	if in.Exposure.NodePort != nil && typ != v1alpha1.ExposureNodePort {
		return invalid("nodePort is allowed only with exposure NodePort")
	}
	if in.Exposure.Host != "" && typ != v1alpha1.ExposureIngress {
		return invalid("host is allowed only with exposure Ingress")
	}
	component := ""
	if opt != nil {
		component = opt.Component
	}
	if component != "" {
		p, err := repoPath(in.RepoDir, component, fmt.Sprintf("exposures[%s].component", typ))
		if err != nil {
			return err
		}
		k.Components = append(k.Components, p)
	}
	svc := in.Template.Service

	switch typ {
	case v1alpha1.ExposureNodePort, v1alpha1.ExposureLoadBalancer:
		if component == "" {
			// Without a component the Service type is the whole change.
			if svc == "" {
				return templateErr("exposure %s has no component and the template names no service", typ)
			}
			if err := addPatch(k, selector("Service", svc), jsonPatch{Op: "add", Path: "/spec/type", Value: string(typ)}); err != nil {
				return err
			}
		}
		if in.Exposure.NodePort != nil {
			if svc == "" {
				return templateErr("a nodePort was requested but the template names no service")
			}
			if err := addPatch(k, selector("Service", svc),
				jsonPatch{Op: "add", Path: "/spec/ports/0/nodePort", Value: *in.Exposure.NodePort}); err != nil {
				return err
			}
		}
	case v1alpha1.ExposureIngress:
		if component == "" {
			return templateErr("exposure Ingress has no component to provide the Ingress")
		}
		if in.Exposure.Host == "" {
			return invalid("exposure Ingress needs a host")
		}
		if err := addPatch(k, selector("Ingress", ""),
			jsonPatch{Op: "add", Path: "/spec/rules/0/host", Value: in.Exposure.Host}); err != nil {
			return err
		}
	}
	return nil
}

func templateErr(format string, a ...any) error {
	return failure.Permanent(workerv1.ReasonTemplateRejected, errors.New(fmt.Sprintf(format, a...)))
}
