package pipeline

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// fakeSealer's seal is the joined values: enough to see what is sealed.
type fakeSealer struct{}

func (fakeSealer) SealPush(kind, uid, digest, reference string) (string, error) {
	return strings.Join([]string{kind, uid, digest, reference}, "|"), nil
}

func (f fakeSealer) VerifyPush(kind, uid, digest, reference, seal string) bool {
	want, _ := f.SealPush(kind, uid, digest, reference)
	return seal != "" && seal == want
}

// sealPush seals only a push read from the worker's own pod, and only when
// status holds exactly that push.
func TestSealPush(t *testing.T) {
	ref := "r.example.com/m@" + digest
	sealed := "Artifact|" + owner.UID + "|" + digest + "|" + ref
	for _, tc := range []struct {
		name     string
		st       v1alpha1.PipelineStatus
		o        Observation
		resolved bool
		want     string
	}{
		{"a success the manager recorded", v1alpha1.PipelineStatus{Digest: digest, Reference: ref},
			Observation{State: StateSucceeded, Result: &workerv1.Result{Digest: digest, Reference: ref}}, false, sealed},
		{"a push before a signing failure", v1alpha1.PipelineStatus{Digest: digest, Reference: ref},
			Observation{State: StateFailed, Pushed: &workerv1.Pushed{Digest: digest, Reference: ref}}, false, sealed},
		{"status holds another reference", v1alpha1.PipelineStatus{Digest: digest, Reference: "evil.example.com/m@" + digest},
			Observation{State: StateSucceeded, Result: &workerv1.Result{Digest: digest, Reference: ref}}, false, ""},
		{"no push observed", v1alpha1.PipelineStatus{Digest: digest, Reference: ref},
			Observation{State: StateRunning}, false, ""},
		{"read back from the registry", v1alpha1.PipelineStatus{Digest: digest, Reference: ref},
			Observation{State: StateSucceeded, Result: &workerv1.Result{Digest: digest, Reference: ref}}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Pipeline{Kind: "Artifact", PushSealer: fakeSealer{}}
			st := tc.st
			p.sealPush(&scope{owner: owner, status: &st, resolved: tc.resolved}, tc.o)
			if diff := cmp.Diff(tc.want, st.PushSeal); diff != "" {
				t.Errorf("pushSeal (-want +got):\n%s", diff)
			}
		})
	}
}

// SealedReference hands on status.reference only under a valid seal.
func TestSealedReference(t *testing.T) {
	ref := "r.example.com/m@" + digest
	seal, _ := fakeSealer{}.SealPush("Artifact", owner.UID, digest, ref)
	obj := func(st v1alpha1.PipelineStatus) Object {
		return &v1alpha1.Artifact{ObjectMeta: metav1.ObjectMeta{Name: owner.Name, Namespace: owner.Namespace, UID: types.UID(owner.UID)}, Status: st}
	}
	for _, tc := range []struct {
		name   string
		sealer PushSealer
		st     v1alpha1.PipelineStatus
		want   string
	}{
		{"sealed", fakeSealer{}, v1alpha1.PipelineStatus{Digest: digest, Reference: ref, PushSeal: seal}, ref},
		{"written by hand", fakeSealer{}, v1alpha1.PipelineStatus{Digest: digest, Reference: ref}, ""},
		{"reference edited under a seal", fakeSealer{}, v1alpha1.PipelineStatus{Digest: digest, Reference: "evil.example.com/m@" + digest, PushSeal: seal}, ""},
		{"no sealer", nil, v1alpha1.PipelineStatus{Digest: digest, Reference: ref, PushSeal: seal}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Pipeline{Kind: "Artifact", PushSealer: tc.sealer}
			if diff := cmp.Diff(tc.want, p.SealedReference(obj(tc.st))); diff != "" {
				t.Errorf("SealedReference (-want +got):\n%s", diff)
			}
		})
	}
}
