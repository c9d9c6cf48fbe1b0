package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// provisionVolumes stands in for a cluster's storage on the real node: for
// every Pending PVC without a storage class it makes a folder under dir and
// a hostPath PersistentVolume pre-bound to the claim, which the
// kube-controller-manager's binder then binds; a Released volume is deleted
// with its folder. The folder is world-writable because a hostPath volume
// ignores fsGroup, and the worker runs as a non-root user. (The process
// node needs none of this: it maps a PVC to a folder itself.)
func provisionVolumes(ctx context.Context, kube kubernetes.Interface, dir string) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pvcs, err := kube.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range pvcs.Items {
			pvc := &pvcs.Items[i]
			if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil ||
				(pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName != "") {
				continue
			}
			_ = provisionVolume(ctx, kube, dir, pvc)
		}
		pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: sandboxVolumeLabel})
		if err != nil {
			continue
		}
		for _, pv := range pvs.Items {
			if pv.Status.Phase == corev1.VolumeReleased {
				uid := pv.UID
				if err := kube.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err == nil && pv.Spec.HostPath != nil {
					_ = os.RemoveAll(pv.Spec.HostPath.Path)
				}
			}
		}
	}
}

// sandboxVolumeLabel marks the volumes provisionVolumes made.
const sandboxVolumeLabel = "sandbox.packline.dev/volume"

func provisionVolume(ctx context.Context, kube kubernetes.Interface, dir string, pvc *corev1.PersistentVolumeClaim) error {
	name := "sandbox-" + string(pvc.UID)
	path := filepath.Join(dir, string(pvc.UID))
	if err := os.MkdirAll(path, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o777); err != nil { // past the umask
		return err
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{sandboxVolumeLabel: "true"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
		},
	}
	_, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("volume for %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}
