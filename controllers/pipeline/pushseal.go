package pipeline

// PushSealer makes and checks status.pushSeal (entitlement.Sealer does,
// with the manager's own key).
type PushSealer interface {
	SealPush(kind, uid, digest, reference string) (string, error)
	VerifyPush(kind, uid, digest, reference, seal string) bool
}

// SealedReference is obj's status.reference when the manager recorded it
// itself (status.pushSeal verifies), else "". A run hands it to the worker
// as the previous push, whose manifest's layer keys the worker trusts and
// whose layers it re-uses: status.reference alone is writable by anyone
// with the status subresource, a tenant included, who would then choose
// the layers that the platform's key signs for a profile or admin run.
func (p *Pipeline) SealedReference(obj Object) string {
	st := obj.GetPipelineStatus()
	if p.PushSealer == nil || st.Reference == "" {
		return ""
	}
	if !p.PushSealer.VerifyPush(p.Kind, string(obj.GetUID()), st.Digest, st.Reference, st.PushSeal) {
		return ""
	}
	return st.Reference
}

// sealPush seals status.reference when it holds the push that o, read from
// the worker's own pod, reports. A result read back from the registry
// (resolveJobs: what the tag names there, which anyone with push rights
// can move) is not sealed: its next run imports from scratch.
func (p *Pipeline) sealPush(s *scope, o Observation) {
	st := s.status
	var digest, ref string
	switch {
	case s.resolved:
		return
	case o.Result != nil:
		digest, ref = o.Result.Digest, o.Result.Reference
	case o.Pushed != nil:
		digest, ref = o.Pushed.Digest, o.Pushed.Reference
	default:
		return
	}
	if p.PushSealer == nil || ref == "" || st.Reference != ref || st.Digest != digest {
		return
	}
	seal, err := p.PushSealer.SealPush(p.Kind, s.owner.UID, digest, ref)
	if err != nil {
		// Without a key the push stays unsealed; the next run imports
		// from scratch rather than fail.
		return
	}
	st.PushSeal = seal
}
