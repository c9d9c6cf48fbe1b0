package plugin

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// uiRun is one Claim or Artifact as the page shows it. Claims and
// Artifacts are read as unstructured, so that status fields this plugin
// was built without (status.progress, a Claim's step) still reach the
// page, which shows them when they are there.
type uiRun struct {
	Name               string           `json:"name"`
	Template           string           `json:"template,omitempty"`
	Phase              string           `json:"phase"`
	Ready              string           `json:"ready"`
	Reason             string           `json:"reason,omitempty"`
	Message            string           `json:"message,omitempty"`
	Attempts           int64            `json:"attempts"`
	Generation         int64            `json:"generation"`
	ObservedGeneration int64            `json:"observedGeneration"`
	Reference          string           `json:"reference,omitempty"`
	Conditions         []map[string]any `json:"conditions"`
	// Progress is status.progress as the API server returns it.
	Progress any `json:"progress,omitempty"`
	// Step is status.progress.step: download for an import, and clone,
	// render, push or deliver for a Claim.
	Step     string      `json:"step,omitempty"`
	Delivery *uiDelivery `json:"delivery,omitempty"`
	Created  string      `json:"created"`
}

// uiDelivery is status.delivery with the Ready of Flux's objects, as why
// shows them.
type uiDelivery struct {
	Status  map[string]any `json:"status"`
	Objects []uiFluxObject `json:"objects"`
}

type uiFluxObject struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Ready   string `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// status is the page's poll: the user's Claims and Artifacts in the
// namespace. A list the user may not read is reported, not fatal.
func (s *uiServer) status(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	out := map[string]any{"namespace": s.e.ns}
	var problems []string
	for _, k := range []struct{ key, kind string }{{"claims", "Claim"}, {"artifacts", "Artifact"}} {
		runs, err := s.runs(ctx, k.kind)
		if err != nil {
			problems = append(problems, fmt.Sprintf("listing %ss: %s", k.kind, short(err)))
		}
		out[k.key] = runs
	}
	out["problems"] = problems
	writeJSON(w, http.StatusOK, out)
}

func (s *uiServer) runs(ctx context.Context, kind string) ([]uiRun, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind + "List"))
	runs := []uiRun{}
	if err := s.e.c.List(ctx, list, client.InNamespace(s.e.ns)); err != nil {
		return runs, err
	}
	for i := range list.Items {
		u := &list.Items[i]
		run := RunView(u)
		if kind == "Claim" && run.Delivery != nil {
			run.Delivery.Objects = s.fluxObjects(ctx, run.Delivery.Status)
		}
		runs = append(runs, run)
	}
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].Created != runs[j].Created {
			return runs[i].Created > runs[j].Created
		}
		return runs[i].Name < runs[j].Name
	})
	return runs, nil
}

// RunView reads what the page shows of a Claim or Artifact, tolerating
// any field being absent or of another type than expected.
func RunView(u *unstructured.Unstructured) uiRun {
	str := func(f ...string) string { s, _, _ := unstructured.NestedString(u.Object, f...); return s }
	num := func(f ...string) int64 {
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, f...)
		switch n := v.(type) {
		case int64:
			return n
		case float64:
			return int64(n)
		}
		return 0
	}
	run := uiRun{
		Name: u.GetName(), Template: str("spec", "templateRef", "name"), Phase: str("status", "phase"),
		Attempts: num("status", "attempts"), Generation: u.GetGeneration(), ObservedGeneration: num("status", "observedGeneration"),
		Reference: str("status", "reference"), Created: u.GetCreationTimestamp().UTC().Format("2006-01-02T15:04:05Z"),
		Ready: "Unknown", Conditions: []map[string]any{},
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, ci := range conds {
		m, ok := ci.(map[string]any)
		if !ok {
			continue
		}
		c := map[string]any{"type": m["type"], "status": m["status"], "reason": m["reason"], "message": m["message"], "lastTransitionTime": m["lastTransitionTime"]}
		run.Conditions = append(run.Conditions, c)
		if m["type"] == v1alpha1.ConditionReady {
			run.Ready, _ = m["status"].(string)
			run.Reason, _ = m["reason"].(string)
			run.Message, _ = m["message"].(string)
		}
	}
	if p, ok, _ := unstructured.NestedFieldCopy(u.Object, "status", "progress"); ok {
		run.Progress = p
	}
	if st, ok, _ := unstructured.NestedString(u.Object, "status", "progress", "step"); ok {
		run.Step = st
	}
	if d, ok, _ := unstructured.NestedMap(u.Object, "status", "delivery"); ok {
		run.Delivery = &uiDelivery{Status: d, Objects: []uiFluxObject{}}
	}
	return run
}

// fluxObjects reads the Ready condition of the delivery's OCIRepository
// and Kustomization, with the user's rights.
func (s *uiServer) fluxObjects(ctx context.Context, d map[string]any) []uiFluxObject {
	out := []uiFluxObject{}
	for _, x := range []struct {
		gvk   schema.GroupVersionKind
		field string
	}{{ociRepositoryGVK, "ociRepository"}, {kustomizationGVK, "kustomization"}} {
		name, _ := d[x.field].(string)
		if name == "" {
			continue
		}
		o := uiFluxObject{Kind: x.gvk.Kind, Name: name, Ready: "Unknown"}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(x.gvk)
		if err := s.e.c.Get(ctx, client.ObjectKey{Namespace: s.e.ns, Name: name}, u); err != nil {
			o.Message = "cannot read: " + short(err)
			out = append(out, o)
			continue
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, ci := range conds {
			m, _ := ci.(map[string]any)
			if m["type"] == "Ready" {
				o.Ready, _ = m["status"].(string)
				o.Reason, _ = m["reason"].(string)
				o.Message, _ = m["message"].(string)
			}
		}
		out = append(out, o)
	}
	return out
}
