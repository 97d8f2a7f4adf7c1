package api

import (
	"net/http"
	"slices"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// orderSteps lists every step of the run's pinned pipeline in v, in graph order (by level,
// then by id: a step after the steps it needs), with its needs: those not started yet as
// pending, and those a failed or cancelled run left unfinished settled (endSteps). When the
// pipeline version cannot be loaded the steps are those started, by id.
func (s *server) orderSteps(r *http.Request, v *httpapi.Run) {
	_, g, err := s.node.PipelineVersion(r.Context(), v.Pipeline, v.PipelineHash)
	if err != nil {
		return
	}
	pos := make(map[string]int, g.Len())
	for i, id := range g.Order() {
		pos[id] = i
	}
	seen := make(map[string]bool, len(v.Steps))
	for _, st := range v.Steps {
		seen[st.ID] = true
	}
	for _, id := range g.Order() { // the steps not started yet
		if !seen[id] {
			v.Steps = append(v.Steps, httpapi.Step{ID: id, Status: messages.StepPending})
		}
	}
	endSteps(v)
	for i := range v.Steps {
		v.Steps[i].Needs = g.Needs(v.Steps[i].ID)
	}
	slices.SortStableFunc(v.Steps, func(a, b httpapi.Step) int {
		pa, oka := pos[a.ID]
		pb, okb := pos[b.ID]
		switch {
		case oka && okb:
			return pa - pb
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
}

// endSteps settles the steps a failed or cancelled run left unfinished: a step that was
// running ends as cancelled, when the run ended (updated_at) unless it recorded a finish; one
// never started is skipped in a failed run (as the engine commits those it reaches) and
// cancelled in a cancelled run. A final run has no step left to run.
func endSteps(v *httpapi.Run) {
	if v.Status != messages.RunFailed && v.Status != messages.RunCancelled {
		return
	}
	for i := range v.Steps {
		st := &v.Steps[i]
		switch {
		case st.Status == messages.StepRunning:
			st.Status = messages.StepCancelled
			if st.FinishedAt == nil {
				at := v.UpdatedAt
				st.FinishedAt = &at
			}
		case st.Status == messages.StepPending && v.Status == messages.RunFailed:
			st.Status = messages.StepSkipped
		case st.Status == messages.StepPending:
			st.Status = messages.StepCancelled
		}
	}
}

// pipelineScanLimit is how many of the newest runs matching the other filters a pipeline
// filter looks through (the store filters by tenant and status only).
const pipelineScanLimit = 1000

// listRunsOf lists runs matching f and, when pipeline is not empty, of that pipeline key: the
// matches among the newest pipelineScanLimit runs that pass f, at most f.Limit of them.
func (s *server) listRunsOf(r *http.Request, f store.RunFilter, pipeline string) ([]*messages.SharedRun, error) {
	if pipeline == "" {
		return s.node.ListRuns(r.Context(), f)
	}
	limit := f.Limit
	f.Limit = pipelineScanLimit
	runs, err := s.node.ListRuns(r.Context(), f)
	if err != nil {
		return nil, err
	}
	out := runs[:0]
	for _, run := range runs {
		if run.GetPipeline() == pipeline {
			out = append(out, run)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
