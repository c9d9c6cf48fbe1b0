package realnode

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/sandbox"
)

// modelServer is a template whose Deployment mounts the model as an image
// volume at /model, restricted-compliant, running the pause image (the
// test reads /model from the host, through the container's root).
const modelServer = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: server
spec:
  replicas: 1
  selector:
    matchLabels: {app: server}
  template:
    metadata:
      labels: {app: server}
    spec:
      terminationGracePeriodSeconds: 0
      securityContext:
        runAsNonRoot: true
        seccompProfile: {type: RuntimeDefault}
      containers:
        - name: server
          image: PAUSE
          securityContext:
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
          volumeMounts:
            - name: model
              mountPath: /model
              readOnly: true
      volumes:
        - name: model
          image:
            reference: registry.example.com/models/unset:latest
`

// A Claim binds the model with mount InitPull into a restricted namespace:
// the rendered Deployment, applied by Flux, has an emptyDir where the
// image volume was and a worker init container (the shipped worker image,
// non-root, read-only root, no capabilities, admitted by the API server's
// restricted Pod Security) that pulls the Artifact's image view into it,
// verifying every digest; the workload container reads the model's files
// there. On the way, the ClaimTemplate's check Job (not a run) completes
// in a container on the real node.
func TestModelInitPulledIntoWorkload(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	tree := t.TempDir()
	for name, body := range map[string]string{
		"server/kustomization.yaml": "resources: [deployment.yaml]\n",
		"server/deployment.yaml":    strings.Replace(modelServer, "PAUSE", sb.PauseImage(), 1),
	} {
		if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo, err := sandbox.ServeGitRepo(sb.ServeIP(), t.TempDir(), "models", tree)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	ns := newNamespace(t, sb, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	a := newArtifact(sb, ns, "tiny").Obj()
	mustCreate(t, a)
	waitReady(t, sb, a)

	tpl := &v1alpha1.ClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "initpull-" + ns},
		Spec: v1alpha1.ClaimTemplateSpec{
			Source:       v1alpha1.TemplateSource{URL: repo.URL, Ref: "main", Path: "server"},
			Kinds:        []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}},
			ValuesSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"model":{"type":"string"}}}`)},
			Parameters: []v1alpha1.ParameterBinding{{Value: "model", Kind: v1alpha1.BindingArtifact, Mount: v1alpha1.ArtifactMountInitPull,
				Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "server"}, FieldPath: "/spec/template/spec/volumes/0/image/reference"}},
			Access:           v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sandbox.TenantLabels}},
			RepositoryPrefix: sb.Registry.Host + "/claims",
		},
	}
	mustCreate(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })

	// The template's check Job ran in a container here and succeeded.
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(tpl), tpl)).To(Succeed())
		g.Expect(tpl.Status.Check).NotTo(BeNil(), "conditions %+v", tpl.Status.Conditions)
	}).Should(Succeed(), "logs in %s", sb.Logs())
	checkNS, checkJob, _ := strings.Cut(tpl.Status.Check.JobRef, "/")
	var checkPods corev1.PodList
	g := NewWithT(t)
	g.Expect(sb.Client.List(ctx, &checkPods, client.InNamespace(checkNS), client.MatchingLabels{"batch.kubernetes.io/job-name": checkJob})).To(Succeed())
	g.Expect(checkPods.Items).To(HaveLen(1), "the check Job's pod (TTL is an hour)")
	cp := checkPods.Items[0]
	g.Expect(cp.Spec.NodeName).To(Equal(sb.NodeName()))
	g.Expect(cp.Status.Phase).To(Equal(corev1.PodSucceeded))
	g.Expect(cp.Status.ContainerStatuses[0].ContainerID).To(HavePrefix("containerd://"), "the check ran in a container")
	g.Expect(cp.Labels).To(HaveKeyWithValue(pipeline.LabelOwnerUID, string(tpl.UID)))

	mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}})
	mustCreate(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
	}})
	mustCreate(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: ns}}})
	c := &v1alpha1.Claim{
		ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: ns},
		Spec: v1alpha1.ClaimSpec{
			TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name},
			Values:      &apiextensionsv1.JSON{Raw: []byte(`{"model":"` + a.Name + `"}`)},
			Target:      &v1alpha1.Target{PlainHTTP: true},
			Delivery:    &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer", Wait: ptr.To(false)}},
		},
	}
	mustCreate(t, c)
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		st := &c.Status.PipelineStatus
		g.Expect(isTrue(st, "Stalled")).To(BeFalse(), "stalled: %+v", condition(st, "Stalled"))
		g.Expect(isTrue(st, v1alpha1.ConditionDelivered)).To(BeTrue(), "delivered: %+v", condition(st, v1alpha1.ConditionDelivered))
	}).Should(Succeed(), "logs in %s", sb.Logs())

	dep := &appsv1.Deployment{}
	g.Expect(sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "server"}, dep)).To(Succeed())
	spec := dep.Spec.Template.Spec
	g.Expect(spec.Volumes[0].Image).To(BeNil(), "no image volume left")
	g.Expect(spec.Volumes[0].EmptyDir).NotTo(BeNil())
	g.Expect(spec.InitContainers).To(HaveLen(1))
	g.Expect(spec.InitContainers[0].Image).To(Equal(sb.WorkerImage()))
	g.Expect(spec.InitContainers[0].Args).To(Equal([]string{"pull", "--plain-http", a.Status.ImageReference, "/var/run/packline/pull"}))

	start := time.Now()
	var pod corev1.Pod
	waitFor(t, func(g Gomega) {
		var pods corev1.PodList
		g.Expect(sb.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "server"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		pod = pods.Items[0]
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "init %+v", pod.Status.InitContainerStatuses)
		g.Expect(pod.Status.ContainerStatuses).NotTo(BeEmpty())
		g.Expect(pod.Status.ContainerStatuses[0].ContainerID).NotTo(BeEmpty())
	}).Should(Succeed(), "logs in %s", sb.Logs())
	init := pod.Status.InitContainerStatuses[0]
	g.Expect(init.State.Terminated).NotTo(BeNil())
	g.Expect(init.State.Terminated.ExitCode).To(BeZero(), "worker pull: %s", init.State.Terminated.Message)
	g.Expect(init.State.Terminated.Message).To(ContainSubstring(a.Status.ImageReference), "its result names what it pulled")
	t.Logf("workload running %s after its Deployment was delivered (the init pull included)", time.Since(start).Round(time.Millisecond))

	pid := containerPid(t, strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://"))
	dir := filepath.Join("/proc", strconv.Itoa(pid), "root", "model")
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		g.Expect(err).NotTo(HaveOccurred(), "the server reads /model/%s", f)
		g.Expect(b).NotTo(BeEmpty(), "/model/%s", f)
	}
}
