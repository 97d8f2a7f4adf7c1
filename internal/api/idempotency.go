package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// idempotencyHeader is the request header that may carry a submit's idempotency key.
const idempotencyHeader = "Idempotency-Key"

// idempotencyKey merges the Idempotency-Key header into the body's idempotency_key: either
// may carry it; both set and different is a 400.
func idempotencyKey(r *http.Request, body string) (string, error) {
	h := r.Header.Get(idempotencyHeader)
	switch {
	case h == "":
		return body, nil
	case body == "" || body == h:
		return h, nil
	}
	return "", badRequest("api: the Idempotency-Key header %q differs from idempotency_key %q in the body", h, body)
}

// checkReplayedSubmit returns a 409 idempotency_conflict when run, the answer to a submit
// with an idempotency key, is an earlier run of that key for another pipeline or input:
// reusing a key is only a retry of the same request.
func checkReplayedSubmit(run *messages.SharedRun, req httpapi.SubmitRequest) error {
	if req.IdempotencyKey == "" {
		return nil
	}
	if run.GetPipeline() == req.Pipeline && sameJSON(run.GetInput(), normInput(req.Input)) {
		return nil
	}
	return &httpError{status: http.StatusConflict, code: httpapi.CodeIdempotencyConflict, msg: fmt.Sprintf(
		"api: idempotency key %q was used by run %s with another pipeline or input; use a new key for a new run",
		req.IdempotencyKey, run.GetSharedRunId())}
}

// sameJSON reports whether two JSON documents hold the same value (empty counts as null).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if len(bytes.TrimSpace(a)) > 0 && json.Unmarshal(a, &va) != nil {
		return false
	}
	if len(bytes.TrimSpace(b)) > 0 && json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
