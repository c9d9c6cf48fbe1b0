package pipeline

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// DefaultWorkspaceSize is used when neither spec nor profile sets one.
var DefaultWorkspaceSize = resource.MustParse("10Gi")

// Owner identifies the resource a child object belongs to.
type Owner struct {
	GVK       schema.GroupVersionKind
	Name      string
	Namespace string
	UID       string
	// Instance is the manager instance (--instance) that makes the children.
	Instance string
}

func (o Owner) ref() metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         o.GVK.GroupVersion().String(),
		Kind:               o.GVK.Kind,
		Name:               o.Name,
		UID:                types.UID(o.UID),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// OwnerLabels select every child object of one owner.
func (o Owner) OwnerLabels() map[string]string {
	return instanceLabels(map[string]string{
		LabelManagedBy: managedBy,
		LabelOwnerKind: o.GVK.Kind,
		LabelOwnerName: o.Name,
		LabelOwnerUID:  o.UID,
	}, o.Instance)
}

// placement returns where a child object of o goes and how it points back
// to o. In o's namespace (ns empty or equal) it gets an owner reference, so
// the garbage collector deletes it with o. In another namespace an owner
// reference would be invalid; it gets the owner-namespace label instead, and
// RemoteFinalizer deletes it with o.
func (o Owner) placement(ns string) (string, map[string]string, []metav1.OwnerReference) {
	labels := o.OwnerLabels()
	// A cluster-scoped owner (a ClaimTemplate's check) may own objects in
	// any namespace.
	if ns == "" || ns == o.Namespace || o.Namespace == "" {
		if ns == "" {
			ns = o.Namespace
		}
		return ns, labels, []metav1.OwnerReference{o.ref()}
	}
	labels[LabelOwnerNamespace] = o.Namespace
	return ns, labels, nil
}

// WorkspaceParams are the inputs of BuildWorkspace.
type WorkspaceParams struct {
	Owner Owner
	// Namespace of the PVC; empty means the owner's.
	Namespace    string
	Size         *resource.Quantity
	StorageClass *string
}

// BuildWorkspace returns the workspace PVC <base>-workspace (see RunBase).
func BuildWorkspace(p WorkspaceParams) *corev1.PersistentVolumeClaim {
	size := *workspaceSize(p)
	ns, labels, refs := p.Owner.placement(p.Namespace)
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            WorkspaceName(RunBase(p.Owner, ns)),
			Namespace:       ns,
			Labels:          labels,
			OwnerReferences: refs,
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: p.StorageClass,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size},
			},
		},
	}
}

// JobParams are the inputs of BuildJob.
type JobParams struct {
	// Kind is what the Job does (LabelJobKind); NewJob sets it.
	Kind  JobKind
	Owner Owner
	// Namespace of the Job (and its pods); empty means the owner's.
	Namespace  string
	Generation int64
	Attempt    int32
	// InputsHash identifies the effective inputs; see InputsHash.
	InputsHash string
	// Image is the worker image (the manager's --worker-image).
	Image string
	// Command is the worker subcommand: "artifact" or "claim".
	Command string
	// SpecJSON is the worker's document; it must hold no secret.
	SpecJSON string
	// Env, Volumes and Mounts carry credentials by reference only.
	Env     []corev1.EnvVar
	Volumes []corev1.Volume
	Mounts  []corev1.VolumeMount

	// EphemeralWorkspace uses an emptyDir instead of the workspace PVC,
	// for Jobs (cleanup) that may run after the PVC was freed.
	EphemeralWorkspace bool
	// DispatchedWorkspace, for a Job another cluster runs (ManagedBy), puts
	// the workspace in a generic ephemeral volume of this size and class,
	// created with the pod wherever it runs: a workspace PVC made here
	// could not be mounted there, and MultiKueue copies no PVC. Not an
	// emptyDir: that would put a model of any size on the worker node's
	// root disk, where the ephemeral volume gets the storage class and
	// size the workspace asks for, and goes with the pod
	// (test/e2e/multikueue asserts no PVC on the management cluster).
	DispatchedWorkspace *WorkspaceParams

	Timeout          time.Duration
	TTLAfterFinished time.Duration
	QueueName        string
	// PriorityClass is the Kueue WorkloadPriorityClass of a queued Job.
	PriorityClass string
	// ManagedBy, on a queued Job, hands the Job to another controller
	// (spec.managedBy), as MultiKueue needs: the local Job controller then
	// never runs it, and the dispatcher mirrors the worker cluster's status.
	ManagedBy          string
	Resources          *corev1.ResourceRequirements
	ServiceAccountName string
	// TmpSize bounds the writable /tmp; zero leaves it unbounded.
	TmpSize resource.Quantity
	// WorkspaceSize, when set, bounds what an archive may expand to: past
	// it, extraction would fill the volume and fail less clearly.
	WorkspaceSize *resource.Quantity
	// Pushed, when set, is the artifact an earlier attempt of the run
	// pushed before its signature failed: this attempt only signs it.
	Pushed *workerv1.Pushed
}

const workerContainer = "worker"

// managedByOf: only a queued Job is dispatched; one without a queue runs here.
func managedByOf(p JobParams) *string {
	if p.QueueName == "" || p.ManagedBy == "" {
		return nil
	}
	return ptr.To(p.ManagedBy)
}

// BuildJob returns the Job for one attempt. The controller owns retries, so
// backoffLimit is 0; and it never edits the Job after creation, because Kueue
// owns spec.suspend.
func BuildJob(p JobParams) *batchv1.Job {
	ns, labels, refs := p.Owner.placement(p.Namespace)
	name := JobName(RunBase(p.Owner, ns), p.Generation, p.InputsHash, p.Attempt)
	labels[LabelGeneration] = strconv.FormatInt(p.Generation, 10)
	labels[LabelAttempt] = strconv.Itoa(int(p.Attempt))
	labels[LabelInputs] = p.InputsHash
	if p.Kind != "" {
		labels[LabelJobKind] = string(p.Kind)
	}
	jobLabels := copyMap(labels)
	if p.QueueName != "" {
		jobLabels[QueueLabel] = p.QueueName
		if p.PriorityClass != "" {
			jobLabels[PriorityClassLabel] = p.PriorityClass
		}
	}

	env := append([]corev1.EnvVar{
		{Name: workerv1.EnvSpec, Value: p.SpecJSON},
		// Tools that honour HOME or TMPDIR must write to the writable tmp.
		{Name: "HOME", Value: workerv1.TmpDir},
		{Name: "TMPDIR", Value: workerv1.TmpDir},
	}, p.Env...)
	// What the provenance records about the run: the image and the Job.
	env = append(env, corev1.EnvVar{Name: workerv1.EnvWorkerImage, Value: p.Image}, corev1.EnvVar{Name: workerv1.EnvInvocation, Value: ns + "/" + name})
	if p.Pushed != nil {
		env = append(env, corev1.EnvVar{Name: workerv1.EnvPushedDigest, Value: p.Pushed.Digest}, corev1.EnvVar{Name: workerv1.EnvPushedRevision, Value: p.Pushed.SourceRevision})
	}
	if p.WorkspaceSize != nil && !p.EphemeralWorkspace {
		env = append(env, corev1.EnvVar{Name: workerv1.EnvArchiveMaxBytes, Value: strconv.FormatInt(p.WorkspaceSize.Value(), 10)})
	}
	mounts := append([]corev1.VolumeMount{
		{Name: "workspace", MountPath: workerv1.WorkspaceDir},
		{Name: "tmp", MountPath: workerv1.TmpDir},
	}, p.Mounts...)
	workspace := corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: WorkspaceName(RunBase(p.Owner, ns))},
	}
	if p.EphemeralWorkspace {
		workspace = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	if d := p.DispatchedWorkspace; d != nil && managedByOf(p) != nil {
		workspace = corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: BuildWorkspace(*d).Spec},
		}}
	}
	volumes := append([]corev1.Volume{
		{Name: "workspace", VolumeSource: workspace},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: tmpDir(p.TmpSize)}},
	}, p.Volumes...)

	var resources corev1.ResourceRequirements
	if p.Resources != nil {
		resources = *p.Resources
	}
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       ns,
			Labels:          jobLabels,
			OwnerReferences: refs,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Suspend:      ptr.To(p.QueueName != ""),
			ManagedBy:    managedByOf(p),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					ServiceAccountName:           p.ServiceAccountName,
					EnableServiceLinks:           ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						RunAsGroup:     ptr.To[int64](65532),
						FSGroup:        ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:                     workerContainer,
						Image:                    p.Image,
						Args:                     []string{p.Command},
						Env:                      env,
						VolumeMounts:             mounts,
						Resources:                resources,
						WorkingDir:               workerv1.WorkspaceDir,
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						ImagePullPolicy:          corev1.PullIfNotPresent,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							RunAsNonRoot:             ptr.To(true),
							Privileged:               ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
					}},
					Volumes: volumes,
				},
			},
		},
	}
	if p.Timeout > 0 {
		job.Spec.ActiveDeadlineSeconds = ptr.To(int64(p.Timeout / time.Second))
	}
	if p.TTLAfterFinished > 0 {
		job.Spec.TTLSecondsAfterFinished = ptr.To(int32(p.TTLAfterFinished / time.Second))
	}
	return job
}

func tmpDir(size resource.Quantity) *corev1.EmptyDirVolumeSource {
	if size.IsZero() {
		return &corev1.EmptyDirVolumeSource{}
	}
	return &corev1.EmptyDirVolumeSource{SizeLimit: &size}
}

// workspaceSize is the size the workspace PVC asks for.
func workspaceSize(p WorkspaceParams) *resource.Quantity {
	if p.Size != nil {
		return p.Size
	}
	return &DefaultWorkspaceSize
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
