package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/dairuntime/dair/httpapi"
)

// diamond's steps sort by id as a, b, join, root; by graph level they are root, a, b, join.
const diamond = `
key: diamond
steps:
  - id: root
    uses: echo
    with: {value: r}
  - id: b
    uses: echo
    needs: [root]
    with: {value: b}
  - id: a
    uses: echo
    needs: [root]
    with: {value: a}
  - id: join
    uses: echo
    needs: [a, b]
    with: {value: j}
`

func TestServer_GetRun_stepsInGraphOrderWithNeeds(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(diamond)
	run := f.waitRun(f.submit(`{"pipeline":"diamond"}`).SharedRunID, isFinal)
	var ids []string
	needs := map[string][]string{}
	for _, s := range run.Steps {
		ids = append(ids, s.ID)
		needs[s.ID] = s.Needs
	}
	if !slices.Equal(ids, []string{"root", "a", "b", "join"}) {
		t.Fatalf("steps = %v, want graph order root, a, b, join", ids)
	}
	if !slices.Equal(needs["join"], []string{"a", "b"}) || len(needs["root"]) != 0 || !slices.Equal(needs["a"], []string{"root"}) {
		t.Fatalf("needs = %v", needs)
	}
}

func TestServer_ListRuns_pipelineFilter(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(diamond)
	f.putPipeline(threeStep)
	d := f.submit(`{"pipeline":"diamond"}`).SharedRunID
	f.submit(`{"pipeline":"three","input":{"name":"x"}}`)
	f.submit(`{"pipeline":"three","input":{"name":"y"}}`)
	var l httpapi.RunList
	f.call("GET", "/v1/runs?pipeline=diamond", "", http.StatusOK, &l)
	if len(l.Runs) != 1 || l.Runs[0].SharedRunID != d {
		t.Fatalf("pipeline=diamond lists %+v", l.Runs)
	}
	f.call("GET", "/v1/runs?pipeline=three&limit=1", "", http.StatusOK, &l)
	if len(l.Runs) != 1 || l.Runs[0].Pipeline != "three" {
		t.Fatalf("pipeline=three&limit=1 lists %+v", l.Runs)
	}
	f.call("GET", "/v1/runs?pipeline=nosuch", "", http.StatusOK, &l)
	if len(l.Runs) != 0 {
		t.Fatalf("pipeline=nosuch lists %+v", l.Runs)
	}
}

func TestServer_SubmitRun_idempotencyKeyHeader(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline(threeStep)
	submit := func(body string, want int, hdr ...string) []byte {
		t.Helper()
		code, b := f.do("POST", "/v1/runs", body, hdr...)
		if code != want {
			t.Fatalf("POST /v1/runs %s (headers %v) = %d %s, want %d", body, hdr, code, b, want)
		}
		return b
	}
	var first, again httpapi.SubmitResponse
	mustJSON(t, submit(`{"pipeline":"three","input":{"name":"a"}}`, http.StatusAccepted, "Idempotency-Key", "k1"), &first)
	mustJSON(t, submit(`{"pipeline":"three","input":{ "name" : "a" }}`, http.StatusAccepted, "Idempotency-Key", "k1"), &again)
	if again.SharedRunID != first.SharedRunID {
		t.Fatalf("the header's key was ignored: %s then %s", first.SharedRunID, again.SharedRunID)
	}
	mustJSON(t, submit(`{"pipeline":"three","input":{"name":"a"},"idempotency_key":"k1"}`, http.StatusAccepted), &again)
	if again.SharedRunID != first.SharedRunID {
		t.Fatalf("header and body keys differ in effect: %s then %s", first.SharedRunID, again.SharedRunID)
	}
	var eb httpapi.ErrorBody
	mustJSON(t, submit(`{"pipeline":"three","input":{"name":"b"}}`, http.StatusConflict, "Idempotency-Key", "k1"), &eb)
	if eb.Error.Code != httpapi.CodeIdempotencyConflict {
		t.Fatalf("reused key with another input: %+v", eb)
	}
	mustJSON(t, submit(`{"pipeline":"three","idempotency_key":"k2"}`, http.StatusBadRequest, "Idempotency-Key", "k3"), &eb)
	if eb.Error.Code != httpapi.CodeBadRequest {
		t.Fatalf("header and body keys differ: %+v", eb)
	}
}

func mustJSON(t *testing.T, b []byte, out any) {
	t.Helper()
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}
