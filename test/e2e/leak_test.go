package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
)

// Secrets whose values are recognisable markers go through every failure
// the stack can be made to produce here (a refused push, a refused Git
// clone, a gated Hugging Face repo, a pre-signed HTTP URL that fails);
// afterwards no status, event, manager log, node log or worker log holds a
// marker.
func TestNoCredentialLeavesItsSecret(t *testing.T) {
	const (
		pushMarker = "PushPassMARKERx1"
		gitMarker  = "GitPassMARKERx2"
		hfMarker   = "hf_HfTokenMARKERx3abc"
		sigMarker  = "SigMARKERx4"
	)
	markers := []string{pushMarker, gitMarker, hfMarker, sigMarker}
	reg, err := sandbox.StartRegistry(sandbox.RegistryOptions{
		Dir: filepath.Join(t.TempDir(), "auth-registry"), Bin: registryBin, Users: map[string]string{"alice": "the-right-one"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()
	git := gitserver.Serve(t, gitserver.Repo{Name: "models", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}},
		gitserver.Options{Username: "alice", Password: "the-right-one"})
	ns := newNamespace(t)

	auth := base64.StdEncoding.EncodeToString([]byte("alice:" + pushMarker))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{"auth": auth}}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "push", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		StringData: map[string]string{"username": "alice", "password": gitMarker}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hf", Namespace: ns},
		StringData: map[string]string{"token": hfMarker}})

	push := newArtifact(ns, "push-refused", "packline/tiny-model").Obj()
	push.Spec.Target = v1alpha1.Target{Repository: reg.Host + "/leak/push", PlainHTTP: true,
		PushSecretRef: &corev1.LocalObjectReference{Name: "push"}}
	gitSrc := newArtifact(ns, "git-refused", "").Git(git.URL, "main", "").GitSecret("git").Obj()
	hf := newArtifact(ns, "hf-gated", "packline/no-such-model").HFToken("hf").Obj()
	presigned := newArtifact(ns, "presigned", "").
		HTTP(sb.HF.URL + "/no/such/file.tar.gz?X-Amz-Credential=AKIA&X-Amz-Signature=" + sigMarker).Obj()
	all := []*v1alpha1.Artifact{push, gitSrc, hf, presigned}
	for _, a := range all {
		a.Spec.RetryLimit = new(int32)
		create(t, a)
	}
	for _, a := range all {
		waitFor(t, func(g Gomega) {
			g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
			g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseFailed), "%s: %+v", a.Name, a.Status.Conditions)
		}).Should(Succeed())
	}

	// Everything a user or an operator can read.
	var texts []string
	for _, a := range all {
		b, _ := json.Marshal(a.Status)
		texts = append(texts, string(b))
	}
	var events eventsv1.EventList
	if err := sb.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Fatal("no events to check")
	}
	for _, e := range events.Items {
		texts = append(texts, e.Note)
	}
	var pods corev1.PodList
	if err := sb.Client.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				texts = append(texts, cs.State.Terminated.Message)
			}
		}
	}
	logs := 0
	for _, dir := range []string{sb.Logs(), filepath.Join(sb.Dir, "node")} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err == nil {
				logs++
				texts = append(texts, p+":\n"+string(b))
			}
			return nil
		})
	}
	if logs < 3 {
		t.Fatalf("found %d log files; the manager, node and worker logs must all be read", logs)
	}
	for _, text := range texts {
		for _, m := range markers {
			if i := strings.Index(text, m); i >= 0 {
				lo := max(0, i-200)
				t.Errorf("marker %s leaked:\n…%s…", m, text[lo:min(len(text), i+100)])
			}
		}
	}
	t.Logf("checked %d statuses, %d events, %d termination messages and %d log files", len(all), len(events.Items), len(pods.Items), logs)
}
