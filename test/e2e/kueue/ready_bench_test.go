package kueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/sandbox/procnode"
)

// trivialImage is a worker that does nothing but report success: a shell
// script that writes a fixed, valid result (trivialResult) to its
// termination message. The bare Jobs of the benchmark run the same image,
// so that both sides pay the same for their pods and what differs is
// packline's part (a PVC and a Job per Artifact, the result read back into
// status) against a Job alone.
const trivialImage = "packline.local/trivial:bench"

// trivialWorker writes the script into dir and returns the image mapping
// for the process node.
func trivialWorker(dir string) (procnode.Image, error) {
	d := "sha256:" + strings.Repeat("ab", 32)
	res, err := workerv1.MarshalResult(workerv1.Result{
		Digest: d, Reference: "bench.local/trivial@" + d, MediaType: "application/vnd.oci.image.manifest.v1+json",
		ArtifactType: "application/vnd.kitops.modelkit.config.v1+json", Size: 1,
	})
	if err != nil {
		return procnode.Image{}, err
	}
	script := filepath.Join(dir, "trivial-worker")
	body := "#!/bin/sh\nprintf '%s' '" + string(res) + "' > \"$PACKLINE_TERMINATION_LOG\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		return procnode.Image{}, err
	}
	return procnode.Image{Binary: script, PathEnv: map[string]string{corev1.TerminationMessagePathDefault: "PACKLINE_TERMINATION_LOG"}}, nil
}

// BenchmarkKueueReady times N runs through one LocalQueue (quota for all
// of them) to the end, with the trivial worker: N Artifacts until every
// one is Ready, against N bare Jobs of the same image, label and requests
// until every one is Complete, in the same run. N is 1,000, or
// PACKLINE_KUEUE_BENCH_N. It prints the ratio.
func BenchmarkKueueReady(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("PACKLINE_KUEUE_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	inst, err := sb.StartInstance("kready", "--worker-image="+trivialImage)
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Stop()
	for range b.N {
		arts := allDone(b, n, func(ns string, i int) error {
			a := newArtifact(ns, fmt.Sprintf("m-%d", i), "packline").Label(pipeline.LabelInstance, "kready").Obj()
			return sb.Client.Create(context.Background(), a)
		}, readyArtifacts)
		jobs := allDone(b, n, func(ns string, i int) error {
			j := bareJob(ns, fmt.Sprintf("j-%d", i))
			j.Spec.Template.Spec.Containers[0].Image = trivialImage
			return sb.Client.Create(context.Background(), j)
		}, completeJobs)
		b.ReportMetric(arts.Seconds(), "artifacts-ready-s")
		b.ReportMetric(jobs.Seconds(), "jobs-complete-s")
		b.ReportMetric(arts.Seconds()/jobs.Seconds(), "ratio")
		fmt.Printf("kueue to the end, %d runs of a trivial worker: Artifacts Ready %s, bare Jobs Complete %s, ratio %.2f\n", n, arts.Round(time.Millisecond), jobs.Round(time.Millisecond), arts.Seconds()/jobs.Seconds())
	}
}

// allDone creates n objects in a fresh namespace with a queue that fits
// them all, and returns the time from the first create until done counts
// n of them finished.
func allDone(b *testing.B, n int, create func(ns string, i int) error, done func(ns string) (int, error)) time.Duration {
	ns := newNamespace(b)
	queues(b, ns, n, false)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := create(ns, i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Minute)
	for {
		got, err := done(ns)
		if err == nil && got >= n {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d done after 30m (%v; logs in %s)", got, n, err, sb.Logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func readyArtifacts(ns string) (int, error) {
	var l v1alpha1.ArtifactList
	if err := sb.Client.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for i := range l.Items {
		if c := ready(&l.Items[i].Status); c != nil && c.Status == metav1.ConditionTrue {
			n++
		}
	}
	return n, nil
}

func completeJobs(ns string) (int, error) {
	var l batchv1.JobList
	if err := sb.Client.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, j := range l.Items {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}
