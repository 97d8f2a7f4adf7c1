package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/jsonvalid"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

var runStatuses = map[string]bool{
	messages.RunQueued: true, messages.RunScaleOutRequested: true, messages.RunDispatched: true,
	messages.RunRunning: true, messages.RunPaused: true, messages.RunSucceeded: true,
	messages.RunFailed: true, messages.RunCancelled: true,
}

// normInput treats a JSON null input as no input.
func normInput(in json.RawMessage) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(in), []byte("null")) {
		return nil
	}
	return in
}

// submit creates a run from a decoded request.
func (s *server) submit(r *http.Request, req httpapi.SubmitRequest, sessionID string) (*messages.SharedRun, error) {
	sub, err := s.prepareSubmit(r, &req, sessionID)
	if err != nil {
		return nil, err
	}
	return s.submitPrepared(r, req, sub)
}

// prepareSubmit checks a submission (pipeline, input, idempotency key, tenant context, input
// schema) and returns the node's request; it sets req.IdempotencyKey to the effective key.
func (s *server) prepareSubmit(r *http.Request, req *httpapi.SubmitRequest, sessionID string) (actors.SubmitRequest, error) {
	if req.Pipeline == "" {
		return actors.SubmitRequest{}, badRequest("api: pipeline is required")
	}
	if in := normInput(req.Input); len(in) > 0 {
		if err := jsonvalid.Check(in); err != nil {
			return actors.SubmitRequest{}, badRequest("api: input: %v", err)
		}
	}
	key, err := idempotencyKey(r, req.IdempotencyKey)
	if err != nil {
		return actors.SubmitRequest{}, err
	}
	req.IdempotencyKey = key
	snap, err := s.submitSnapshot(r, req.TenantID, req.CorrelationID)
	if err != nil {
		return actors.SubmitRequest{}, err
	}
	if err := s.checkSubmitInput(r, req.Pipeline, normInput(req.Input)); err != nil {
		return actors.SubmitRequest{}, err
	}
	return actors.SubmitRequest{Pipeline: req.Pipeline, Input: normInput(req.Input), Snapshot: snap, CorrelationID: req.CorrelationID,
		IdempotencyKey: req.IdempotencyKey, SessionID: sessionID}, nil
}

// submitPrepared submits a prepared request on this node.
func (s *server) submitPrepared(r *http.Request, req httpapi.SubmitRequest, sub actors.SubmitRequest) (*messages.SharedRun, error) {
	run, err := s.node.Submit(r.Context(), sub)
	if errors.Is(err, actors.ErrUnknownPipeline) {
		return nil, &httpError{status: http.StatusNotFound, code: httpapi.CodeUnknownPipeline, msg: fmt.Sprintf("api: pipeline %q not found", req.Pipeline)}
	}
	if err != nil {
		return nil, err
	}
	return run, checkReplayedSubmit(run, req)
}

// submitRun handles POST /v1/runs.
func (s *server) submitRun(w http.ResponseWriter, r *http.Request) {
	var req httpapi.SubmitRequest
	if err := decodeJSON(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	run, err := s.submit(r, req, "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusAccepted, httpapi.SubmitResponse{SharedRunID: run.SharedRunId, Status: run.Status})
}

// authorizedRun loads run id and checks the caller may act on its tenant. A run of another
// tenant is 403 (CONTRACT.md: forbidden, other tenant), naming neither the run's tenant nor
// anything else of it; a caller without the tenant role gets 403 before any lookup. Run ids
// carry 64 random bits, so the difference from an unknown id's 404 tells nothing a caller
// could enumerate.
func (s *server) authorizedRun(r *http.Request, id string) (*messages.SharedRun, error) {
	return s.authorizedRunAs(r, id, "run", id)
}

// authorizedRunAs is authorizedRun for a lookup that named kind shown (an execution id that
// led to run id): the 404 names what the caller asked for.
func (s *server) authorizedRunAs(r *http.Request, id, kind, shown string) (*messages.SharedRun, error) {
	if err := requireRole(r, auth.RoleTenant); err != nil {
		return nil, err
	}
	run, err := s.node.GetRun(r.Context(), id)
	if err != nil {
		return nil, notFoundAs(err, kind, shown)
	}
	if !auth.FromContext(r.Context()).CanAccessTenant(run.TenantId) {
		return nil, forbidden("api: %s %q belongs to another tenant", kind, shown)
	}
	return run, nil
}

// runView converts a run with its committed steps.
func (s *server) runView(r *http.Request, run *messages.SharedRun) (httpapi.Run, error) {
	steps, err := s.node.RunSteps(r.Context(), run)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return httpapi.Run{}, err
	}
	if err := s.fillStartedAt(r, run, steps); err != nil {
		return httpapi.Run{}, err
	}
	v := runFromMessage(run, steps)
	s.orderSteps(r, &v)
	return v, nil
}

// fillStartedAt sets the start time of steps whose committed state lacks one from the last
// step_started ledger entry of each step. It changes copies, not the node's data.
func (s *server) fillStartedAt(r *http.Request, run *messages.SharedRun, steps []*messages.StepState) error {
	missing := false
	for _, st := range steps {
		if st.GetStartedAt() == 0 && st.GetStatus() != messages.StepPending && st.GetStatus() != messages.StepSkipped {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	_, entries, err := s.node.Ledger(r.Context(), run.SharedRunId, 0)
	if err != nil {
		return err
	}
	started := map[string]int64{}
	for _, e := range entries {
		if e.Kind == messages.KindStepStarted {
			started[e.StepId] = e.At
		}
	}
	for i, st := range steps {
		if at, ok := started[st.GetStepId()]; ok && st.GetStartedAt() == 0 {
			c := proto.Clone(st).(*messages.StepState)
			c.StartedAt = at
			steps[i] = c
		}
	}
	return nil
}

// getRun handles GET /v1/runs/{id}.
func (s *server) getRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.authorizedRun(r, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.runView(r, run)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, v)
}

// listRuns handles GET /v1/runs?tenant_id=&status=&pipeline=&limit=. A caller with only the
// tenant role sees its own tenant's runs; asking for another tenant is a 403.
func (s *server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.RunFilter{TenantID: q.Get("tenant_id"), Status: q.Get("status")}
	pipeline := q.Get("pipeline")
	if f.Status != "" && !runStatuses[f.Status] {
		s.fail(w, r, badRequest("api: unknown run status %q", f.Status))
		return
	}
	if f.TenantID != "" {
		if err := tenancy.ValidateTenantID(f.TenantID); err != nil {
			s.fail(w, r, badRequest("api: %s", plain(err)))
			return
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			s.fail(w, r, badRequest("api: limit must be a non-negative integer"))
			return
		}
		f.Limit = n
	}
	c := auth.FromContext(r.Context())
	if err := requireRole(r, auth.RoleTenant); err != nil {
		s.fail(w, r, err)
		return
	}
	if !c.HasRole(auth.RoleOperator) {
		if f.TenantID != "" && f.TenantID != c.TenantID {
			s.fail(w, r, forbidden("api: not allowed for tenant %q", f.TenantID))
			return
		}
		f.TenantID = c.TenantID
	}
	runs, err := s.listRunsOf(r, f, pipeline)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := httpapi.RunList{Runs: make([]httpapi.Run, 0, len(runs))}
	for _, run := range runs {
		out.Runs = append(out.Runs, runFromMessage(run, nil))
	}
	s.writeJSON(w, http.StatusOK, out)
}

// controlRun handles POST /v1/runs/{id}/cancel|pause|resume and answers the run after the
// change; a run that is not running is a 409. Resuming a run of a suspended tenant is a 423
// (it would start work for the tenant); pausing and cancelling stay allowed.
func (s *server) controlRun(op messages.ControlOp) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		run, err := s.authorizedRun(r, r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if op == messages.OpResumeRun {
			if err := s.requireActiveTenant(r, run.TenantId); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		run, err = s.node.ControlRun(r.Context(), run.SharedRunId, op)
		if err != nil {
			err = notFoundAs(err, "run", r.PathValue("id"))
			s.fail(w, r, err)
			return
		}
		v, err := s.runView(r, run)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusOK, v)
	}
}

// invoke handles POST /v1/sessions/{session_id}/invoke: it submits a run of the session and
// streams that run's events (as GET /v1/runs/{id}/events). When the tenant has a ready runtime
// host served over gRPC, the invocation goes through that host's runtime.v1.RuntimeService.Invoke
// (seed 001's router path, invoke_remote.go); otherwise, or when the host cannot be reached
// before the run starts, this node submits the run itself.
func (s *server) invoke(w http.ResponseWriter, r *http.Request) {
	after, err := lastEventID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var body httpapi.InvokeRequest
	if err := decodeJSON(r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	req := httpapi.SubmitRequest(body)
	sub, err := s.prepareSubmit(r, &req, r.PathValue("session_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.invokeRemote(w, r, &sub, after) {
		return
	}
	w.Header().Set(InvokeRouteHeader, InvokeRouteLocal)
	run, err := s.submitPrepared(r, req, sub)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.stream(w, r, run.SharedRunId, after)
}

// requireActiveTenant returns a 423 error when tenantID is suspended.
func (s *server) requireActiveTenant(r *http.Request, tenantID string) error {
	t, err := s.node.GetTenant(r.Context(), tenantID)
	if err != nil {
		return err
	}
	if t.GetSuspended() {
		return &httpError{status: http.StatusLocked, code: httpapi.CodeTenantSuspended, msg: fmt.Sprintf("api: tenant %q is suspended", tenantID)}
	}
	return nil
}
