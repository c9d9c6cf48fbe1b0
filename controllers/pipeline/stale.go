package pipeline

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// staleRetry is how soon a reconcile that met a cache still behind its own
// status patch runs again: the watch delivers the patch within
// milliseconds, but no event wakes the reconciler for it (status changes
// are filtered out), so it must ask.
const staleRetry = 50 * time.Millisecond

// patched remembers, per object UID, the resourceVersion that this
// manager's last status patch replaced. A reconcile woken (by a Job or pod
// event) before the cache has the patch would see that version again, and
// redo the run's first steps from the old status: a second status patch
// and a second phase event for the same change, with new timestamps. Only
// equality is tested, never order, since resourceVersions are opaque.
type patched struct{ m sync.Map }

// behind reports whether obj, as cached, predates this manager's own last
// status patch, and forgets the entry once the cache has moved on.
func (w *patched) behind(obj client.Object) bool {
	v, ok := w.m.Load(obj.GetUID())
	if !ok {
		return false
	}
	if v.(string) == obj.GetResourceVersion() {
		return true
	}
	w.m.Delete(obj.GetUID())
	return false
}

// record notes a status patch of obj made from the version base.
func (w *patched) record(obj client.Object, base string) {
	if obj.GetResourceVersion() != base {
		w.m.Store(obj.GetUID(), base)
	}
}

// forget drops obj's entry (the object is being deleted).
func (w *patched) forget(obj client.Object) { w.m.Delete(obj.GetUID()) }
