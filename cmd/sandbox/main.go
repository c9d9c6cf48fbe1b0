// Command sandbox runs packline's whole stack locally (see test/sandbox):
// control plane, registry, process node and manager. It applies
// config/samples, waits for them to be Ready, pulls each digest back from
// the registry, and then keeps running until interrupted (or exits with
// --once). `make demo` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/go-logr/logr"
	"os"
	"os/signal"
	"path/filepath"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/sandbox"
)

func main() {
	var (
		o       sandbox.Options
		once    bool
		kueue   bool
		timeout time.Duration
		kc      string
	)
	flag.StringVar(&o.Dir, "dir", "", "Folder for the sandbox's state and logs (default: a new temp folder, removed on exit).")
	flag.StringVar(&o.ManagerBin, "manager-bin", "", "Built cmd/manager (default: build it).")
	flag.StringVar(&o.WorkerBin, "worker-bin", "", "Built cmd/worker (default: build it).")
	flag.BoolVar(&kueue, "kueue", false, "Also run Kueue v0.17 (built by test/tools/kueue.sh, or PACKLINE_KUEUE_DIR), for Artifacts and Claims with spec.queueName.")
	flag.BoolVar(&o.MultiKueue, "multikueue", false, "With --kueue: also start a second cluster (control plane, process node, Kueue) as a MultiKueue worker, and run the manager with --job-managed-by=kueue.x-k8s.io/multikueue (config/samples/multikueue; see docs/how-to/worker-clusters-multikueue.md).")
	flag.StringVar(&o.Node, "node", "", `Where pods run: "" (the process node, host processes) or "real" (kubelet, containerd, runc and CNI from make node-assets; needs root).`)
	flag.BoolVar(&once, "once", false, "Exit after the samples are Ready and pulled, instead of serving until interrupted.")
	flag.StringVar(&kc, "write-kubeconfig", "", "Also write a kubeconfig here, with contexts sandbox-admin (current) and alice (group team-a, no rights until granted); removed on exit. make demo writes bin/demo.kubeconfig.")
	flag.DurationVar(&timeout, "timeout", 5*time.Minute, "How long to wait for the samples to become Ready.")
	flag.Parse()
	o.Progress = os.Stdout
	// The harness's controller-runtime clients log nothing worth showing;
	// components log to files under the sandbox dir.
	ctrllog.SetLogger(logr.Discard())
	// Quick retries: the sandbox is for watching things happen.
	o.ManagerArgs = []string{"--backoff-base=2s", "--backoff-cap=20s"}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.MultiKueue && !kueue {
		fmt.Fprintln(os.Stderr, "sandbox: --multikueue needs --kueue")
		os.Exit(2)
	}
	if kueue {
		root, err := sandbox.RepoRoot()
		if err == nil {
			o.KueueDir, err = sandbox.KueueDefault(root)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sandbox:", err)
			os.Exit(1)
		}
	}
	if err := run(ctx, o, once, timeout, kc); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o sandbox.Options, once bool, timeout time.Duration, kubeconfig string) error {
	bin, err := os.MkdirTemp("", "packline-sandbox-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	if err := sandbox.Defaults(&o, bin); err != nil {
		return err
	}
	s, err := sandbox.Start(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("sandbox: stopping")
		s.Stop()
	}()
	fmt.Printf("sandbox: registry %s, hugging face fixture %s, logs in %s\n", s.Registry.Host, s.HF.URL, s.Logs())

	gitURL, closeGit, err := templateRepo(s, o.RepoRoot)
	if err != nil {
		return err
	}
	defer closeGit()
	samples, err := s.Samples(gitURL)
	if err != nil {
		return err
	}
	if err := prepareNamespace(ctx, s); err != nil {
		return err
	}
	var pipelines []*unstructured.Unstructured
	for _, smp := range samples {
		if err := s.Apply(ctx, smp.Obj); err != nil {
			return fmt.Errorf("applying %s: %w", smp.File, err)
		}
		fmt.Printf("applied %s %s\n", smp.Obj.GetKind(), name(smp.Obj))
		if k := smp.Obj.GetKind(); k == "Artifact" || k == "Claim" {
			pipelines = append(pipelines, smp.Obj)
		}
	}
	for _, obj := range pipelines {
		st, err := waitReady(ctx, s, obj, timeout)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s: phase=%s digest=%s attempts=%d\n", obj.GetKind(), name(obj), st.phase, st.digest, st.attempts)
		who, err := requester(ctx, s, obj)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s: requester recorded by the admission webhook: %s\n", obj.GetKind(), name(obj), who)
		p, err := s.Pull(ctx, st.reference)
		if err != nil {
			return err
		}
		fmt.Printf("pulled %s: %s, %d blobs, %d bytes\n", st.reference, p.Manifest.MediaType, p.Blobs, p.Bytes)
		if obj.GetKind() == "Claim" {
			if err := printDelivered(ctx, s, obj); err != nil {
				return err
			}
		}
	}
	if kubeconfig == "" {
		kubeconfig = s.Kubeconfig
	} else {
		if err := writeDemoKubeconfig(s, kubeconfig); err != nil {
			return err
		}
		defer os.Remove(kubeconfig)
	}
	fmt.Printf("\nkubeconfig: %s\n", kubeconfig)
	fmt.Printf("try: export KUBECONFIG=%s; kubectl get artifacts,claims,jobs,pods -A\n", kubeconfig)
	if once {
		return nil
	}
	fmt.Println("sandbox: running; Ctrl-C stops everything")
	<-ctx.Done()
	return nil
}

func name(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return filepath.Join(o.GetNamespace(), o.GetName())
}

var errStalled = errors.New("stalled")

// requester is the requester annotation the mutating webhook sealed onto
// obj: its presence shows the API server called the manager's webhooks.
func requester(ctx context.Context, s *sandbox.Sandbox, obj *unstructured.Unstructured) (string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(obj.GroupVersionKind())
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
		return "", err
	}
	who, ok := u.GetAnnotations()[v1alpha1.AnnotationRequester]
	if !ok {
		return "", fmt.Errorf("%s %s has no %s annotation: the admission webhooks did not run", obj.GetKind(), name(obj), v1alpha1.AnnotationRequester)
	}
	return who, nil
}
