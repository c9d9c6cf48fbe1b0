package postrender

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/resmap"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// imageVolumeRef is the fieldPath of an image volume's reference: the pod
// spec's path, and the volume's index.
var imageVolumeRef = regexp.MustCompile(`^(/.+)/volumes/([0-9]+)/image/reference$`)

// PullDir is where the init container mounts the emptyDir it fills.
const PullDir = "/var/run/packline/pull"

// pullAuthVolume holds the pod's first imagePullSecret as config.json.
const pullAuthVolume = "packline-pull-auth"

// InitPulls renders each Artifact binding with mount InitPull whose value
// the Claim sets: the image volume its fieldPath names becomes an emptyDir
// of the same name (so the workload's volumeMounts stay as they are), and
// an init container running image's `worker pull` fills it with the
// reference the volume had. It runs after Profile, so that it pulls what
// the node would have pulled (Profile rewrites image volumes' references
// too) with the pull Secrets the pod ends with; the worker image is
// rewritten by the profile's registry rewrites as every container is.
func InitPulls(m resmap.ResMap, params []v1alpha1.ParameterBinding, values map[string]any, ip *workerv1.InitPull, profile *v1alpha1.EnvironmentProfileSpec) error {
	if ip == nil {
		ip = &workerv1.InitPull{}
	}
	if profile != nil && ip.Image != "" {
		c := *ip
		c.Image = Rewrite(ip.Image, profile.RegistryRewrites)
		ip = &c
	}
	for i, b := range params {
		if b.Mount != v1alpha1.ArtifactMountInitPull {
			continue
		}
		if _, ok := values[b.Value]; !ok {
			continue // the template's own volume stays
		}
		if err := initPull(m, i, b, ip); err != nil {
			return err
		}
	}
	return nil
}

func initPull(m resmap.ResMap, i int, b v1alpha1.ParameterBinding, ip *workerv1.InitPull) error {
	image := ip.Image
	rejected := func(format string, a ...any) error {
		return failure.Permanent(workerv1.ReasonTemplateRejected, fmt.Errorf("parameters[%d]: "+format, append([]any{i}, a...)...))
	}
	sub := imageVolumeRef.FindStringSubmatch(b.FieldPath)
	if sub == nil {
		return rejected("fieldPath %q: mount InitPull binds an image volume's reference, <pod spec>/volumes/<index>/image/reference", b.FieldPath)
	}
	if image == "" {
		return failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("parameters[%d]: mount InitPull needs the worker image (spec initPull.image is empty)", i))
	}
	r := find(m, b.Target)
	if r == nil {
		return rejected("targets %s/%s, which the template does not render", b.Target.Kind, b.Target.Name)
	}
	if want := "/" + strings.Join(podSpecPaths[r.GetKind()], "/"); len(podSpecPaths[r.GetKind()]) == 0 || sub[1] != want {
		return rejected("fieldPath %q is not in the pod spec of %s %s", b.FieldPath, r.GetKind(), r.GetName())
	}
	spec, err := podSpec(r)
	if err != nil || spec == nil {
		return rejected("%s %s has no pod template", r.GetKind(), r.GetName())
	}
	idx, _ := strconv.Atoi(sub[2])
	vols, _ := elements(spec, "volumes")
	if idx >= len(vols) {
		return rejected("fieldPath %q: %s %s has %d volumes", b.FieldPath, r.GetKind(), r.GetName(), len(vols))
	}
	vol := vols[idx]
	name := kyaml.GetValue(vol.Field("name").Value)
	refNode, err := vol.Pipe(kyaml.Lookup("image", "reference"))
	if err != nil || refNode == nil || name == "" {
		return rejected("fieldPath %q: volume %d is not an image volume with a name", b.FieldPath, idx)
	}
	ref := kyaml.GetValue(refNode)
	if err := vol.PipeE(kyaml.Clear("image")); err != nil {
		return err
	}
	if err := setField(vol, "emptyDir", map[string]any{}); err != nil {
		return err
	}
	if err := readOnlyMounts(spec, name); err != nil {
		return err
	}
	plainHTTP, insecure := slices.Contains(ip.PlainHTTP, b.Value), slices.Contains(ip.Insecure, b.Value)
	var auth string
	if secrets, err := spec.Pipe(kyaml.Lookup("imagePullSecrets")); err == nil && secrets != nil && !plainHTTP && !insecure {
		// The pod's pull Secret is the template's or the profile's, not
		// the tenant's; the transport comes from the tenant's own Artifact
		// (spec.target), so over a transport the tenant weakened it is
		// never sent (as a private template's push credential is not:
		// claims.PrivateTarget). The kubelet never weakens it per pod.
		if items, _ := secrets.Elements(); len(items) > 0 {
			auth = kyaml.GetValue(items[0].Field("name").Value)
		}
	}
	c := InitPullContainer(name, ref, image, plainHTTP, insecure, auth != "")
	if err := prepend(spec, "initContainers", c); err != nil {
		return err
	}
	if auth == "" {
		return nil
	}
	return appendUnique(spec, "volumes", PullAuthVolume(auth), func(e *kyaml.RNode) bool {
		return kyaml.GetValue(e.Field("name").Value) == pullAuthVolume
	})
}

// readOnlyMounts makes every mount of volume in the pod's containers
// read-only: the image volume the emptyDir replaces was, and the model a
// workload reads must not be changed by it under another container.
func readOnlyMounts(spec *kyaml.RNode, volume string) error {
	readOnly := kyaml.SetField("readOnly", kyaml.NewRNode(&kyaml.Node{Kind: kyaml.ScalarNode, Tag: kyaml.NodeTagBool, Value: "true"}))
	return eachContainer(spec, func(c *kyaml.RNode) error {
		mounts, err := elements(c, "volumeMounts")
		if err != nil {
			return err
		}
		for _, vm := range mounts {
			if kyaml.GetValue(vm.Field("name").Value) == volume {
				if err := vm.PipeE(readOnly); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// InitPullContainer is the init container that fills volume with ref: the
// worker image's `worker pull`, hardened as the worker's own Jobs are (so
// a namespace with the restricted Pod Security level admits it), with the
// pull Secret at DOCKER_CONFIG when auth.
func InitPullContainer(volume, ref, image string, plainHTTP, insecure, auth bool) corev1.Container {
	args := []string{"pull"}
	if plainHTTP {
		args = append(args, "--plain-http")
	}
	if insecure {
		args = append(args, "--insecure")
	}
	args = append(args, ref, PullDir)
	c := corev1.Container{
		Name:         initPullName(volume),
		Image:        image,
		Args:         args,
		VolumeMounts: []corev1.VolumeMount{{Name: volume, MountPath: PullDir}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Privileged:               ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	if auth {
		c.Env = []corev1.EnvVar{{Name: "DOCKER_CONFIG", Value: "/var/run/packline/pull-auth"}}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: pullAuthVolume, MountPath: "/var/run/packline/pull-auth", ReadOnly: true})
	}
	return c
}

// PullAuthVolume is the pull Secret (a dockerconfigjson) as config.json.
func PullAuthVolume(secret string) corev1.Volume {
	return corev1.Volume{Name: pullAuthVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}},
	}}}
}

// initPullName is "packline-pull-<volume>", within a container name's 63
// characters.
func initPullName(volume string) string {
	n := "packline-pull-" + volume
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}

// prepend puts v first in the list field: the model is in place before
// any of the template's own init containers runs.
func prepend(spec *kyaml.RNode, field string, v any) error {
	list, err := spec.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, field))
	if err != nil {
		return err
	}
	n, err := toNode(v)
	if err != nil {
		return err
	}
	list.YNode().Content = append([]*kyaml.Node{n.YNode()}, list.YNode().Content...)
	return nil
}
