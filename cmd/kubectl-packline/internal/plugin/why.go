package plugin

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

func whyFlags(fs *pflag.FlagSet, o *options) {
	fs.Int64Var(&o.tail, "tail", 20, "lines of the worker pod's log to show")
}

// runWhy prints, in one view, what kubectl describe, get events, logs and
// flux get would say about a resource, and exits with ExitCode.
func runWhy(ctx context.Context, e *env, o *options, args []string) (int, error) {
	if len(args) != 1 {
		return ExitUsage, usagef("why takes KIND/NAME")
	}
	kind, name, err := ParseRef(args[0], "Claim", "Artifact", "ClaimTemplate")
	if err != nil {
		return ExitUsage, err
	}
	if err := e.connect(); err != nil {
		return ExitFailed, err
	}
	w := e.stdout
	if kind == "ClaimTemplate" {
		tpl := &v1alpha1.ClaimTemplate{}
		if err := e.c.Get(ctx, client.ObjectKey{Name: name}, tpl); err != nil {
			return ExitFailed, fmt.Errorf("reading ClaimTemplate %s: %w", name, err)
		}
		st := State{Generation: tpl.Generation, ObservedGeneration: tpl.Status.ObservedGeneration, Conditions: tpl.Status.Conditions}
		fmt.Fprintf(w, "ClaimTemplate %s (generation %d, observed %d)\n", name, tpl.Generation, tpl.Status.ObservedGeneration)
		printConditions(w, tpl.Status.Conditions)
		printFailing(w, tpl.Status.Conditions)
		if ch := tpl.Status.Check; ch != nil {
			fmt.Fprintf(w, "\nCheck render: commit %s, kinds %s, job %s (in the template namespace)\n", orNone(ch.ResolvedCommit), orNone(strings.Join(ch.Kinds, ", ")), orNone(ch.JobRef))
		}
		e.printEvents(ctx, w, "", "ClaimTemplate", name)
		return finish(w, st), nil
	}
	obj, err := e.getPipelineObject(ctx, kind, name)
	if err != nil {
		return ExitFailed, err
	}
	ps := obj.GetPipelineStatus()
	st := State{Generation: obj.GetGeneration(), ObservedGeneration: ps.ObservedGeneration, Phase: ps.Phase, Conditions: ps.Conditions}
	fmt.Fprintf(w, "%s %s/%s: phase %s, attempts %d (generation %d, observed %d)\n", kind, e.ns, name, orNone(string(ps.Phase)), ps.Attempts, obj.GetGeneration(), ps.ObservedGeneration)
	if ps.Reference != "" {
		fmt.Fprintf(w, "Pushed: %s\n", ps.Reference)
	}
	if ps.ImageReference != "" {
		fmt.Fprintf(w, "Image view (what volumes[].image mounts): %s\n", ps.ImageReference)
	}
	if ps.NextAttemptTime != nil {
		fmt.Fprintf(w, "Next attempt: %s\n", ps.NextAttemptTime.Format(time.RFC3339))
	}
	printConditions(w, ps.Conditions)
	printFailing(w, ps.Conditions)
	e.printEvents(ctx, w, e.ns, kind, name)
	if ps.JobRef != nil {
		e.printJob(ctx, w, ps.JobRef.Name, o.tail)
	} else if c, ok := obj.(*v1alpha1.Claim); ok && e.privateRender(ctx, c) {
		fmt.Fprintln(w, "\nWorker: this Claim renders in the template namespace (its template or profile holds credentials); its Job and log are for a platform admin to read.")
	}
	if c, ok := obj.(*v1alpha1.Claim); ok {
		e.printFlux(ctx, w, c)
	}
	return finish(w, st), nil
}

func finish(w io.Writer, st State) int {
	code := ExitCode(st)
	fmt.Fprintf(w, "\nVerdict: %s (exit %d)\n", map[int]string{ExitOK: "Ready", ExitFailed: "failed: fix the cause above, then run `kubectl packline rerun`", ExitProgressing: "progressing"}[code], code)
	return code
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func printConditions(w io.Writer, conds []metav1.Condition) {
	fmt.Fprintln(w, "\nConditions:")
	if len(conds) == 0 {
		fmt.Fprintln(w, "  <none yet>")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(c.LastTransitionTime.Time), oneLine(c.Message))
	}
	tw.Flush()
}

// printFailing repeats the failing condition's reason and message: the
// message names the field and carries the controller's hint (which Secret
// to fix, what an admin must do), as docs/reference/reasons.md says.
func printFailing(w io.Writer, conds []metav1.Condition) {
	for _, t := range []string{v1alpha1.ConditionStalled, v1alpha1.ConditionReady, v1alpha1.ConditionDelivered, v1alpha1.ConditionSigned, v1alpha1.ConditionVerified} {
		for _, c := range conds {
			bad := c.Status == metav1.ConditionFalse
			if t == v1alpha1.ConditionStalled {
				bad = c.Status == metav1.ConditionTrue
			}
			if c.Type == t && bad && c.Message != "" {
				fmt.Fprintf(w, "\nFailing: %s=%s, reason %s:\n  %s\n", c.Type, c.Status, c.Reason, c.Message)
				return
			}
		}
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 240 {
		s = s[:237] + "..."
	}
	return s
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

// printEvents lists the object's recent events (at most 10, newest last).
func (e *env) printEvents(ctx context.Context, w io.Writer, ns, kind, name string) {
	var list corev1.EventList
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", kind), fields.OneTermEqualSelector("involvedObject.name", name))
	opts := []client.ListOption{client.MatchingFieldsSelector{Selector: sel}}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	} else {
		opts = append(opts, client.InNamespace("default"))
	}
	fmt.Fprintf(w, "\nEvents of %s %s:\n", kind, name)
	if err := e.c.List(ctx, &list, opts...); err != nil {
		fmt.Fprintf(w, "  cannot list events: %v\n", short(err))
		return
	}
	printEventList(w, list.Items)
}

func printEventList(w io.Writer, evs []corev1.Event) {
	if len(evs) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	sort.Slice(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
	if len(evs) > 10 {
		evs = evs[len(evs)-10:]
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ev := range evs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", age(eventTime(ev)), ev.Type, ev.Reason, oneLine(ev.Message))
	}
	tw.Flush()
}

func eventTime(ev corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

func short(err error) string { return reason(err) }

// printJob shows the run's Job, its pod, their events and the worker's
// last log lines.
func (e *env) printJob(ctx context.Context, w io.Writer, job string, tail int64) {
	fmt.Fprintf(w, "\nJob %s:\n", job)
	var j batchv1.Job
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: job}, &j); err != nil {
		if apierrors.IsNotFound(err) {
			fmt.Fprintln(w, "  gone (removed after its TTL); status above is what it reported")
			return
		}
		fmt.Fprintf(w, "  cannot read: %v\n", short(err))
		return
	}
	fmt.Fprintf(w, "  active %d, succeeded %d, failed %d\n", j.Status.Active, j.Status.Succeeded, j.Status.Failed)
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			fmt.Fprintf(w, "  %s: %s %s\n", c.Type, c.Reason, oneLine(c.Message))
		}
	}
	e.printEvents(ctx, w, e.ns, "Job", job)
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods, client.InNamespace(e.ns), client.MatchingLabels{batchv1.JobNameLabel: job}); err != nil {
		fmt.Fprintf(w, "  cannot list its pods: %v\n", short(err))
		return
	}
	sort.Slice(pods.Items, func(i, k int) bool {
		return pods.Items[i].CreationTimestamp.Before(&pods.Items[k].CreationTimestamp)
	})
	for _, p := range pods.Items {
		fmt.Fprintf(w, "\nPod %s: %s\n", p.Name, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				fmt.Fprintf(w, "  %s waiting: %s %s\n", cs.Name, cs.State.Waiting.Reason, oneLine(cs.State.Waiting.Message))
			case cs.State.Terminated != nil:
				fmt.Fprintf(w, "  %s exited %d: %s\n", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
			}
		}
		e.printEvents(ctx, w, e.ns, "Pod", p.Name)
	}
	if len(pods.Items) == 0 {
		return
	}
	last := pods.Items[len(pods.Items)-1]
	fmt.Fprintf(w, "\nWorker log (last %d lines of pod %s):\n", tail, last.Name)
	rc, err := e.kube.CoreV1().Pods(e.ns).GetLogs(last.Name, &corev1.PodLogOptions{TailLines: &tail}).Stream(ctx)
	if err != nil {
		fmt.Fprintf(w, "  cannot read: %v\n", short(err))
		return
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		fmt.Fprintf(w, "  %s\n", s.Text())
	}
}

// privateRender reports whether c's runs happen in the template namespace
// (a template with credentials): then there is no Job to show here.
func (e *env) privateRender(ctx context.Context, c *v1alpha1.Claim) bool {
	tpl := &v1alpha1.ClaimTemplate{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: c.Spec.TemplateRef.Name}, tpl); err != nil {
		return false
	}
	return tpl.Spec.Private()
}

// Flux's kinds, read as unstructured: only their Ready condition is shown.
var (
	ociRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
)

func (e *env) printFlux(ctx context.Context, w io.Writer, c *v1alpha1.Claim) {
	d := c.Status.Delivery
	if d == nil {
		fmt.Fprintln(w, "\nDelivery: none (no spec.delivery, and no EnvironmentProfile delivers this namespace)")
		return
	}
	fmt.Fprintf(w, "\nDelivery (Flux), last applied revision %s:\n", orNone(d.LastAppliedRevision))
	for _, x := range []struct {
		gvk  schema.GroupVersionKind
		name string
	}{{ociRepositoryGVK, d.OCIRepository}, {kustomizationGVK, d.Kustomization}} {
		if x.name == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(x.gvk)
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: x.name}, u); err != nil {
			fmt.Fprintf(w, "  %s %s: cannot read: %v\n", x.gvk.Kind, x.name, short(err))
			continue
		}
		status, reason, msg := "Unknown", "", "no Ready condition yet"
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, ci := range conds {
			m, _ := ci.(map[string]any)
			if m["type"] == "Ready" {
				status, _ = m["status"].(string)
				reason, _ = m["reason"].(string)
				msg, _ = m["message"].(string)
			}
		}
		fmt.Fprintf(w, "  %s %s: Ready=%s %s %s\n", x.gvk.Kind, x.name, status, reason, oneLine(msg))
	}
}
