package api

import (
	"net/http"
	"slices"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// orderSteps puts v's steps in the graph order of the run's pinned pipeline (by level, then
// by id: a step after the steps it needs) and sets each step's needs. When the pipeline
// version cannot be loaded the steps keep their order by id.
func (s *server) orderSteps(r *http.Request, v *httpapi.Run) {
	if len(v.Steps) == 0 {
		return
	}
	_, g, err := s.node.PipelineVersion(r.Context(), v.Pipeline, v.PipelineHash)
	if err != nil {
		return
	}
	pos := make(map[string]int, g.Len())
	for i, id := range g.Order() {
		pos[id] = i
	}
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
