package procnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// configError is a pod the kubelet would hold in a waiting state (a missing
// Secret, an unsupported volume) rather than fail.
type configError struct {
	reason string
	msg    string
}

func (e *configError) Error() string { return e.msg }

func configErr(reason, format string, args ...any) error {
	return &configError{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// containerSpec is everything needed to exec one container.
type containerSpec struct {
	name       string
	image      string
	argv       []string
	env        []string
	dir        string
	logPath    string
	termPath   string
	termPolicy corev1.TerminationMessagePolicy
}

// mountMap maps pod paths to local paths, longest prefix first.
type mountMap []struct{ pod, local string }

func (m mountMap) resolve(p string) (string, bool) {
	for _, e := range m {
		if p == e.pod {
			return e.local, true
		}
		if strings.HasPrefix(p, strings.TrimSuffix(e.pod, "/")+"/") {
			return filepath.Join(e.local, strings.TrimPrefix(p, e.pod)), true
		}
	}
	return "", false
}

// prepare materialises the pod's volumes and resolves every container's
// argv, env, working dir and termination file.
func (n *Node) prepare(ctx context.Context, pod *corev1.Pod) ([]containerSpec, error) {
	dir := n.podDir(pod)
	vols, err := n.volumes(ctx, pod, filepath.Join(dir, "volumes"))
	if err != nil {
		return nil, err
	}
	var specs []containerSpec
	for _, c := range pod.Spec.Containers {
		s, err := n.container(ctx, pod, c, vols, dir)
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

func (n *Node) container(ctx context.Context, pod *corev1.Pod, c corev1.Container, vols map[string]string, dir string) (containerSpec, error) {
	img := n.o.Images[c.Image]
	s := containerSpec{
		name: c.Name, image: c.Image,
		logPath:    filepath.Join(dir, c.Name+".log"),
		termPath:   filepath.Join(dir, c.Name+".termination-log"),
		termPolicy: c.TerminationMessagePolicy,
	}
	var mounts mountMap
	for _, vm := range c.VolumeMounts {
		local, ok := vols[vm.Name]
		if !ok {
			return s, configErr("CreateContainerConfigError", "volume %q of mount %s is not defined", vm.Name, vm.MountPath)
		}
		if vm.SubPath != "" {
			local = filepath.Join(local, filepath.Clean("/"+vm.SubPath))
		}
		mounts = append(mounts, struct{ pod, local string }{vm.MountPath, local})
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].pod) > len(mounts[j].pod) })

	env, err := n.env(ctx, pod, c)
	if err != nil {
		return s, err
	}
	// Values that name a mounted path are rewritten to the local folder, so
	// e.g. DOCKER_CONFIG=/var/run/packline/push-auth reaches the Secret's
	// files; then the image's PathEnv relocates paths the program reads
	// without being told.
	for i := range env {
		if local, ok := mounts.resolve(env[i].value); ok {
			env[i].value = local
		}
	}
	termPath := c.TerminationMessagePath
	if termPath == "" {
		termPath = corev1.TerminationMessagePathDefault
	}
	for podPath, name := range img.PathEnv {
		if podPath == termPath {
			env = setEnv(env, name, s.termPath)
		} else if local, ok := mounts.resolve(podPath); ok {
			env = setEnv(env, name, local)
		}
	}
	rootfs := filepath.Join(dir, "rootfs", c.Name)
	if err := mkdir(rootfs); err != nil {
		return s, err
	}
	s.dir = rootfs
	if c.WorkingDir != "" {
		if local, ok := mounts.resolve(c.WorkingDir); ok {
			s.dir = local
		}
	}
	if err := mkdir(s.dir); err != nil {
		return s, err
	}
	if !hasEnv(env, "HOME") {
		env = setEnv(env, "HOME", rootfs)
	}
	if !hasEnv(env, "PATH") {
		env = setEnv(env, "PATH", os.Getenv("PATH"))
	}
	env = setEnv(env, PodIPEnv, n.podIP(pod.UID))

	lookup := envLookup(env)
	s.argv = []string{img.Binary}
	if len(c.Command) > 0 {
		for _, a := range c.Command[1:] {
			s.argv = append(s.argv, expand(a, lookup))
		}
	}
	for _, a := range c.Args {
		s.argv = append(s.argv, expand(a, lookup))
	}
	s.env = append(append([]string{}, img.Env...), flatten(env)...)
	return s, nil
}

// volumes turns each pod volume into a local folder: a PVC into its
// persistent claim folder, emptyDir into a fresh folder, and Secrets and
// ConfigMaps into files.
func (n *Node) volumes(ctx context.Context, pod *corev1.Pod, root string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		local := filepath.Join(root, v.Name)
		switch {
		case v.PersistentVolumeClaim != nil || v.Ephemeral != nil:
			claim, ephemeral := podClaim(pod, v)
			pvc, err := n.o.Client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, claim, metav1.GetOptions{})
			if err == nil && ephemeral {
				if err := ephemeralClaimOwned(pod, pvc); err != nil {
					return nil, mountErr(v.Name, "%v", err)
				}
			}
			if apierrors.IsNotFound(err) {
				// Deleted since scheduling: the kubelet's volume manager
				// reports it (after its wait times out) as a FailedMount.
				return nil, claimGone(pod, v.Name, claim)
			}
			if err != nil {
				return nil, err
			}
			local = n.claimDir(pod.Namespace, claim)
			if err := mkdir(local); err != nil {
				return nil, err
			}
		case v.EmptyDir != nil:
			if err := mkdir(local); err != nil {
				return nil, err
			}
		case v.Secret != nil:
			sec, err := n.o.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && v.Secret.Optional != nil && *v.Secret.Optional {
				sec = nil
			} else if apierrors.IsNotFound(err) {
				return nil, mountErr(v.Name, "%s", secretNotFound(v.Secret.SecretName))
			} else if err != nil {
				return nil, err
			}
			data := map[string][]byte{}
			if sec != nil {
				data = sec.Data
			}
			var mk *missingKeyError
			if err := writeFiles(local, data, v.Secret.Items, v.Secret.DefaultMode, ptr.Deref(v.Secret.Optional, false)); errors.As(err, &mk) {
				return nil, mountErr(v.Name, "%s", missingKey("secret", mk.key))
			} else if err != nil {
				return nil, err
			}
		case v.ConfigMap != nil:
			cm, err := n.o.Client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
				cm = &corev1.ConfigMap{}
			} else if apierrors.IsNotFound(err) {
				return nil, mountErr(v.Name, "%s", configMapNotFound(v.ConfigMap.Name))
			} else if err != nil {
				return nil, err
			}
			data := map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			for k, b := range cm.BinaryData {
				data[k] = b
			}
			var mk *missingKeyError
			if err := writeFiles(local, data, v.ConfigMap.Items, v.ConfigMap.DefaultMode, ptr.Deref(v.ConfigMap.Optional, false)); errors.As(err, &mk) {
				return nil, mountErr(v.Name, "%s", missingKey("configmap", mk.key))
			} else if err != nil {
				return nil, err
			}
		case v.Projected != nil:
			if err := n.projected(ctx, pod, v, local); err != nil {
				return nil, err
			}
		case v.Image != nil:
			if err := imageVolume(ctx, v.Image.Reference, local); err != nil {
				return nil, configErr("ErrImagePull", "volume %q: %v", v.Name, err)
			}
		default:
			return nil, configErr("CreateContainerConfigError", "volume %q: only persistentVolumeClaim, emptyDir, secret, configMap, projected and image volumes are supported by the process node", v.Name)
		}
		out[v.Name] = local
	}
	return out, nil
}

// missingKeyError is an item naming a key the Secret or ConfigMap lacks.
type missingKeyError struct{ key string }

func (e *missingKeyError) Error() string { return fmt.Sprintf("key %q not found", e.key) }

// writeFiles writes a Secret's or ConfigMap's items (key → path, mode) as
// the kubelet does: a missing key (a *missingKeyError) fails the mount unless the
// volume is optional, then it is skipped.
func writeFiles(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool) error {
	// The kubelet builds the whole payload before it writes a file.
	for _, it := range items {
		if _, ok := data[it.Key]; !ok && !optional {
			return &missingKeyError{key: it.Key}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := mkdir(dir); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	// The pod's user is this process's user, so the owner must be able to
	// read whatever mode the pod asked for.
	mode |= 0o400
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok && optional {
			continue
		}
		if !ok {
			return fmt.Errorf("key %q not found", it.Key)
		}
		rel := filepath.Clean("/" + it.Path)
		p := filepath.Join(dir, rel)
		if err := mkdir(filepath.Dir(p)); err != nil {
			return err
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode) | 0o400
		}
		if err := os.WriteFile(p, b, m); err != nil {
			return err
		}
		if err := os.Chmod(p, m); err != nil {
			return err
		}
	}
	return nil
}
