package procnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// projected fills a projected volume the way the kubelet does for the
// kube-api-access volume that ServiceAccount admission adds to every pod
// with a token: a ServiceAccount token from the TokenRequest API, bound to
// the pod so it dies with it; ConfigMap keys (kube-root-ca.crt); and the
// downward API (the namespace). A pod run here then authenticates as its
// ServiceAccount, with exactly that account's RBAC. Tokens are not refreshed:
// a sandbox run is far shorter than their hour.
func (n *Node) projected(ctx context.Context, pod *corev1.Pod, v corev1.Volume, dir string) error {
	files := map[string][]byte{}
	for _, src := range v.Projected.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: src.ServiceAccountToken.ExpirationSeconds,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			}}
			if src.ServiceAccountToken.Audience != "" {
				tr.Spec.Audiences = []string{src.ServiceAccountToken.Audience}
			}
			sa := pod.Spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			out, err := n.o.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
			if err != nil {
				return mountErr(v.Name, "token for serviceaccount %q: %v", sa, err)
			}
			files[src.ServiceAccountToken.Path] = []byte(out.Status.Token)
		case src.ConfigMap != nil:
			cm, err := n.o.Client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.ConfigMap.Name, metav1.GetOptions{})
			optional := src.ConfigMap.Optional != nil && *src.ConfigMap.Optional
			if apierrors.IsNotFound(err) && optional {
				continue
			} else if err != nil {
				return mountErr(v.Name, "configmap %q: %v", src.ConfigMap.Name, err)
			}
			for _, it := range keys(src.ConfigMap.Items, cm.Data) {
				b, ok := cm.Data[it.Key]
				if !ok {
					return mountErr(v.Name, "configmap %q has no key %q", cm.Name, it.Key)
				}
				files[it.Path] = []byte(b)
			}
		case src.DownwardAPI != nil:
			for _, it := range src.DownwardAPI.Items {
				if it.FieldRef == nil {
					return configErr("CreateContainerConfigError", "volume %q: only fieldRef downward API items are supported by the process node", v.Name)
				}
				val, err := fieldValue(pod, n.podIP(pod.UID), it.FieldRef.FieldPath)
				if err != nil {
					return configErr("CreateContainerConfigError", "volume %q: %v", v.Name, err)
				}
				files[it.Path] = []byte(val)
			}
		default:
			return configErr("CreateContainerConfigError", "volume %q: unsupported projected source", v.Name)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for p, b := range files {
		path := filepath.Join(dir, filepath.Clean("/"+p))
		if err := mkdir(filepath.Dir(path)); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return mkdir(dir)
}

func keys(items []corev1.KeyToPath, data map[string]string) []corev1.KeyToPath {
	if len(items) > 0 {
		return items
	}
	for k := range data {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	return items
}
