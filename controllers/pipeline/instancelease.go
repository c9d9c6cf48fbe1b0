package pipeline

import (
	"context"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// A running manager publishes its instance in a Lease of its own namespace
// (ManagerNamespace), renewed while it leads: the admission webhook, which
// serves every instance, reads it to warn about an Artifact or Claim
// labelled for an instance no manager runs, which nothing would ever
// reconcile. A Lease rather than a ConfigMap: it is the kind made for "who
// is alive", the manager already has rights on Leases for leader election,
// and kubectl shows its holder and renew time.
const (
	// InstanceLeaseDuration is how long a publication holds without renewal.
	InstanceLeaseDuration = 60 * time.Second
	instanceRenew         = 20 * time.Second
)

// ManagerNamespace is the manager's own namespace ($POD_NAMESPACE, else
// packline-system), where instances publish themselves.
func ManagerNamespace() string { return DefaultTemplateNamespace() }

// InstanceLeaseName is the Lease instance publishes itself in. An instance
// name is a label value (it may hold '_' or capitals, which a Lease name
// may not): such names are hashed, and the Lease's instance label says
// which instance it is for.
func InstanceLeaseName(instance string) string {
	const prefix = "packline-instance"
	switch {
	case instance == "":
		return prefix
	case len(validation.IsDNS1123Label(instance)) == 0 && len(prefix)+1+len(instance) <= validation.DNS1123LabelMaxLength:
		return prefix + "-" + instance
	}
	return prefix + "-" + short(hashOf(instance), 16)
}

// InstanceWarning is what admission tells the author of an object
// labelled for instance, given that instance's Lease (nil when there is
// none): "" while a manager serves it.
func InstanceWarning(kind, instance string, lease *coordinationv1.Lease, now time.Time) string {
	field := fmt.Sprintf("metadata.labels[%s]", LabelInstance)
	none := fmt.Sprintf("%s: no packline manager runs instance %q, so nothing will reconcile this %s until one is started with --instance=%s, or the label is changed",
		field, instance, kind, instance)
	if lease == nil || lease.Labels[LabelInstance] != instance {
		return none
	}
	renewed := lease.Spec.RenewTime
	if renewed == nil {
		return none
	}
	hold := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, int32(InstanceLeaseDuration/time.Second))) * time.Second
	if now.Sub(renewed.Time) > hold {
		return fmt.Sprintf("%s: the manager of instance %q was last seen %s ago (Lease %s/%s), so nothing may reconcile this %s",
			field, instance, now.Sub(renewed.Time).Round(time.Second), lease.Namespace, lease.Name, kind)
	}
	return ""
}

// InstancePublisher renews this manager's instance Lease (see above). It is
// a leader-elected runnable: one replica writes, and a standby takes over
// with the leadership.
type InstancePublisher struct {
	Client client.Client
	// Reader reads the Lease past the cache: a cached Get would make the
	// manager watch every Lease of the cluster.
	Reader    client.Reader
	Namespace string
	Instance  string
	// Every is the renew period; zero is the default (20 s).
	Every time.Duration
}

// Start renews the Lease until ctx ends. A failure is logged and retried:
// the publication only feeds admission warnings, never reconciles.
func (p *InstancePublisher) Start(ctx context.Context) error {
	every := p.Every
	if every == 0 {
		every = instanceRenew
	}
	log := logf.FromContext(ctx).WithName("instance-lease")
	t := time.NewTicker(every)
	defer t.Stop()
	var last string
	for {
		err := p.renew(ctx)
		switch {
		case err != nil && ctx.Err() == nil && err.Error() != last:
			// Once per distinct failure, not every period.
			log.Error(err, "publishing the instance; admission will warn that it is not served", "namespace", p.Namespace, "lease", InstanceLeaseName(p.Instance))
			last = err.Error()
		case err == nil:
			last = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *InstancePublisher) renew(ctx context.Context) error {
	holder, _ := os.Hostname()
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: p.Namespace, Name: InstanceLeaseName(p.Instance)}
	err := p.Reader.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
				Labels: map[string]string{LabelManagedBy: managedBy, LabelInstance: p.Instance}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now, AcquireTime: &now,
				LeaseDurationSeconds: ptr.To(int32(InstanceLeaseDuration / time.Second))},
		}
		return client.IgnoreAlreadyExists(p.Client.Create(ctx, lease))
	}
	if err != nil {
		return err
	}
	if lease.Labels[LabelInstance] != p.Instance || lease.Labels[LabelManagedBy] != managedBy {
		// Not ours (a hash collision, or someone else's object): never adopt by name.
		return fmt.Errorf("Lease %s/%s exists but is not packline's instance %q", key.Namespace, key.Name, p.Instance)
	}
	lease.Spec.HolderIdentity, lease.Spec.RenewTime = &holder, &now
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(InstanceLeaseDuration / time.Second))
	return p.Client.Update(ctx, lease)
}
