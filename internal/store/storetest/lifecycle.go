package storetest

import (
	"testing"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var tenantStateTests = []contractTest{
	{"PutTenantState_getUpsert", testTenantStates},
}

var instanceRecordTests = []contractTest{
	{"PutInstanceRecord_createdAt", testInstanceRecordCreatedAt},
	{"ListInstanceRecords_byTenant", testInstanceRecordsByTenant},
	{"PutInstanceRecord_moveTenant", testInstanceRecordMove},
	{"DeleteInstanceRecord_missing", testInstanceRecordDelete},
}

func testTenantStates(t *testing.T, e *env) {
	_, err := e.st.GetTenantState(e.ctx, "t1")
	isErr(t, err, store.ErrNotFound)
	noErr(t, e.st.PutTenantState(e.ctx, &messages.TenantState{TenantId: "t1", LastSeenAt: 10}))
	noErr(t, e.st.PutTenantState(e.ctx, &messages.TenantState{TenantId: "t1", LastSeenAt: 20, ScaledToZeroAt: 30, EnsuredAt: 5}))
	got, err := e.st.GetTenantState(e.ctx, "t1")
	noErr(t, err)
	equal(t, "LastSeenAt", got.GetLastSeenAt(), int64(20))
	equal(t, "ScaledToZeroAt", got.GetScaledToZeroAt(), int64(30))
	equal(t, "EnsuredAt", got.GetEnsuredAt(), int64(5))
	_, err = e.st.GetTenantState(e.ctx, "t2")
	isErr(t, err, store.ErrNotFound)
}

func record(id, tenant string, replicas int32) *messages.InstanceRecord {
	return &messages.InstanceRecord{RuntimeInstanceId: id, TenantId: tenant, Prefix: tenant + "-runtime", Replicas: replicas,
		Settings: &messages.TenantSettings{TenantId: tenant}}
}

func recordIDs(t *testing.T, e *env, tenant string) []string {
	t.Helper()
	list, err := e.st.ListInstanceRecords(e.ctx, tenant)
	noErr(t, err)
	return ids(list, (*messages.InstanceRecord).GetRuntimeInstanceId)
}

func testInstanceRecordCreatedAt(t *testing.T, e *env) {
	noErr(t, e.st.PutInstanceRecord(e.ctx, record("a-1", "a", 1)))
	got, err := e.st.GetInstanceRecord(e.ctx, "a-1")
	noErr(t, err)
	equal(t, "CreatedAt", got.GetCreatedAt(), epoch.UnixNano())
	equal(t, "settings tenant", got.GetSettings().GetTenantId(), "a")

	r := record("a-2", "a", 0)
	r.CreatedAt, r.ZeroSince = 7, 9
	noErr(t, e.st.PutInstanceRecord(e.ctx, r))
	got, err = e.st.GetInstanceRecord(e.ctx, "a-2")
	noErr(t, err)
	equal(t, "kept CreatedAt", got.GetCreatedAt(), int64(7))
	equal(t, "ZeroSince", got.GetZeroSince(), int64(9))
	equal(t, "Replicas", got.GetReplicas(), int32(0))
	_, err = e.st.GetInstanceRecord(e.ctx, "missing")
	isErr(t, err, store.ErrNotFound)
}

func testInstanceRecordsByTenant(t *testing.T, e *env) {
	noErr(t, e.st.PutInstanceRecord(e.ctx, record("b-2", "b", 1)))
	noErr(t, e.st.PutInstanceRecord(e.ctx, record("a-2", "a", 1)))
	noErr(t, e.st.PutInstanceRecord(e.ctx, record("a-1", "a", 0)))
	noErr(t, e.st.PutInstanceRecord(e.ctx, record("a-1", "a", 1))) // upsert: no duplicate
	equalIDs(t, "tenant a", recordIDs(t, e, "a"), []string{"a-1", "a-2"})
	equalIDs(t, "tenant b", recordIDs(t, e, "b"), []string{"b-2"})
	equalIDs(t, "tenant c", recordIDs(t, e, "c"), []string{})
	equalIDs(t, "all", recordIDs(t, e, ""), []string{"a-1", "a-2", "b-2"})
}

func testInstanceRecordMove(t *testing.T, e *env) {
	noErr(t, e.st.PutInstanceRecord(e.ctx, record("x-1", "a", 1)))
	noErr(t, e.st.PutInstanceRecord(e.ctx, record("x-1", "b", 1)))
	equalIDs(t, "tenant a", recordIDs(t, e, "a"), []string{})
	equalIDs(t, "tenant b", recordIDs(t, e, "b"), []string{"x-1"})
}

func testInstanceRecordDelete(t *testing.T, e *env) {
	noErr(t, e.st.PutInstanceRecord(e.ctx, record("a-1", "a", 0)))
	noErr(t, e.st.PutInstanceRecord(e.ctx, record("a-2", "a", 1)))
	noErr(t, e.st.DeleteInstanceRecord(e.ctx, "a-1"))
	noErr(t, e.st.DeleteInstanceRecord(e.ctx, "a-1"))
	noErr(t, e.st.DeleteInstanceRecord(e.ctx, "never"))
	_, err := e.st.GetInstanceRecord(e.ctx, "a-1")
	isErr(t, err, store.ErrNotFound)
	equalIDs(t, "tenant a", recordIDs(t, e, "a"), []string{"a-2"})
	equalIDs(t, "all", recordIDs(t, e, ""), []string{"a-2"})
}
