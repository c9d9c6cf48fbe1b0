package kueue

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/controllers/pipeline"
)

// absentImage is an image the process node does not know: admitted pods
// wait in ImagePullBackOff, so that what is timed is admission alone, the
// same for both sides (1,000 real runs do not fit a 2-core machine).
const absentImage = "packline.local/absent:bench"

// BenchmarkKueueAdmit times how long Kueue takes to admit N runs through
// one LocalQueue (quota for all of them): N Artifacts (packline creates
// each Job, suspended, with the queue label) against N bare Jobs created
// directly with the same label and requests, in the same run. N is 1,000,
// or PACKLINE_KUEUE_BENCH_N. It prints the ratio.
func BenchmarkKueueAdmit(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("PACKLINE_KUEUE_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	inst, err := sb.StartInstance("kbench", "--worker-image="+absentImage)
	if err != nil {
		b.Fatal(err)
	}
	defer inst.Stop()
	for range b.N {
		arts := admitAll(b, n, func(ns string, i int) error {
			a := newArtifact(ns, fmt.Sprintf("m-%d", i), "packline").Label(pipeline.LabelInstance, "kbench").Obj()
			return sb.Client.Create(context.Background(), a)
		})
		jobs := admitAll(b, n, func(ns string, i int) error {
			return sb.Client.Create(context.Background(), bareJob(ns, fmt.Sprintf("j-%d", i)))
		})
		b.ReportMetric(arts.Seconds(), "artifacts-admit-s")
		b.ReportMetric(jobs.Seconds(), "jobs-admit-s")
		b.ReportMetric(arts.Seconds()/jobs.Seconds(), "ratio")
		fmt.Printf("kueue admission of %d: Artifacts %s, bare Jobs %s, ratio %.2f\n", n, arts.Round(time.Millisecond), jobs.Round(time.Millisecond), arts.Seconds()/jobs.Seconds())
	}
}

// admitAll creates n objects in a fresh namespace with a queue that fits
// them all, and returns the time from the first create until Kueue has
// admitted (unsuspended) n Jobs.
func admitAll(b *testing.B, n int, create func(ns string, i int) error) time.Duration {
	ns := newNamespace(b)
	queues(b, ns, n, false)
	jw := watchJobs(b, ns)
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
	deadline := time.Now().Add(15 * time.Minute)
	for {
		if _, _, admitted := jw.state(); len(admitted) >= n {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			_, _, admitted := jw.state()
			b.Fatalf("%d of %d admitted after 15m (logs in %s)", len(admitted), n, sb.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bareJob is a Job as a user would hand it to Kueue: the queue label,
// suspended, the worker's default requests.
func bareJob(ns, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{pipeline.QueueLabel: "packline"}},
		Spec: batchv1.JobSpec{
			Suspend:      ptr.To(true),
			BackoffLimit: ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: absentImage, Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				}}},
			}},
		},
	}
}
