package pipeline

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kueue's Workload is read as unstructured, so the manager does not link
// Kueue: kueue.x-k8s.io/v1beta2, the storage version of Kueue v0.17.
var WorkloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}

// PriorityClassLabel names a Kueue WorkloadPriorityClass on a Job.
const PriorityClassLabel = "kueue.x-k8s.io/priority-class"

// Reasons for a queued Job, from the Workload Kueue made for it.
const (
	// ReasonQuotaNotReserved: Kueue could not reserve quota for the Job
	// (its Workload's QuotaReserved condition is False); the message is
	// Kueue's, e.g. insufficient quota in the ClusterQueue.
	ReasonQuotaNotReserved = "QuotaNotReserved"
	// ReasonWaitingForAdmission: quota is reserved, the Workload waits for
	// its admission checks (e.g. MultiKueue dispatching it).
	ReasonWaitingForAdmission = "WaitingForAdmission"
)

// Kueue's Workload condition types (kueue.x-k8s.io/v1beta2).
const (
	workloadQuotaReserved = "QuotaReserved"
	workloadAdmitted      = "Admitted"
)

// QueuedBy refines the observation of a suspended Job with what Kueue says
// about its Workload: why it is not admitted yet. A nil Workload (Kueue
// has not made one yet, or is not installed) leaves it as it is.
func QueuedBy(o Observation, wl *unstructured.Unstructured) Observation {
	if o.State != StateQueued || wl == nil {
		return o
	}
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	get := func(t string) (status, reason, message string) {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == t {
				status, _ = m["status"].(string)
				reason, _ = m["reason"].(string)
				message, _ = m["message"].(string)
				return
			}
		}
		return
	}
	name := wl.GetName()
	if st, reason, msg := get(workloadQuotaReserved); st == "False" {
		o.Reason = ReasonQuotaNotReserved
		o.Message = fmt.Sprintf("queued by Kueue: Workload %s %s: %s", name, reason, msg)
		return o
	} else if st == "True" {
		if st, reason, msg := get(workloadAdmitted); st != "True" {
			o.Reason = ReasonWaitingForAdmission
			o.Message = fmt.Sprintf("queued by Kueue: Workload %s has quota reserved, waiting for admission", name)
			if checks := pendingChecks(wl); checks != "" {
				o.Message += " checks: " + checks
			} else if reason != "" {
				o.Message += fmt.Sprintf(" (%s: %s)", reason, msg)
			}
			return o
		}
	}
	o.Message = fmt.Sprintf("Job is suspended, waiting for admission by its queue (Kueue Workload %s)", name)
	return o
}

// pendingChecks describes the Workload's admission checks that are not
// Ready, from status.admissionChecks: "multikueue (Pending: The workload
// got reservation on \"worker\")". Kueue v0.17 sets no Admitted
// condition while they are pending (only QuotaReserved), so the checks'
// own states are what says why.
func pendingChecks(wl *unstructured.Unstructured) string {
	checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
	var out []string
	for _, c := range checks {
		m, _ := c.(map[string]any)
		name, _ := m["name"].(string)
		state, _ := m["state"].(string)
		msg, _ := m["message"].(string)
		if state == "Ready" {
			continue
		}
		if msg != "" {
			state += ": " + msg
		}
		out = append(out, fmt.Sprintf("%s (%s)", name, state))
	}
	return strings.Join(out, ", ")
}

// workloadOf finds the Workload Kueue made for job (the one it owns), in
// the cache. Kueue not being installed is no error: the Job just stays
// suspended.
func (p *Pipeline) workloadOf(ctx context.Context, job *batchv1.Job) (*unstructured.Unstructured, error) {
	if p.Workloads == nil {
		return nil, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(WorkloadGVK.GroupVersion().WithKind(WorkloadGVK.Kind + "List"))
	if err := p.Workloads.List(ctx, list, client.InNamespace(job.Namespace)); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing Kueue Workloads: %w", err)
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].GetOwnerReferences() {
			if ref.UID == job.UID {
				return &list.Items[i], nil
			}
		}
	}
	return nil, nil
}
