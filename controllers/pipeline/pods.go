package pipeline

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// JobPods are the pods of job whose termination message the pipeline may
// read: listed by the job-name label (selectable, so the list stays
// small), then kept only when the Job controls them (OwnPods). The label
// alone is no proof: anyone who may create pods in the Job's namespace (a
// tenant, in its own) writes it, with a termination message of its choice.
func JobPods(ctx context.Context, r client.Reader, job *batchv1.Job) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return nil, fmt.Errorf("listing pods of Job %s: %w", job.Name, err)
	}
	return OwnPods(job, pods.Items), nil
}

// OwnPods keeps the pods whose controller owner reference is job itself,
// by UID: what the Job controller sets on the pods it makes. A pod that
// merely carries the Job's labels, or points at an earlier Job of the same
// name, is left out.
func OwnPods(job *batchv1.Job, pods []corev1.Pod) []corev1.Pod {
	var own []corev1.Pod
	for i := range pods {
		if controlledBy(&pods[i], job) {
			own = append(own, pods[i])
		}
	}
	return own
}

// controlledBy reports whether o's controller owner reference is job, by
// UID and kind.
func controlledBy(o metav1.Object, job *batchv1.Job) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && job.UID != "" && ref.UID == job.UID && ref.Kind == "Job" &&
		ref.APIVersion == batchv1.SchemeGroupVersion.String()
}
