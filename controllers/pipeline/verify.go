package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// verifyTimeout bounds one verification: two HEAD requests.
const verifyTimeout = 5 * time.Minute

// verifyInputs labels the verification Jobs of the run whose inputs hash is
// run. Run hashes are hex, so the "v" never collides with a run's Job, and
// a new run's verifications never adopt an older run's Jobs.
func verifyInputs(run string) string { return "v" + short(run, 15) }

func isVerifyJob(j *batchv1.Job) bool { return strings.HasPrefix(j.Labels[LabelInputs], "v") }

// verifyPushed runs spec.verifyInterval's periodic check of a succeeded
// run: one Job per interval (the manager holds no registry credentials),
// recorded in status.lastVerifiedTime and the Verified condition. A tag
// moved or a digest deleted is reported, not repaired: the user decides
// (packline.dev/requestedAt pushes again).
func (p *Pipeline) verifyPushed(ctx context.Context, s *scope) (ctrl.Result, error) {
	st := s.status
	iv := p.runSpec(s).VerifyInterval
	if iv == nil || iv.Duration <= 0 || st.Phase != v1alpha1.PhaseSucceeded || st.Reference == "" || s.blocked != nil {
		return ctrl.Result{}, nil
	}
	job := s.verifyJob
	if job != nil {
		seq, _ := strconv.Atoi(job.Labels[LabelAttempt])
		if int32(seq) > st.Verifications {
			// Only the end matters here: no mount events to read.
			o, _, err := ObserveJob(ctx, p.Client, nil, job)
			if err != nil {
				return ctrl.Result{}, err
			}
			switch o.State {
			case StateSucceeded:
				setCondition(st, v1alpha1.ConditionVerified, metav1.ConditionTrue, "Verified",
					fmt.Sprintf("tag %s still points at %s", st.Tag, st.Digest))
			case StateFailed:
				setCondition(st, v1alpha1.ConditionVerified, metav1.ConditionFalse, o.Reason, o.Message)
			default:
				return ctrl.Result{}, nil // the Job's own events bring us back
			}
			st.Verifications, st.LastVerifiedTime = int32(seq), &metav1.Time{Time: p.now()}
		}
	}
	last := st.CompletionTime
	if st.LastVerifiedTime != nil {
		last = st.LastVerifiedTime
	}
	if last != nil {
		if wait := last.Add(iv.Duration).Sub(p.now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	return ctrl.Result{}, p.createVerifyJob(ctx, s, st.Verifications+1)
}

func (p *Pipeline) createVerifyJob(ctx context.Context, s *scope, seq int32) error {
	st := s.status
	t, ok := s.obj.(Targeted)
	if !ok {
		return nil
	}
	ns, push := s.namespace(), t.GetPushTarget()
	if p.CleanupPlacement != nil {
		// Where the run pushed from, with its credentials (a private
		// template's Claims: the template namespace and Secret).
		if pns, ptarget, err := p.CleanupPlacement(ctx, s.obj); err == nil && pns != "" {
			ns, push = pns, ptarget
		}
	}
	var m Mounts
	target := m.Target(push, "")
	target.Tag = st.Tag
	doc, err := workerv1.EncodeSpec(workerv1.Verify{Reference: st.Reference, Target: target})
	if err != nil {
		return err
	}
	return CreateJob(ctx, p.Client, p.Config.NewJob(JobVerify, JobParams{
		Owner: s.owner, Namespace: ns, Generation: s.obj.GetGeneration(), Attempt: seq, InputsHash: verifyInputs(st.InputsHash),
		SpecJSON: doc, Env: m.Env, Volumes: m.Volumes, Mounts: m.Mounts,
	}, p.runSpec(s).Resources))
}
