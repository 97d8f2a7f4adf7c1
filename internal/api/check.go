package api

import (
	"net/http"
	"strconv"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
)

// maxCheckLast bounds ?last= of the pipeline check.
const maxCheckLast = 1000

// checkPipeline handles POST /v1/pipelines/{key}/check[?last=N] (admin, like PUT): the body is
// a new definition of the key; the answer replays the N (default 100) most recent executions
// of the key against it and lists every divergence. Nothing is stored.
func (s *server) checkPipeline(w http.ResponseWriter, r *http.Request) {
	last := 0
	if v := r.URL.Query().Get("last"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxCheckLast {
			s.fail(w, r, badRequest("api: last must be an integer in 1..%d", maxCheckLast))
			return
		}
		last = n
	}
	// The query and body (a pure parse) before the role, as docs/api.md orders the checks; the
	// replays only after it.
	src, _, err := s.pipelineBody(r, "api: request body is empty; send the new pipeline definition")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := requireRole(r, auth.RoleAdmin); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.node.CheckPipeline(r.Context(), src, last)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := httpapi.PipelineCheck{Key: res.Key, Checked: res.Checked, Divergent: []httpapi.CheckDivergence{}}
	for _, rep := range res.Reports {
		for _, d := range rep.Divergences {
			out.Divergent = append(out.Divergent, httpapi.CheckDivergence{ExecutionID: rep.ExecutionID, StepID: d.StepID, Reason: d.Reason})
		}
	}
	s.writeJSON(w, http.StatusOK, out)
}
