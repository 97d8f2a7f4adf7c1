package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var _ store.ExecutionLifecycle = (*Store)(nil)

// pbLib edits a protobuf message inside a script without decoding it: pbsplit(s, drop, want)
// returns s without its top-level fields whose numbers are keys of drop, and the last value of
// each length-delimited field whose number is a key of want (field number -> bytes).
// Appending the encoding of new values to the kept bytes sets them (protobuf parsers keep a
// field's last value), so Go encodes the fields a script writes, and the script splices them
// in. Tags and lengths are small integers, exact in Lua's doubles; other varints are skipped,
// never decoded. Kept fields are copied in runs, not one by one (a few µs for a run record).
const pbLib = `
local byte, sub, find = string.byte, string.sub, string.find
local function pbvarint(s, i)
  local n, mul = 0, 1
  while true do
    local b = byte(s, i)
    if not b then error('pb: truncated varint') end
    n = n + (b % 128) * mul
    i = i + 1
    if b < 128 then return n, i end
    mul = mul * 128
  end
end
local function pbsplit(s, drop, want)
  local kept, vals, i, n, seg = {}, {}, 1, #s, 1
  while i <= n do
    local start, tag = i, byte(s, i)
    if tag < 128 then i = i + 1 else tag, i = pbvarint(s, i) end
    local num, wt = (tag - tag % 8) / 8, tag % 8
    if wt == 2 then
      local len = byte(s, i)
      if len and len < 128 then i = i + 1 else len, i = pbvarint(s, i) end
      if want[num] then vals[num] = sub(s, i, i + len - 1) end
      i = i + len
    elseif wt == 0 then
      i = find(s, '[%z\1-\127]', i)
      if not i then error('pb: truncated varint') end
      i = i + 1
    elseif wt == 1 then
      i = i + 8
    elseif wt == 5 then
      i = i + 4
    else
      error('pb: unsupported wire type ' .. wt)
    end
    if i > n + 1 then error('pb: truncated field') end
    if drop[num] then
      if start > seg then kept[#kept + 1] = sub(s, seg, start - 1) end
      seg = i
    end
  end
  if seg <= n then kept[#kept + 1] = sub(s, seg, n) end
  return table.concat(kept), vals
end
local function final(status)
  return status == 'succeeded' or status == 'failed' or status == 'cancelled'
end
`

// Field numbers of messages.SharedRun and messages.Execution that the lifecycle scripts read
// or replace (protobuf field numbers never change; the contract tests compare the records written).
// SharedRun: 5 status, 6 assigned_runtime_instance_id, 8 execution_id, 9 local_run_id,
// 11 failure_reason, 13 output, 15 updated_at. Execution: 8 status, 12 updated_at, 14 output,
// 15 failure_reason.

// scriptStartExecution is store.ExecutionLifecycle.StartExecution: it creates the execution
// unless it exists (as scriptCreateExecution) and marks the run running with its entry, only
// while store.StartCheck allows it.
// KEYS[1] execution hash, KEYS[2] its instance index set, KEYS[3] run hash, KEYS[4] run ledger.
// ARGV[1..8] as scriptCreateExecution's (pb, epoch, owner, instance, updated_at, '1' terminal,
// run, id), ARGV[9] local run id, ARGV[10] the run's new fields (status, instance, execution,
// local run, updated_at) encoded, ARGV[11] entry pb. Returns {code, created, seq or reason}:
// code 0 marked, 1 nothing to mark, -1 run missing, -2 run moved (reason), -3 stale epoch
// (current epoch).
var scriptStartExecution = redis.NewScript(pbLib + `
local pb = redis.call('HGET', KEYS[3], 'pb')
if not pb then return {-1, 0, ''} end
local ep = redis.call('HGET', KEYS[1], 'epoch')
if ep and ep ~= ARGV[2] then return {-3, 0, ep} end
local kept, v = pbsplit(pb, {[5] = true, [6] = true, [8] = true, [9] = true, [15] = true},
  {[5] = true, [6] = true, [8] = true, [9] = true})
local status, inst, exec, lrun = v[5] or '', v[6] or '', v[8] or '', v[9] or ''
if exec ~= '' and exec ~= ARGV[8] then return {-2, 0, 'the run names execution ' .. exec} end
if final(status) and exec == '' then return {-2, 0, 'the run is ' .. status .. ' without this execution'} end
if not final(status) then
  if inst ~= ARGV[4] then return {-2, 0, 'assigned to "' .. inst .. '"'} end
  if status ~= 'dispatched' and status ~= 'running' and status ~= 'paused' then return {-2, 0, 'run is ' .. status} end
end
local created = 0
if not ep then
  redis.call('HSET', KEYS[1], 'pb', ARGV[1], 'ver', '1', 'epoch', ARGV[2], 'owner', ARGV[3],
    'inst', ARGV[4], 'upd', ARGV[5], 'term', ARGV[6], 'run', ARGV[7])
  if ARGV[6] == '0' and ARGV[4] ~= '' then redis.call('SADD', KEYS[2], ARGV[8]) end
  created = 1
end
if final(status) or (status == 'running' and exec == ARGV[8] and lrun == ARGV[9]) then return {1, created, ''} end
redis.call('HSET', KEYS[3], 'pb', kept .. ARGV[10])
redis.call('HINCRBY', KEYS[3], 'ver', 1)
return {0, created, redis.call('RPUSH', KEYS[4], ARGV[11])}
`)

// StartExecution creates the execution and marks its run running in one script. See
// store.ExecutionLifecycle.
func (s *Store) StartExecution(ctx context.Context, st store.ExecutionStart) (store.StartResult, error) {
	id, runID, op := st.Execution.GetExecutionId(), st.Execution.GetSharedRunId(), "start execution "+st.Execution.GetExecutionId()
	if id == "" || runID == "" || st.Entry == nil {
		return store.StartResult{}, fmt.Errorf("redisstore: start execution: empty execution or run id, or no entry")
	}
	now := s.now().UnixNano()
	x, pb, err := newExecutionRecord(st.Execution, now)
	if err != nil {
		return store.StartResult{}, err
	}
	fields, err := marshal("run", &messages.SharedRun{Status: messages.RunRunning, AssignedRuntimeInstanceId: x.RuntimeInstanceId,
		ExecutionId: id, LocalRunId: x.LocalRunId, UpdatedAt: now})
	if err != nil {
		return store.StartResult{}, err
	}
	entry, epb, err := ledgerArg(st.Entry, runID, now)
	if err != nil {
		return store.StartResult{}, err
	}
	res, err := s.runScript(ctx, op, scriptStartExecution,
		[]string{s.execKey(id), s.execIndexKey(x.RuntimeInstanceId), s.runKey(runID), s.ledgerKey(runID)},
		pb, x.Epoch, x.Owner, x.RuntimeInstanceId, x.UpdatedAt, terminalExec(x.Status), runID, id, x.LocalRunId, fields, epb)
	if err != nil {
		return store.StartResult{}, err
	}
	out, _ := res.([]any)
	if len(out) != 3 {
		return store.StartResult{}, fmt.Errorf("redisstore: %s: unexpected reply %v", op, res)
	}
	code, _ := out[0].(int64)
	created, _ := out[1].(int64)
	detail, _ := asString(out[2])
	switch code {
	case 0:
		entry.Seq, _ = out[2].(int64)
		return store.StartResult{Created: created == 1, Entry: entry}, nil
	case 1:
		return store.StartResult{Created: created == 1}, nil
	case -1:
		return store.StartResult{}, fmt.Errorf("redisstore: %s: run %s: %w", op, runID, store.ErrNotFound)
	case -2:
		return store.StartResult{}, fmt.Errorf("redisstore: %s: %w: %s", op, store.ErrRunMoved, detail)
	case -3:
		return store.StartResult{}, fmt.Errorf("redisstore: %s at epoch %d (current %s): %w", op, x.Epoch, detail, store.ErrStaleEpoch)
	}
	return store.StartResult{}, fmt.Errorf("redisstore: %s: unexpected reply %v", op, res)
}

// ledgerArg returns a copy of le as the entry of run runID (At now when zero, Seq unset) and
// its encoding.
func ledgerArg(le *messages.LedgerEntry, runID string, now int64) (*messages.LedgerEntry, []byte, error) {
	e := proto.Clone(le).(*messages.LedgerEntry)
	e.SharedRunId, e.Seq = runID, 0
	if e.At == 0 {
		e.At = now
	}
	b, err := marshal("ledger entry", e)
	return e, b, err
}

// scriptFinishExecution is store.ExecutionLifecycle.FinishExecution: epoch check, execution
// end, the run's final status with its entry and usage event (unless the run is final or
// names another execution) and the release of the run's hold (as scriptReleaseHold), all or
// nothing. KEYS[1] instance holds, KEYS[2] hold-of hash (holdLib's), KEYS[3] execution hash,
// KEYS[4] run hash, KEYS[5] run ledger, KEYS[6] the tenant's usage list, KEYS[7] usage tenants
// set, KEYS[8] live-runs index. ARGV[1] run id, ARGV[2] instance (empty: release nothing),
// ARGV[3] tenant holds prefix, ARGV[4] epoch, ARGV[5] the execution's new fields (status,
// output, reason, updated_at) encoded, ARGV[6] updated_at, ARGV[7] execution index prefix,
// ARGV[8] execution id, ARGV[9] the run's new fields (status, output, reason, updated_at)
// encoded, ARGV[10] entry pb, ARGV[11] usage pb (empty: none), ARGV[12] usage tenant.
// Returns {code, seq}: 0 run ended (seq of its entry), 1 run left as it was, -1 execution
// missing, -2 stale epoch, -4 run missing.
var scriptFinishExecution = redis.NewScript(pbLib + holdLib + finishLib + `return finishExec(0, 0)`)

// finishLib defines finishExec(ko, ao), scriptFinishExecution's body reading its keys from
// KEYS[ko + 1] and its arguments from ARGV[ao + 1] on (so a script can run it after others).
// It needs pbLib and holdLib.
const finishLib = `
local function finishExec(ko, ao)
  local cur = redis.call('HMGET', KEYS[ko + 3], 'epoch', 'inst', 'pb')
  if not cur[1] then return {-1, 0} end
  if cur[1] ~= ARGV[ao + 4] then return {-2, 0} end
  local run = redis.call('HGET', KEYS[ko + 4], 'pb')
  if not run then return {-4, 0} end
  local xkept = pbsplit(cur[3], {[8] = true, [12] = true, [14] = true, [15] = true}, {})
  if cur[2] and cur[2] ~= '' then redis.call('SREM', ARGV[ao + 7] .. cur[2], ARGV[ao + 8]) end
  redis.call('HSET', KEYS[ko + 3], 'pb', xkept .. ARGV[ao + 5], 'upd', ARGV[ao + 6], 'term', '1')
  redis.call('HINCRBY', KEYS[ko + 3], 'ver', 1)
  local code, seq = 1, 0
  local kept, v = pbsplit(run, {[5] = true, [11] = true, [13] = true, [15] = true}, {[5] = true, [8] = true})
  local exec = v[8] or ''
  if not final(v[5] or '') and (exec == '' or exec == ARGV[ao + 8]) then
    redis.call('HSET', KEYS[ko + 4], 'pb', kept .. ARGV[ao + 9])
    redis.call('HINCRBY', KEYS[ko + 4], 'ver', 1)
    redis.call('ZREM', KEYS[ko + 8], ARGV[ao + 1])
    seq = redis.call('RPUSH', KEYS[ko + 5], ARGV[ao + 10])
    if ARGV[ao + 11] ~= '' then
      redis.call('RPUSH', KEYS[ko + 6], ARGV[ao + 11])
      redis.call('SADD', KEYS[ko + 7], ARGV[ao + 12])
    end
    code = 0
  end
  if ARGV[ao + 2] ~= '' then
    redis.call('ZREM', KEYS[ko + 1], ARGV[ao + 1])
    local th = tenantHold(ARGV[ao + 1], KEYS[ko + 2], ARGV[ao + 2], ARGV[ao + 3])
    if th then
      redis.call('ZREM', th, ARGV[ao + 1])
      redis.call('HDEL', KEYS[ko + 2], ARGV[ao + 1])
    end
  end
  return {code, seq}
end
`

// FinishExecution ends the execution, its run and the run's hold in one script. See
// store.ExecutionLifecycle.
func (s *Store) FinishExecution(ctx context.Context, f store.ExecutionFinish) (store.FinishResult, error) {
	op := "finish execution " + f.ExecutionID
	keys, args, entry, err := s.finishArgs(f)
	if err != nil {
		return store.FinishResult{}, err
	}
	res, err := s.runScript(ctx, op, scriptFinishExecution, keys, args...)
	if err != nil {
		return store.FinishResult{}, err
	}
	return finishResult(op, f, res, entry)
}

// finishArgs builds the keys and arguments of finishExec (finishLib) for f, and the entry it
// appends (Seq unset).
func (s *Store) finishArgs(f store.ExecutionFinish) ([]string, []any, *messages.LedgerEntry, error) {
	if f.ExecutionID == "" || f.RunID == "" || f.Entry == nil || !messages.IsTerminalRun(f.Status) {
		return nil, nil, nil, fmt.Errorf("redisstore: finish execution %s: empty execution or run id, no entry or status %q not final",
			f.ExecutionID, f.Status)
	}
	now := s.now().UnixNano()
	xf, err := marshal("execution", &messages.Execution{Status: f.Status, Output: f.Output, FailureReason: f.FailureReason, UpdatedAt: now})
	if err != nil {
		return nil, nil, nil, err
	}
	rf, err := marshal("run", &messages.SharedRun{Status: f.Status, Output: f.Output, FailureReason: f.FailureReason, UpdatedAt: now})
	if err != nil {
		return nil, nil, nil, err
	}
	entry, epb, err := ledgerArg(f.Entry, f.RunID, now)
	if err != nil {
		return nil, nil, nil, err
	}
	upb, tenant := []byte{}, ""
	if f.Usage != nil {
		u := proto.Clone(f.Usage).(*messages.UsageEvent)
		if u.At == 0 {
			u.At = now
		}
		if upb, err = marshal("usage event", u); err != nil {
			return nil, nil, nil, err
		}
		tenant = u.TenantId
	}
	keys := []string{s.resvKey(f.InstanceID), s.holdOf(), s.execKey(f.ExecutionID), s.runKey(f.RunID), s.ledgerKey(f.RunID),
		s.usageKey(tenant), s.usageTenants(), s.liveIndex()}
	args := []any{f.RunID, f.InstanceID, s.tenantHoldsPrefix(), f.Epoch, xf, now, s.execIndexPrefix(), f.ExecutionID, rf, epb, upb, tenant}
	return keys, args, entry, nil
}

// finishResult maps finishExec's reply to FinishExecution's answer; entry is finishArgs'.
func finishResult(op string, f store.ExecutionFinish, res any, entry *messages.LedgerEntry) (store.FinishResult, error) {
	out, _ := res.([]any)
	if len(out) != 2 {
		return store.FinishResult{}, fmt.Errorf("redisstore: %s: unexpected reply %v", op, res)
	}
	code, _ := out[0].(int64)
	switch code {
	case 0:
		entry.Seq, _ = out[1].(int64)
		return store.FinishResult{Changed: true, Entry: entry}, nil
	case 1:
		return store.FinishResult{}, nil
	case -1:
		return store.FinishResult{}, fmt.Errorf("redisstore: %s: %w", op, store.ErrNotFound)
	case -2:
		return store.FinishResult{}, fmt.Errorf("redisstore: %s at epoch %d: %w", op, f.Epoch, store.ErrStaleEpoch)
	case -4:
		return store.FinishResult{}, fmt.Errorf("redisstore: %s: run %s: %w", op, f.RunID, store.ErrNotFound)
	}
	return store.FinishResult{}, fmt.Errorf("redisstore: %s: unexpected reply %v", op, res)
}
