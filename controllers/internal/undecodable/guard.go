// Package undecodable keeps one stored packline object that does not decode
// into its Go type from stopping the manager's cache: the object is left
// out, and reported on itself (see Guard). Only the controllers use it.
package undecodable

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/packline/packline/api/redact"
	"github.com/packline/packline/api/v1alpha1"
)

// ReasonUndecodable is the Warning event on a packline object that is
// stored but does not decode into its Go type (for example an
// EnvironmentProfile written before the CRD refused
// `delivery.flux.interval: soon`). The manager skips it until it is fixed.
const ReasonUndecodable = "Undecodable"

// Why this exists: the cache lists and watches each kind with a typed
// client, and a typed List fails as a whole when one item does not decode
// (metav1.Duration refuses "soon"). The informer then never syncs: a
// running manager stops seeing changes of that kind, and a manager started
// while such an object exists exits with "failed to wait for caches to
// sync". One admin's typo must not take the manager down for the cluster.
//
// So packline's own kinds are listed and watched as unstructured objects
// (the dynamic client always decodes them) and converted one by one. An
// object that does not convert is left out of the cache (a watch event for
// it becomes a deletion, so a stale good copy is not served either), or
// for an EnvironmentProfile replaced by a stand-in marked invalid (see
// standIn), and is reported: an error log, the packline_undecodable_objects
// gauge and a Warning event on the object naming the field, which `kubectl
// describe` shows. Once it is fixed, the next watch event brings it back.
//
// controller-runtime v0.25 offers no per-item hook in its typed list path,
// but lets the informer constructor be replaced (cache.Options.NewInformer);
// the ListerWatcher it is handed is typed, so the replacement builds its
// own, applying the same label selector as the cache's ByObject entry.
// Other kinds keep the standard informer: the API server validates them
// fully, so they always decode.
type Guard struct {
	scheme  *runtime.Scheme
	dynamic dynamic.Interface
	events  kubernetes.Interface
	// labels is the server-side selector of a kind, as in ByObject.
	labels map[reflect.Type]labels.Selector

	mu      sync.Mutex
	skipped map[string]bool // "Kind namespace/name" currently left out
}

var undecodableObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "packline_undecodable_objects",
	Help: "Stored packline objects that do not decode and that the manager skips, by kind.",
}, []string{"kind"})

func init() { metrics.Registry.MustRegister(undecodableObjects) }

func NewGuard(rc *rest.Config, scheme *runtime.Scheme, sel map[reflect.Type]labels.Selector) (*Guard, error) {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &Guard{scheme: scheme, dynamic: dyn, events: cs, labels: sel, skipped: map[string]bool{}}, nil
}

// NewInformer is a cache.Options.NewInformer.
func (g *Guard) NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
	gvk, ok := g.packlineKind(obj)
	if !ok {
		return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
	}
	return toolscache.NewSharedIndexInformer(g.listWatch(gvk, g.labels[reflect.TypeOf(obj)]), obj, resync, idx)
}

func (g *Guard) packlineKind(obj runtime.Object) (schema.GroupVersionKind, bool) {
	if _, ok := obj.(runtime.Unstructured); ok {
		return schema.GroupVersionKind{}, false
	}
	if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return schema.GroupVersionKind{}, false
	}
	kinds, _, err := g.scheme.ObjectKinds(obj)
	if err != nil || len(kinds) == 0 || kinds[0].GroupVersion() != v1alpha1.GroupVersion {
		return schema.GroupVersionKind{}, false
	}
	return kinds[0], true
}

func (g *Guard) listWatch(gvk schema.GroupVersionKind, sel labels.Selector) *toolscache.ListWatch {
	// packline's plurals are the kind, lower case, plus "s".
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	res := g.dynamic.Resource(gvr)
	apply := func(o *metav1.ListOptions) {
		if sel != nil && !sel.Empty() {
			o.LabelSelector = sel.String()
		}
	}
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			apply(&o)
			ul, err := res.List(ctx, o)
			if err != nil {
				return nil, err
			}
			return g.typedList(ctx, gvk, ul)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			apply(&o)
			o.Watch, o.AllowWatchBookmarks = true, true
			w, err := res.Watch(ctx, o)
			if err != nil {
				return nil, err
			}
			return newConvertingWatch(ctx, w, func(ev watch.Event) watch.Event { return g.event(ctx, gvk, ev) }), nil
		},
	}
}

// typedList converts every item that decodes; the others are reported.
func (g *Guard) typedList(ctx context.Context, gvk schema.GroupVersionKind, ul *unstructured.UnstructuredList) (runtime.Object, error) {
	list, err := g.scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(ul.GetResourceVersion())
	lm.SetContinue(ul.GetContinue())
	lm.SetRemainingItemCount(ul.GetRemainingItemCount())
	items := make([]runtime.Object, 0, len(ul.Items))
	for i := range ul.Items {
		o, err := g.convert(gvk, &ul.Items[i])
		if err != nil {
			msg := g.report(ctx, gvk, &ul.Items[i], err)
			if s := g.standIn(gvk, &ul.Items[i], msg); s != nil {
				items = append(items, s)
			}
			continue
		}
		g.fixed(gvk, &ul.Items[i])
		items = append(items, o)
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	return list, nil
}

// event converts one watch event. A bookmark or deletion needs only the
// metadata, so it goes on as a stub when the object does not decode; an
// added or modified object that does not decode becomes a deletion.
func (g *Guard) event(ctx context.Context, gvk schema.GroupVersionKind, ev watch.Event) watch.Event {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return ev // an error Status
	}
	o, err := g.convert(gvk, u)
	if err == nil {
		if ev.Type == watch.Deleted {
			g.forget(gvk, u)
		} else if ev.Type != watch.Bookmark {
			g.fixed(gvk, u)
		}
		return watch.Event{Type: ev.Type, Object: o}
	}
	switch ev.Type {
	case watch.Deleted:
		g.forget(gvk, u)
	case watch.Bookmark:
	default:
		msg := g.report(ctx, gvk, u, err)
		if s := g.standIn(gvk, u, msg); s != nil {
			return watch.Event{Type: ev.Type, Object: s}
		}
		ev.Type = watch.Deleted
	}
	return watch.Event{Type: ev.Type, Object: g.stub(gvk, u)}
}

// standIn is what the cache keeps for an EnvironmentProfile that does not
// decode: its metadata, status and namespaceSelector, marked with
// AnnotationUndecodable. Skipping it instead would let the Claims it
// selects render without it (without its delivery, signing or placement);
// with the stand-in, ValidateProfile reports it invalid, its status says
// why, and those Claims wait (claims.SelectProfile). Other kinds have no
// stand-in: a Claim or Artifact reconciled from a partial spec could act
// on what the user did not ask for, so they are left out until fixed.
func (g *Guard) standIn(gvk schema.GroupVersionKind, u *unstructured.Unstructured, msg string) runtime.Object {
	if gvk.Kind != "EnvironmentProfile" {
		return nil
	}
	p := g.stub(gvk, u).(*v1alpha1.EnvironmentProfile)
	if sel, ok, _ := unstructured.NestedMap(u.Object, "spec", "namespaceSelector"); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(sel, &p.Spec.NamespaceSelector)
	}
	if st, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(st, &p.Status)
	}
	ann := map[string]string{}
	for k, v := range p.Annotations {
		ann[k] = v
	}
	ann[v1alpha1.AnnotationUndecodable] = msg
	p.Annotations = ann
	return p
}

func (g *Guard) convert(gvk schema.GroupVersionKind, u *unstructured.Unstructured) (runtime.Object, error) {
	o, err := g.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
		return nil, err
	}
	return o, nil
}

// stub is the typed object with u's metadata only.
func (g *Guard) stub(gvk schema.GroupVersionKind, u *unstructured.Unstructured) runtime.Object {
	o, _ := g.scheme.New(gvk)
	m, _ := meta.Accessor(o)
	m.SetName(u.GetName())
	m.SetNamespace(u.GetNamespace())
	m.SetUID(u.GetUID())
	m.SetResourceVersion(u.GetResourceVersion())
	m.SetGeneration(u.GetGeneration())
	m.SetLabels(u.GetLabels())
	m.SetAnnotations(u.GetAnnotations())
	o.GetObjectKind().SetGroupVersionKind(gvk)
	return o
}

func skipKey(gvk schema.GroupVersionKind, u *unstructured.Unstructured) string {
	return gvk.Kind + " " + u.GetNamespace() + "/" + u.GetName()
}

func (g *Guard) setSkipped(gvk schema.GroupVersionKind, u *unstructured.Unstructured, bad bool) (changed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := skipKey(gvk, u)
	if g.skipped[k] == bad {
		return false
	}
	if bad {
		g.skipped[k] = true
		undecodableObjects.WithLabelValues(gvk.Kind).Inc()
	} else {
		delete(g.skipped, k)
		undecodableObjects.WithLabelValues(gvk.Kind).Dec()
	}
	return true
}

func (g *Guard) fixed(gvk schema.GroupVersionKind, u *unstructured.Unstructured) {
	if g.setSkipped(gvk, u, false) {
		ctrl.Log.WithName("cache").Info("object decodes again; no longer skipped", "kind", gvk.Kind, "namespace", u.GetNamespace(), "name", u.GetName())
	}
}

func (g *Guard) forget(gvk schema.GroupVersionKind, u *unstructured.Unstructured) {
	g.setSkipped(gvk, u, false)
}

// report logs the object and puts a Warning event on it, once per
// resourceVersion: the event's name is derived from it.
func (g *Guard) report(ctx context.Context, gvk schema.GroupVersionKind, u *unstructured.Unstructured, err error) string {
	g.setSkipped(gvk, u, true)
	field := badField(u.Object, func(m map[string]any) error {
		_, err := g.convert(gvk, &unstructured.Unstructured{Object: m})
		return err
	})
	msg := UndecodableMessage(gvk.Kind, field, err)
	ctrl.Log.WithName("cache").Error(err, "skipping an object that does not decode", "kind", gvk.Kind,
		"namespace", u.GetNamespace(), "name", u.GetName(), "field", field)
	ns := u.GetNamespace()
	if ns == "" {
		ns = corev1.NamespaceDefault // where events about cluster-scoped objects go
	}
	sum := sha256.Sum256([]byte(string(u.GetUID()) + "/" + u.GetResourceVersion()))
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName() + "." + hex.EncodeToString(sum[:8]), Namespace: ns},
		EventTime:  metav1.NewMicroTime(time.Now()),
		Regarding: corev1.ObjectReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
			Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()},
		Type: corev1.EventTypeWarning, Reason: ReasonUndecodable, Action: "Decode", Note: msg,
		ReportingController: "packline.dev/manager", ReportingInstance: "packline-manager",
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := g.events.EventsV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		ctrl.Log.WithName("cache").Error(err, "could not record the Undecodable event", "kind", gvk.Kind, "name", u.GetName())
	}
	return msg
}

// UndecodableMessage is what a user reads about a skipped object. The
// decode error may quote the value, so it goes through redact (no
// credential-bearing field decodes with a custom decoder, but a message
// never gets the chance to leak one).
func UndecodableMessage(kind, field string, err error) string {
	msg := fmt.Sprintf("%s: %s: this stored %s does not decode, so the manager cannot use it until it is fixed: re-apply it with a valid value",
		field, redact.String(err.Error()), kind)
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	return msg
}
