package messages

// Run statuses (SharedRun.Status), as named in CONTRACT.md.
const (
	RunQueued            = "queued"
	RunScaleOutRequested = "scale_out_requested"
	RunDispatched        = "dispatched"
	RunRunning           = "running"
	RunPaused            = "paused"
	RunSucceeded         = "succeeded"
	RunFailed            = "failed"
	RunCancelled         = "cancelled"
)

// Step statuses (StepState.Status).
const (
	StepPending   = "pending"
	StepRunning   = "running"
	StepSucceeded = "succeeded"
	StepFailed    = "failed"
	StepSkipped   = "skipped"
	StepCancelled = "cancelled"
)

// Instance statuses (CapacityDescriptor.Status).
const (
	InstanceStarting  = "starting"
	InstanceReady     = "ready"
	InstanceDraining  = "draining"
	InstanceUnhealthy = "unhealthy"
	InstanceStopped   = "stopped"
)

// Isolation modes (TenantSettings.IsolationMode, CapacityDescriptor.IsolationMode).
const (
	IsolationShared    = "shared"
	IsolationDedicated = "dedicated"
	IsolationHybrid    = "hybrid"
)

// Scale-out request statuses.
const (
	ScaleOutPending      = "pending"
	ScaleOutProvisioning = "provisioning"
	ScaleOutFulfilled    = "fulfilled"
	ScaleOutFailed       = "failed"
)

// Ledger entry kinds (LedgerEntry.Kind). CONTRACT.md names the first thirteen.
const (
	KindSubmitted         = "submitted"
	KindAdmission         = "admission"
	KindReservation       = "reservation"
	KindDispatch          = "dispatch"
	KindDispatchFailed    = "dispatch_failed"
	KindScaleOutRequested = "scale_out_requested"
	KindScaleOutFulfilled = "scale_out_fulfilled"
	KindScaleOutFailed    = "scale_out_failed"
	KindExecutionStarted  = "execution_started"
	KindStepStarted       = "step_started"
	KindStepSucceeded     = "step_succeeded"
	KindStepFailed        = "step_failed"
	KindStepRetry         = "step_retry"
	KindStepSkipped       = "step_skipped"
	KindRecovery          = "recovery"
	KindRunPaused         = "run_paused"
	KindRunResumed        = "run_resumed"
	KindRunSucceeded      = "run_succeeded"
	KindRunFailed         = "run_failed"
	KindRunCancelled      = "run_cancelled"
	KindFenced            = "fenced"
)

// Roles carried by ExecutionContextSnapshot.Roles.
const (
	RoleTenant   = "tenant"
	RoleOperator = "operator"
	RoleAdmin    = "admin"
)

// IsTerminalRun reports whether a run status is final.
func IsTerminalRun(status string) bool {
	return status == RunSucceeded || status == RunFailed || status == RunCancelled
}
