package demo

// Result is the machine-readable outcome of Run (`dair demo -o json`): one entry per run of
// the scenario, as in the report's summary table.
type Result struct {
	// OK is true when Run returned nil.
	OK bool `json:"ok"`
	// Error is the message of Run's error, empty when OK.
	Error string      `json:"error,omitempty"`
	Runs  []ResultRun `json:"runs"`
}

// ResultRun is one run of the scenario.
type ResultRun struct {
	SharedRunID       string `json:"shared_run_id"`
	TenantID          string `json:"tenant_id"`
	Pipeline          string `json:"pipeline"`
	Status            string `json:"status"`
	RuntimeInstanceID string `json:"runtime_instance_id"`
	StepsSucceeded    int    `json:"steps_succeeded"`
	Steps             int    `json:"steps"`
	Attempts          int    `json:"attempts"`
	DurationMS        int64  `json:"duration_ms"`
}
