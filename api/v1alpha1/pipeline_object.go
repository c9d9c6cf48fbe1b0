package v1alpha1

// The pipeline in controllers/pipeline is kind-agnostic: it drives any
// object that exposes its shared spec and status through these accessors.

// GetPipelineSpec returns the shared pipeline settings.
func (a *Artifact) GetPipelineSpec() *PipelineSpec { return &a.Spec.PipelineSpec }

// GetPipelineStatus returns the status the pipeline writes.
func (a *Artifact) GetPipelineStatus() *PipelineStatus { return &a.Status }

// GetPipelineSpec returns the shared pipeline settings.
func (c *Claim) GetPipelineSpec() *PipelineSpec { return &c.Spec.PipelineSpec }

// GetPipelineStatus returns the status the pipeline writes.
func (c *Claim) GetPipelineStatus() *PipelineStatus { return &c.Status.PipelineStatus }

// GetPushTarget returns where the run pushes; the cleanup Job of
// deletionPolicy Delete uses the same credentials.
func (a *Artifact) GetPushTarget() Target { return a.Spec.Target }

// GetPushTarget returns the Claim's target override (credentials and
// registry settings); the repository itself comes from status.reference.
func (c *Claim) GetPushTarget() Target {
	if c.Spec.Target == nil {
		return Target{}
	}
	return *c.Spec.Target
}

// GetExtraStatus is the part of a Claim's status outside PipelineStatus.
func (c *Claim) GetExtraStatus() any { return c.Status.Delivery }
