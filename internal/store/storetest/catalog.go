package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var tenantTests = []contractTest{
	{"PutTenant_getList", testTenants},
}

var scaleOutTests = []contractTest{
	{"CreateScaleOut_exists", testCreateScaleOut},
	{"UpdateScaleOut_atomic", testUpdateScaleOut},
	{"ListScaleOuts_statuses", testListScaleOuts},
}

var pipelineTests = []contractTest{
	{"PutPipeline_versions", testPipelines},
}

var usageTests = []contractTest{
	{"ListUsage_filter", testUsage},
	{"CommitSteps_usageExactlyOnce", testCommitUsageExactlyOnce},
	{"UpdateRunAndMeter_usageWithTerminalWrite", testUpdateRunAndMeter},
}

func testTenants(t *testing.T, e *env) {
	_, err := e.st.GetTenant(e.ctx, "t1")
	isErr(t, err, store.ErrNotFound)
	noErr(t, e.st.PutTenant(e.ctx, &messages.TenantSettings{TenantId: "t2", IsolationMode: messages.IsolationShared}))
	noErr(t, e.st.PutTenant(e.ctx, &messages.TenantSettings{TenantId: "t1", MaxRuntimeInstances: 2}))
	noErr(t, e.st.PutTenant(e.ctx, &messages.TenantSettings{TenantId: "t1", MaxRuntimeInstances: 4}))
	got, err := e.st.GetTenant(e.ctx, "t1")
	noErr(t, err)
	equal(t, "max instances", got.GetMaxRuntimeInstances(), int32(4))
	list, err := e.st.ListTenants(e.ctx)
	noErr(t, err)
	equalIDs(t, "tenants", ids(list, (*messages.TenantSettings).GetTenantId), []string{"t1", "t2"})
}

func scaleOut(id, status string) *messages.ScaleOutRequest {
	return &messages.ScaleOutRequest{RequestId: id, Status: status,
		Settings: &messages.TenantSettings{TenantId: "t1"}}
}

func testCreateScaleOut(t *testing.T, e *env) {
	noErr(t, e.st.CreateScaleOut(e.ctx, scaleOut("s1", messages.ScaleOutPending)))
	isErr(t, e.st.CreateScaleOut(e.ctx, scaleOut("s1", messages.ScaleOutPending)), store.ErrExists)
	got, err := e.st.GetScaleOut(e.ctx, "s1")
	noErr(t, err)
	equal(t, "tenant", got.GetSettings().GetTenantId(), "t1")
	_, err = e.st.GetScaleOut(e.ctx, "missing")
	isErr(t, err, store.ErrNotFound)
}

func testUpdateScaleOut(t *testing.T, e *env) {
	noErr(t, e.st.CreateScaleOut(e.ctx, scaleOut("s1", messages.ScaleOutPending)))
	const n = 16
	runConcurrently(t, n, func(int) error {
		_, err := e.st.UpdateScaleOut(e.ctx, "s1", func(r *messages.ScaleOutRequest) error {
			r.Attempts++
			return nil
		})
		return err
	})
	got, err := e.st.GetScaleOut(e.ctx, "s1")
	noErr(t, err)
	equal(t, "attempts", got.GetAttempts(), int32(n))
	boom := errors.New("boom")
	_, err = e.st.UpdateScaleOut(e.ctx, "s1", func(*messages.ScaleOutRequest) error { return boom })
	isErr(t, err, boom)
	_, err = e.st.UpdateScaleOut(e.ctx, "missing", func(*messages.ScaleOutRequest) error { return nil })
	isErr(t, err, store.ErrNotFound)
}

func testListScaleOuts(t *testing.T, e *env) {
	// Created out of id order so ordering by CreatedAt is visible.
	for i, id := range []string{"s3", "s1", "s2", "s4"} {
		r := scaleOut(id, []string{messages.ScaleOutPending, messages.ScaleOutProvisioning}[i%2])
		r.CreatedAt = epoch.Add(time.Duration(i) * time.Second).UnixNano()
		noErr(t, e.st.CreateScaleOut(e.ctx, r))
	}
	_, err := e.st.UpdateScaleOut(e.ctx, "s4", func(r *messages.ScaleOutRequest) error {
		r.Status = messages.ScaleOutFulfilled
		return nil
	})
	noErr(t, err)
	reqID := (*messages.ScaleOutRequest).GetRequestId
	tests := []struct {
		name     string
		statuses []string
		want     []string
	}{
		{"all", nil, []string{"s3", "s1", "s2", "s4"}},
		{"pending", []string{messages.ScaleOutPending}, []string{"s3", "s2"}},
		{"open", []string{messages.ScaleOutPending, messages.ScaleOutProvisioning}, []string{"s3", "s1", "s2"}},
		{"failed", []string{messages.ScaleOutFailed}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.st.ListScaleOuts(e.ctx, tc.statuses...)
			noErr(t, err)
			equalIDs(t, "requests", ids(got, reqID), tc.want)
		})
	}
}

func testPipelines(t *testing.T, e *env) {
	put := func(key, hash string) {
		t.Helper()
		noErr(t, e.st.PutPipeline(e.ctx, &messages.PipelineVersion{Key: key, Hash: hash, Source: []byte(key + hash)}))
	}
	_, err := e.st.GetPipeline(e.ctx, "k", "")
	isErr(t, err, store.ErrNotFound)
	put("k", "h1")
	put("k", "h2")
	put("a", "h9")
	latest, err := e.st.GetPipeline(e.ctx, "k", "")
	noErr(t, err)
	equal(t, "latest", latest.GetHash(), "h2")
	old, err := e.st.GetPipeline(e.ctx, "k", "h1")
	noErr(t, err)
	equal(t, "exact source", string(old.GetSource()), "kh1")
	_, err = e.st.GetPipeline(e.ctx, "k", "nope")
	isErr(t, err, store.ErrNotFound)
	list, err := e.st.ListPipelines(e.ctx)
	noErr(t, err)
	equalIDs(t, "keys", ids(list, func(p *messages.PipelineVersion) string { return p.GetKey() + "@" + p.GetHash() }),
		[]string{"a@h9", "k@h2"})
	put("k", "h1") // re-putting an old version makes it latest again
	latest, err = e.st.GetPipeline(e.ctx, "k", "")
	noErr(t, err)
	equal(t, "latest again", latest.GetHash(), "h1")
}

func testUsage(t *testing.T, e *env) {
	at := func(s int) int64 { return epoch.Add(time.Duration(s) * time.Second).UnixNano() }
	// Appended out of time order.
	events := []*messages.UsageEvent{
		{TenantId: "t1", StepId: "s3", At: at(3), Kind: "step"},
		{TenantId: "t2", StepId: "s1", At: at(1), Kind: "step"},
		{TenantId: "t1", StepId: "s1", At: at(1), Kind: "step", PromptTokens: 10},
		{TenantId: "t1", StepId: "s5", At: at(5), Kind: "run"},
	}
	noErr(t, e.st.AppendUsage(e.ctx, events[:2]...))
	noErr(t, e.st.AppendUsage(e.ctx, events[2:]...))
	label := func(u *messages.UsageEvent) string { return u.GetTenantId() + "/" + u.GetStepId() }
	tests := []struct {
		name string
		f    store.UsageFilter
		want []string
	}{
		{"tenant", store.UsageFilter{TenantID: "t1"}, []string{"t1/s1", "t1/s3", "t1/s5"}},
		{"window", store.UsageFilter{TenantID: "t1", From: epoch.Add(time.Second), To: epoch.Add(5 * time.Second)}, []string{"t1/s1", "t1/s3"}},
		{"from", store.UsageFilter{TenantID: "t1", From: epoch.Add(2 * time.Second)}, []string{"t1/s3", "t1/s5"}},
		{"otherTenant", store.UsageFilter{TenantID: "t2"}, []string{"t2/s1"}},
		{"none", store.UsageFilter{TenantID: "t3"}, []string{}},
		// Bounds past what int64 nanoseconds hold are no bounds (a "to the end of time" query).
		{"farBounds", store.UsageFilter{TenantID: "t1", From: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
			To: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)}, []string{"t1/s1", "t1/s3", "t1/s5"}},
		{"farTo", store.UsageFilter{TenantID: "t1", From: epoch.Add(2 * time.Second), To: time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC)},
			[]string{"t1/s3", "t1/s5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.st.ListUsage(e.ctx, tc.f)
			noErr(t, err)
			equalIDs(t, "events", ids(got, label), tc.want)
		})
	}
	all, err := e.st.ListUsage(e.ctx, store.UsageFilter{})
	noErr(t, err)
	equal(t, "all tenants", len(all), 4)
	for i := 1; i < len(all); i++ {
		if all[i].GetAt() < all[i-1].GetAt() {
			t.Fatalf("usage not ordered by At: %v", fmt.Sprint(ids(all, label)))
		}
	}
}
