package api_test

import (
	"net/http"
	"testing"

	"github.com/dairuntime/dair/httpapi"
)

// A run lists every step of its pipeline, in graph order: those not started yet as pending;
// once the run failed or was cancelled, a step left running is cancelled (with a finish time)
// and one never started is skipped (failed run) or cancelled (cancelled run).
func TestServer_Runs_stepsOfEveryState(t *testing.T) {
	f := newFixture(t, false, nil)
	f.putPipeline("key: par\nsteps:\n  - {id: slow, uses: sleep, with: {duration: 30s}}\n" +
		"  - {id: bad, uses: fail, with: {times: 5}, retry: {max_attempts: 1}}\n" +
		"  - {id: after, uses: echo, needs: [slow, bad], with: {value: x}}\n")
	f.putPipeline("key: long\nsteps:\n  - {id: s1, uses: sleep, with: {duration: 30s}}\n" +
		"  - {id: s2, uses: echo, needs: [s1], with: {value: x}}\n  - {id: s3, uses: echo, needs: [s2], with: {value: y}}\n")
	statuses := func(r httpapi.Run) map[string]string {
		m := map[string]string{}
		for _, st := range r.Steps {
			m[st.ID] = st.Status
		}
		return m
	}
	stepOf := func(r httpapi.Run, id string) httpapi.Step {
		for _, st := range r.Steps {
			if st.ID == id {
				return st
			}
		}
		t.Fatalf("run %s has no step %s: %+v", r.SharedRunID, id, r.Steps)
		return httpapi.Step{}
	}

	failed := f.waitRun(f.submit(`{"pipeline":"par"}`).SharedRunID, isFinal)
	if failed.Status != "failed" {
		t.Fatalf("run %s, want failed", failed.Status)
	}
	if got := statuses(failed); got["slow"] != "cancelled" || got["bad"] != "failed" || got["after"] != "skipped" || len(got) != 3 {
		t.Fatalf("failed run's steps %v, want slow cancelled, bad failed, after skipped", got)
	}
	if stepOf(failed, "slow").FinishedAt == nil {
		t.Error("the step the failed run left running has no finish time")
	}
	if ids := []string{failed.Steps[0].ID, failed.Steps[1].ID, failed.Steps[2].ID}; ids[2] != "after" {
		t.Errorf("steps in order %v, want after last (graph order)", ids)
	}

	id := f.submit(`{"pipeline":"long"}`).SharedRunID
	running := f.waitRun(id, func(r httpapi.Run) bool { return statuses(r)["s1"] == "running" })
	if got := statuses(running); got["s2"] != "pending" || got["s3"] != "pending" {
		t.Fatalf("running run's steps %v, want s2 and s3 pending", got)
	}
	if needs := stepOf(running, "s3").Needs; len(needs) != 1 || needs[0] != "s2" {
		t.Errorf("pending step s3 needs %v, want [s2]", needs)
	}
	f.call("POST", "/v1/runs/"+id+"/cancel", "", http.StatusOK, nil)
	cancelled := f.waitRun(id, isFinal)
	if got := statuses(cancelled); cancelled.Status != "cancelled" || got["s1"] != "cancelled" || got["s2"] != "cancelled" || got["s3"] != "cancelled" {
		t.Fatalf("cancelled run (%s) steps %v, want all cancelled", cancelled.Status, got)
	}
}
