package api

import (
	"errors"
	"net/http"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// authorizedExecution maps an execution id (or a shared run id) to its run and checks the
// caller may act on the run's tenant. An execution of another tenant is 403, as its run is.
func (s *server) authorizedExecution(r *http.Request, id string) (*messages.SharedRun, error) {
	if err := requireRole(r, auth.RoleTenant); err != nil {
		return nil, err
	}
	ex, _, err := s.node.Store().GetExecution(r.Context(), id)
	switch {
	case err == nil:
		return s.authorizedRunAs(r, ex.SharedRunId, "execution", id)
	case errors.Is(err, store.ErrNotFound):
		return s.authorizedRunAs(r, id, "execution", id)
	default:
		return nil, err
	}
}

// executionIDOf returns the execution id an answer about id names: id itself, unless id is
// run's shared run id (the history endpoints take either) and run has an execution.
func executionIDOf(run *messages.SharedRun, id string) string {
	if run != nil && id == run.GetSharedRunId() && run.GetExecutionId() != "" {
		return run.GetExecutionId()
	}
	return id
}

// ledger handles GET /v1/executions/{id}/ledger.
func (s *server) ledger(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	run, err := s.authorizedExecution(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	_, entries, err := s.node.Ledger(r.Context(), id, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := httpapi.Ledger{ExecutionID: executionIDOf(run, id), Entries: make([]httpapi.LedgerEntry, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, ledgerEntryFromMessage(e))
	}
	s.writeJSON(w, http.StatusOK, out)
}

// trace handles GET /v1/executions/{id}/trace.
func (s *server) trace(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	run, err := s.authorizedExecution(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	_, spans, err := s.node.Trace(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := httpapi.Trace{ExecutionID: executionIDOf(run, id), Spans: make([]httpapi.Span, 0, len(spans))}
	for _, sp := range spans {
		attrs := sp.Attributes
		if attrs == nil {
			attrs = map[string]any{}
		}
		out.Spans = append(out.Spans, httpapi.Span{Name: sp.Name, Kind: sp.Kind, Start: sp.Start.UTC(), End: sp.End.UTC(), Attributes: attrs})
	}
	s.writeJSON(w, http.StatusOK, out)
}

// replay handles POST /v1/executions/{id}/replay; a shared run id replays the run's execution.
// The answer is 200 whether or not the replay diverged.
func (s *server) replay(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	run, err := s.authorizedExecution(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	execID := id
	if id == run.SharedRunId {
		if run.ExecutionId == "" {
			s.fail(w, r, &httpError{status: http.StatusNotFound, code: httpapi.CodeNotFound, msg: "api: run " + id + " has no execution yet"})
			return
		}
		execID = run.ExecutionId
	}
	rep, err := s.node.Replay(r.Context(), execID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := httpapi.Replay{ExecutionID: rep.ExecutionID, Diverged: rep.Diverged, Divergences: make([]httpapi.Divergence, 0, len(rep.Divergences)),
		Replayed: rep.Replayed}
	if out.ExecutionID == "" {
		out.ExecutionID = execID
	}
	for _, d := range rep.Divergences {
		out.Divergences = append(out.Divergences, httpapi.Divergence{StepID: d.StepID, Reason: d.Reason})
	}
	s.writeJSON(w, http.StatusOK, out)
}
