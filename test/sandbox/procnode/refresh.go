package procnode

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Secret volumes follow their Secret while the pod runs, as the kubelet's
// do: a certificate that a pod's own process renews into its Secret (the
// manager's webhook certificate) reaches the pod's files. Each changed file
// is replaced with a rename, so a reader sees the old or the new content,
// never a partial one. (ConfigMap volumes are written once, at start.)

// watchSecrets registers the Secret informer on factory.
func (n *Node) watchSecrets(factory informers.SharedInformerFactory) (cache.InformerSynced, error) {
	inf := factory.Core().V1().Secrets().Informer()
	n.secrets = factory.Core().V1().Secrets().Lister()
	refresh := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok {
			n.refreshSecret(s)
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: refresh, UpdateFunc: func(_, o any) { refresh(o) }})
	return inf.HasSynced, err
}

// refreshSecret rewrites every running pod's volumes of s.
func (n *Node) refreshSecret(s *corev1.Secret) {
	n.mu.Lock()
	var runs []*podRun
	for _, r := range n.runs {
		if r.pod.Namespace == s.Namespace {
			runs = append(runs, r)
		}
	}
	n.mu.Unlock()
	for _, r := range runs {
		n.refreshVolumes(r, s)
	}
}

// refreshPod brings a just-launched pod's Secret volumes up to date, in
// case a Secret changed between its volumes being written and the pod
// being registered for refreshes.
func (n *Node) refreshPod(r *podRun) {
	if n.secrets == nil {
		return
	}
	for _, v := range r.pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		s, err := n.secrets.Secrets(r.pod.Namespace).Get(v.Secret.SecretName)
		if apierrors.IsNotFound(err) || err != nil {
			continue
		}
		n.refreshVolumes(r, s)
	}
}

func (n *Node) refreshVolumes(r *podRun, s *corev1.Secret) {
	select {
	case <-r.done:
		return
	default:
	}
	for _, v := range r.pod.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != s.Name {
			continue
		}
		dir := filepath.Join(n.podDir(r.pod), "volumes", v.Name)
		changed, err := refreshFiles(dir, s.Data, v.Secret.Items, v.Secret.DefaultMode, ptr.Deref(v.Secret.Optional, false))
		if err != nil {
			n.logf("pod %s/%s: refreshing volume %s: %v", r.pod.Namespace, r.pod.Name, v.Name, err)
		} else if changed {
			n.logf("pod %s/%s: volume %s follows Secret %s", r.pod.Namespace, r.pod.Name, v.Name, s.Name)
		}
	}
}

// refreshFiles makes dir hold what writeFiles would write now: changed and
// new files are renamed into place, files no longer wanted are removed.
func refreshFiles(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool) (bool, error) {
	tmp := dir + "..new" // volume names cannot contain "..": no clash
	defer os.RemoveAll(tmp)
	if err := writeFiles(tmp, data, items, defaultMode, optional); err != nil {
		return false, err
	}
	changed := false
	keep := map[string]bool{}
	err := filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(tmp, p)
		if err != nil {
			return err
		}
		keep[rel] = true
		dst := filepath.Join(dir, rel)
		nb, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, nb) {
			return nil
		}
		if err := mkdir(filepath.Dir(dst)); err != nil {
			return err
		}
		changed = true
		return os.Rename(p, dst)
	})
	if err != nil {
		return changed, err
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err == nil && !keep[rel] {
			changed = true
			return os.Remove(p)
		}
		return err
	})
	return changed, err
}
