package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// pipelineView converts a stored version and adds what its parsed form says: description,
// step count and input schema. A version that does not load keeps the stored fields only.
func (s *server) pipelineView(r *http.Request, pv *messages.PipelineVersion, withSource bool) httpapi.Pipeline {
	out := pipelineFromMessage(pv, withSource)
	p, _, err := s.node.PipelineVersion(r.Context(), pv.GetKey(), pv.GetHash())
	if err != nil {
		return out
	}
	out.Description, out.Steps = p.Description, len(p.Steps)
	if p.InputSchema != nil {
		if b, err := json.Marshal(p.InputSchema); err == nil {
			out.InputSchema = b
		}
	}
	return out
}

// checkSubmitInput checks a submit's input against the latest version of its pipeline: its
// input_schema, and the input fields its templates use (see dag.Pipeline.CheckInput). An
// unknown pipeline is the 404 unknown_pipeline; a refused input a 400 invalid_input naming the
// failing path.
func (s *server) checkSubmitInput(r *http.Request, key string, input json.RawMessage) error {
	p, _, err := s.node.PipelineVersion(r.Context(), key, "")
	if errors.Is(err, store.ErrNotFound) {
		return &httpError{status: http.StatusNotFound, code: httpapi.CodeUnknownPipeline, msg: fmt.Sprintf("api: pipeline %q not found", key)}
	}
	if err != nil {
		return err
	}
	if err := p.CheckInput(input); err != nil {
		var ie *dag.InputError
		if errors.As(err, &ie) {
			return &requestError{code: httpapi.CodeInvalidInput, msg: fmt.Sprintf("api: input of pipeline %q: at %q: %s", key, ie.Path, ie.Detail)}
		}
		return err
	}
	return nil
}
