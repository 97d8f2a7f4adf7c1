package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/messages"
)

// TestServer_submit_hostileInput: inputs that strict parsers cannot read back, or that fail at
// the first step, are refused with a 400 naming the problem, at the HTTP edge and in
// Node.Submit.
func TestServer_submit_hostileInput(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	tests := []struct {
		name, input, msg string
	}{
		{"invalid utf-8", "{\"name\":\"\xff\xfe\"}", "api: input: not valid UTF-8 (at byte 9)"},
		{"invalid utf-8 in a key", "{\"\xc3\x28\":1}", "api: input: not valid UTF-8 (at byte 2)"},
		{"float overflow", `{"name":1e400}`, "api: input: number 1e400 overflows a 64-bit float (at byte 8)"},
		{"nested overflow", `{"a":[1,{"b":-2e999}]}`, "api: input: number -2e999 overflows a 64-bit float (at byte 13)"},
		{"unpaired surrogate", `{"name":"\ud800"}`, "api: input: string holds an unpaired UTF-16 surrogate escape (at byte 9)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eb := f.callErr("POST", "/v1/runs", `{"pipeline":"three","input":`+tt.input+`}`, http.StatusBadRequest, httpapi.CodeBadRequest)
			require.Equal(t, tt.msg, eb.Error.Message)

			_, err := f.node.Submit(context.Background(), actors.SubmitRequest{Pipeline: "three", Input: json.RawMessage(tt.input),
				Snapshot: &messages.ExecutionContextSnapshot{TenantId: "default"}})
			require.True(t, errors.Is(err, actors.ErrBadInput), "Node.Submit: %v", err)
		})
	}
	var runs httpapi.RunList
	f.call("GET", "/v1/runs", "", http.StatusOK, &runs)
	require.Empty(t, runs.Runs, "a hostile input created a run")
	f.submit(`{"pipeline":"three","input":{"name":"ok","tiny":1e-400}}`)
}
