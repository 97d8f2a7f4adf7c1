package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts. Keys that a script derives from a value it reads (a run's ledger, an
// instance's execution index) are built from a prefix passed in ARGV; dair does not use Redis
// Cluster, so every key lives on the one server. Deadlines and "now" are Unix microseconds.

// scriptCAS writes a versioned record if its version is unchanged.
// KEYS[1] record hash. ARGV[1] expected ver, ARGV[2] new pb, and optionally (liveLib's
// arguments) ARGV[3] live-runs index key or ”, ARGV[4] 'add', 'park' or 'rem', ARGV[5] run id,
// ARGV[6] its score. Returns -1 missing, 0 conflict, 1 written.
var scriptCAS = redis.NewScript(liveLib + `
local v = redis.call('HGET', KEYS[1], 'ver')
if not v then return -1 end
if v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'pb', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
live(3)
return 1
`)

// liveLib keeps the live-runs index (the runs that are not final, which recovery and repair
// scan) and within it the parked-runs index (key ..':parked': the runs parked for scale-out,
// which every finished scale-out request scans) with a run's write: live(i) reads ARGV[i] the
// index key (” or absent: nothing to do), ARGV[i+1] 'add', 'park' (live and parked) or 'rem',
// ARGV[i+2] the run id and ARGV[i+3] its score.
const liveLib = `
local function live(i)
  local key = ARGV[i]
  if not key or key == '' then return end
  local op = ARGV[i + 1]
  if op == 'add' or op == 'park' then
    redis.call('ZADD', key, ARGV[i + 3], ARGV[i + 2])
  else
    redis.call('ZREM', key, ARGV[i + 2])
  end
  if op == 'park' then
    redis.call('ZADD', key .. ':parked', ARGV[i + 3], ARGV[i + 2])
  else
    redis.call('ZREM', key .. ':parked', ARGV[i + 2])
  end
end
`

// scriptCASAppend is scriptCAS that also pushes ARGV[3] onto the list KEYS[2] when the write
// happens and, when KEYS[3] and KEYS[4] are given, ARGV[4] (a usage event) onto the usage list
// KEYS[3] with ARGV[5] (its tenant) added to the set KEYS[4]. ARGV[6..9] are liveLib's
// (optional). Returns {code, new length of KEYS[2]} with code as scriptCAS's.
var scriptCASAppend = redis.NewScript(liveLib + `
local v = redis.call('HGET', KEYS[1], 'ver')
if not v then return {-1, 0} end
if v ~= ARGV[1] then return {0, 0} end
redis.call('HSET', KEYS[1], 'pb', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
local n = redis.call('RPUSH', KEYS[2], ARGV[3])
if #KEYS >= 4 then
  redis.call('RPUSH', KEYS[3], ARGV[4])
  redis.call('SADD', KEYS[4], ARGV[5])
end
live(6)
return {1, n}
`)

// scriptCreateRun stores a run unless its id or its tenant's idempotency key is taken.
// KEYS[1] run hash, KEYS[2] idempotency key, KEYS[3] all-runs index, KEYS[4] tenant index,
// KEYS[5] live-runs index. ARGV[1] pb, ARGV[2] created_at score, ARGV[3] id, ARGV[4] '1' when
// an idempotency key is set, ARGV[5] run key prefix, ARGV[6..9] liveLib's (ARGV[6] is KEYS[5]).
// Returns {1} created, {0, pb} existing by key, {2} id taken.
var scriptCreateRun = redis.NewScript(liveLib + `
if ARGV[4] == '1' then
  local ex = redis.call('GET', KEYS[2])
  if ex then
    local pb = redis.call('HGET', ARGV[5] .. ex, 'pb')
    if pb then return {0, pb} end
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {2} end
redis.call('HSET', KEYS[1], 'pb', ARGV[1], 'ver', '1')
if ARGV[4] == '1' then redis.call('SET', KEYS[2], ARGV[3]) end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[3])
live(6)
return {1}
`)

// scriptCreateVersioned stores a versioned record unless it exists and indexes it.
// KEYS[1] record hash, KEYS[2] index zset. ARGV[1] pb, ARGV[2] score, ARGV[3] id.
// Returns 1 created, 0 exists.
var scriptCreateVersioned = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'pb', ARGV[1], 'ver', '1')
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
`)

// qlib is prepended to the queue scripts: it keeps the per-tenant queues (store.TenantQueues)
// in step with the pending zset. Every queue script takes the same keys: KEYS[1] pending zset,
// KEYS[2] claimed zset (score = deadline), KEYS[3] token hash (item -> token, and 's:' item ->
// the item's pending sequence while it is claimed, so a release puts it back in its place),
// KEYS[4] sequence counter,
// KEYS[5] set of tenants with pending items, KEYS[6] hash item -> tenant, KEYS[7] hash
// tenant -> item count; and ARGV[1] the prefix of the per-tenant pending zsets.
const qlib = `
local TP = ARGV[1]
local function qpend(id)
  -- A released or reclaimed item goes back to its place ('s:' .. id in the token hash holds
  -- its sequence while it is claimed); a new one to the tail.
  local seq = redis.call('HGET', KEYS[3], 's:' .. id)
  if seq then
    redis.call('HDEL', KEYS[3], 's:' .. id)
  else
    seq = redis.call('INCR', KEYS[4])
  end
  local t = redis.call('HGET', KEYS[6], id) or ''
  redis.call('ZADD', KEYS[1], seq, id)
  redis.call('ZADD', TP .. t, seq, id)
  redis.call('SADD', KEYS[5], t)
end
local function qunpend(id)
  local t = redis.call('HGET', KEYS[6], id) or ''
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', TP .. t, id)
  if redis.call('ZCARD', TP .. t) == 0 then redis.call('SREM', KEYS[5], t) end
end
local function qclaim(id, deadline, token)
  local seq = redis.call('ZSCORE', KEYS[1], id)
  qunpend(id)
  redis.call('ZADD', KEYS[2], deadline, id)
  redis.call('HSET', KEYS[3], id, token)
  if seq then redis.call('HSET', KEYS[3], 's:' .. id, seq) end
end
local function qreclaim(now)
  local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
  for _, id in ipairs(expired) do
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    qpend(id)
  end
end
`

// scriptEnqueue makes an item of tenant ARGV[3] pending at the tail (ARGV[4] '0') or ahead of
// every item (ARGV[4] '1': a negative sequence, from its own counter, that qpend takes as
// the item's place) unless it is pending or claimed. ARGV[2] run id. Returns 1 enqueued, 0
// already there.
var scriptEnqueue = redis.NewScript(qlib + `
local id = ARGV[2]
if redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id) then return 0 end
redis.call('HSET', KEYS[6], id, ARGV[3])
redis.call('HINCRBY', KEYS[7], ARGV[3], 1)
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[3], 's:' .. id, -redis.call('INCR', KEYS[4] .. ':front'))
end
qpend(id)
return 1
`)

// scriptClaim returns timed-out claims to their places, then claims up to max oldest items.
// ARGV[2] now, ARGV[3] deadline, ARGV[4] max, ARGV[5..] tokens.
// Returns a flat list id1, token1, id2, token2, ...
var scriptClaim = redis.NewScript(qlib + `
qreclaim(ARGV[2])
local out = {}
local max = tonumber(ARGV[4])
if max <= 0 then return out end
local ids = redis.call('ZRANGE', KEYS[1], 0, max - 1)
for i, id in ipairs(ids) do
  local token = ARGV[4 + i]
  qclaim(id, ARGV[3], token)
  out[#out + 1] = id
  out[#out + 1] = token
end
return out
`)

// scriptClaimTenants is scriptClaim over per-tenant queues. ARGV[2] now, ARGV[3] deadline,
// ARGV[4] number of (tenant, max) pairs n, ARGV[5 .. 4+2n] the pairs, then the tokens.
var scriptClaimTenants = redis.NewScript(qlib + `
qreclaim(ARGV[2])
local out = {}
local n = tonumber(ARGV[4])
local tok = 5 + 2 * n
for p = 0, n - 1 do
  local t, max = ARGV[5 + 2 * p], tonumber(ARGV[6 + 2 * p])
  if max > 0 then
    local ids = redis.call('ZRANGE', TP .. t, 0, max - 1)
    for _, id in ipairs(ids) do
      local token = ARGV[tok]
      tok = tok + 1
      qclaim(id, ARGV[3], token)
      out[#out + 1] = id
      out[#out + 1] = token
    end
  end
end
return out
`)

// scriptBacklog returns a flat list tenant1, pending1, ... of the tenants with pending items,
// each count capped at ARGV[2] when it is above 0.
var scriptBacklog = redis.NewScript(qlib + `
local out = {}
local cap = tonumber(ARGV[2])
for _, t in ipairs(redis.call('SMEMBERS', KEYS[5])) do
  local n = redis.call('ZCARD', TP .. t)
  if cap > 0 and n > cap then n = cap end
  if n > 0 then
    out[#out + 1] = t
    out[#out + 1] = n
  end
end
return out
`)

// scriptAck removes a claimed item if the token still holds it. ARGV[2] id, ARGV[3] token.
// Returns 1 or 0 (lost).
var scriptAck = redis.NewScript(qlib + `
local id = ARGV[2]
if redis.call('HGET', KEYS[3], id) ~= ARGV[3] then return 0 end
redis.call('ZREM', KEYS[2], id)
redis.call('HDEL', KEYS[3], id, 's:' .. id)
local t = redis.call('HGET', KEYS[6], id) or ''
redis.call('HDEL', KEYS[6], id)
if redis.call('HINCRBY', KEYS[7], t, -1) <= 0 then redis.call('HDEL', KEYS[7], t) end
return 1
`)

// scriptReleaseOwner makes every claimed item whose token starts with ARGV[2] pending at its
// place. Returns the number released. The token hash holds one entry per claimed item (pumps ×
// batch), so a full scan is cheap.
var scriptReleaseOwner = redis.NewScript(qlib + `
local flat = redis.call('HGETALL', KEYS[3])
local prefix = ARGV[2]
local n = 0
for i = 1, #flat, 2 do
  local id, token = flat[i], flat[i + 1]
  if string.sub(id, 1, 2) ~= 's:' and string.sub(token, 1, #prefix) == prefix then
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    qpend(id)
    n = n + 1
  end
end
return n
`)

// scriptRelease makes a claimed item pending at its place if the token still holds it.
// ARGV[2] id, ARGV[3] token. Returns 1 or 0 (lost).
var scriptRelease = redis.NewScript(qlib + `
local id = ARGV[2]
if redis.call('HGET', KEYS[3], id) ~= ARGV[3] then return 0 end
redis.call('ZREM', KEYS[2], id)
redis.call('HDEL', KEYS[3], id)
qpend(id)
return 1
`)

// scriptPutInstance stores a descriptor and its shape (store.DescriptorShape, the registry
// version Assign checks) unless its member's tombstone lease is live.
// KEYS[1] instance key, KEYS[2] deadline zset, KEYS[3] tombstone lease hash, KEYS[4] shape
// hash. ARGV[1] pb, ARGV[2] deadline, ARGV[3] id, ARGV[4] now, ARGV[5] tombstone holder
// prefix, ARGV[6] shape. Returns 1 stored, 0 member dead.
var scriptPutInstance = redis.NewScript(`
local l = redis.call('HMGET', KEYS[3], 'holder', 'deadline')
if l[1] and string.sub(l[1], 1, string.len(ARGV[5])) == ARGV[5] and tonumber(l[2]) > tonumber(ARGV[4]) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[4], ARGV[3], ARGV[6])
return 1
`)

// scriptGCInstances deletes registry entries whose heartbeat deadline has passed.
// KEYS[1] deadline zset, KEYS[2] shape hash. ARGV[1] now, ARGV[2] instance key prefix.
// Returns the count.
var scriptGCInstances = redis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('DEL', ARGV[2] .. id)
  redis.call('HDEL', KEYS[2], id)
end
return #ids
`)

// scriptReserve holds a slot for a run if fewer than limit live holds exist.
// KEYS[1] holds zset (score = deadline). ARGV[1] now, ARGV[2] deadline, ARGV[3] run id,
// ARGV[4] limit. Returns 1 held, 0 full.
var scriptReserve = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[3]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
  return 1
end
return 0
`)

// scriptCreateExecution stores an execution unless it exists.
// KEYS[1] execution hash, KEYS[2] its instance index set. ARGV[1] pb, ARGV[2] epoch,
// ARGV[3] owner, ARGV[4] instance, ARGV[5] updated_at, ARGV[6] '1' terminal, ARGV[7] run,
// ARGV[8] id. Returns 1 created, 0 exists.
var scriptCreateExecution = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'pb', ARGV[1], 'ver', '1', 'epoch', ARGV[2], 'owner', ARGV[3],
  'inst', ARGV[4], 'upd', ARGV[5], 'term', ARGV[6], 'run', ARGV[7])
if ARGV[6] == '0' and ARGV[4] ~= '' then redis.call('SADD', KEYS[2], ARGV[8]) end
return 1
`)

// scriptAcquireExecution increments the epoch and takes ownership.
// KEYS[1] execution hash. ARGV[1] owner, ARGV[2] instance, ARGV[3] updated_at,
// ARGV[4] instance index prefix, ARGV[5] id. Returns the new epoch, or -1 when missing.
var scriptAcquireExecution = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'inst', 'term')
if not cur[2] then return -1 end
if cur[1] and cur[1] ~= '' then redis.call('SREM', ARGV[4] .. cur[1], ARGV[5]) end
local e = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'inst', ARGV[2], 'upd', ARGV[3])
if cur[2] == '0' and ARGV[2] ~= '' then redis.call('SADD', ARGV[4] .. ARGV[2], ARGV[5]) end
return e
`)

// fenceBody is the fence of scriptFenceExecution and scriptFenceIfRunAt: it bumps the epoch of
// execution KEYS[1] while it belongs to ARGV[2] or to no instance.
const fenceBody = `
local cur = redis.call('HMGET', KEYS[1], 'inst', 'term', 'epoch')
if not cur[2] then return {-1, 0} end
local inst = cur[1] or ''
if inst ~= '' and inst ~= ARGV[2] then return {0, tonumber(cur[3])} end
if inst ~= '' then redis.call('SREM', ARGV[4] .. inst, ARGV[5]) end
local e = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'inst', '', 'upd', ARGV[3])
return {1, e}
`

// scriptFenceIfRunAt is scriptFenceExecution while the run hash KEYS[2] is still at version
// ARGV[6]; it returns {-2, 0} and fences nothing when the run changed.
var scriptFenceIfRunAt = redis.NewScript(`
if redis.call('HGET', KEYS[2], 'ver') ~= ARGV[6] then return {-2, 0} end
` + fenceBody)

// scriptFenceExecution bumps the epoch while the execution belongs to ARGV[2] or to no
// instance. KEYS[1] execution hash. ARGV[1] owner, ARGV[2] from instance, ARGV[3] updated_at,
// ARGV[4] index prefix, ARGV[5] id. Returns {-1, 0} missing, {0, epoch} moved, {1, epoch} fenced.
var scriptFenceExecution = redis.NewScript(fenceBody)

// scriptUpdateExecution writes an execution if its epoch and version are unchanged.
// KEYS[1] execution hash. ARGV[1] ver, ARGV[2] epoch, ARGV[3] pb, ARGV[4] owner,
// ARGV[5] instance, ARGV[6] updated_at, ARGV[7] '1' terminal, ARGV[8] index prefix, ARGV[9] id.
// Returns -1 missing, 0 conflict, 1 written, 2 stale epoch.
var scriptUpdateExecution = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'ver', 'epoch', 'inst')
if not cur[1] then return -1 end
if cur[2] ~= ARGV[2] then return 2 end
if cur[1] ~= ARGV[1] then return 0 end
if cur[3] and cur[3] ~= '' then redis.call('SREM', ARGV[8] .. cur[3], ARGV[9]) end
redis.call('HSET', KEYS[1], 'pb', ARGV[3], 'owner', ARGV[4], 'inst', ARGV[5], 'upd', ARGV[6],
  'term', ARGV[7])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
if ARGV[7] == '0' and ARGV[5] ~= '' then redis.call('SADD', ARGV[8] .. ARGV[5], ARGV[9]) end
return 1
`)

// Commit results of scriptCommit.
const (
	commitNotFound = -1
	commitStale    = -2
	commitDone     = -3
)

// scriptCommit is the fenced step commit: epoch check, already-succeeded check (no write of any
// status over a succeeded step), step write, ledger appends and the step's usage event, all or
// nothing. The usage event is pushed only when its mark (step id / attempt) is new in the
// execution's metered hash, so no call carrying it can meter the same attempt twice.
// KEYS[1] execution hash, KEYS[2] step pb hash, KEYS[3] step status hash, KEYS[4] metered
// hash, KEYS[5] the tenant's usage list, KEYS[6] usage tenants set. ARGV[1] epoch,
// ARGV[2] step id, ARGV[3] step pb, ARGV[4] step status, ARGV[5] ledger key prefix,
// ARGV[6] usage mark (empty: no usage), ARGV[7] usage pb, ARGV[8] usage tenant,
// then pairs (run id, empty for the execution's run; entry pb).
// Returns -1 not found, -2 stale epoch, -3 already committed, or, written, {0, the
// execution's run id, then each entry's Seq (its position in its ledger list)}.
var scriptCommit = redis.NewScript(commitLib + `return commitStep(0, 0, #ARGV)`)

// commitLib defines commitStep(ko, ao, last), scriptCommit's body reading its keys from
// KEYS[ko + 1] and its arguments from ARGV[ao + 1] to ARGV[last] (so a script can run others
// after it).
const commitLib = `
local function commitStep(ko, ao, last)
  local cur = redis.call('HMGET', KEYS[ko + 1], 'epoch', 'run')
  if not cur[1] then return -1 end
  if cur[1] ~= ARGV[ao + 1] then return -2 end
  local step = ARGV[ao + 2]
  if redis.call('HGET', KEYS[ko + 3], step) == 'succeeded' then return -3 end
  redis.call('HSET', KEYS[ko + 2], step, ARGV[ao + 3])
  redis.call('HSET', KEYS[ko + 3], step, ARGV[ao + 4])
  local out = {0, cur[2] or ''}
  for i = ao + 9, last, 2 do
    local run = ARGV[i]
    if run == '' then run = cur[2] or '' end
    out[#out + 1] = redis.call('RPUSH', ARGV[ao + 5] .. run, ARGV[i + 1])
  end
  if ARGV[ao + 6] ~= '' and redis.call('HSETNX', KEYS[ko + 4], ARGV[ao + 6], '1') == 1 then
    redis.call('RPUSH', KEYS[ko + 5], ARGV[ao + 7])
    redis.call('SADD', KEYS[ko + 6], ARGV[ao + 8])
  end
  return out
end
`

// scriptCommitFinish is scriptCommit then, when the commit was written or its step had
// already succeeded, scriptFinishExecution under the commit's execution and epoch: a run's
// last commit and its end in one call (store.CommitFinisher). KEYS[1..6] scriptCommit's,
// KEYS[7..14] scriptFinishExecution's. ARGV[1] n, the number of scriptCommit's arguments,
// ARGV[2..n+1] those, then scriptFinishExecution's. Returns {commit reply} when the commit was
// refused, else {commit reply, finish reply}.
var scriptCommitFinish = redis.NewScript(pbLib + holdLib + commitLib + finishLib + `
local n = tonumber(ARGV[1])
local c = commitStep(0, 1, n + 1)
if c == -1 or c == -2 then return {c} end
return {c, finishExec(6, n + 1)}
`)

// scriptAppend appends ledger entries. KEYS[i] is the ledger list of ARGV[i] (entry pb).
// Returns the new length of each list after its push (the entry's Seq).
var scriptAppend = redis.NewScript(`
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('RPUSH', KEYS[i], ARGV[i])
end
return out
`)

// scriptAcquireLease takes or renews a lease.
// KEYS[1] lease hash. ARGV[1] holder, ARGV[2] now, ARGV[3] deadline, ARGV[4] the key's time to
// live in ms (the lease's plus a margin: a lapsed lease is free whether or not its key is
// there, and each node incarnation's leases would otherwise stay forever). Returns 1 held, 0
// taken.
var scriptAcquireLease = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'holder', 'deadline')
if cur[1] and cur[1] ~= ARGV[1] and tonumber(cur[2]) > tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'deadline', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// scriptReleaseLease drops a lease held by holder. KEYS[1] lease hash. ARGV[1] holder.
var scriptReleaseLease = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'holder') == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
`)

// allScripts are loaded by Open.
var allScripts = []*redis.Script{
	scriptCAS, scriptCASAppend, scriptCreateRun, scriptCreateVersioned, scriptEnqueue, scriptClaim, scriptClaimTenants, scriptBacklog, scriptAck,
	scriptRelease, scriptReleaseOwner, scriptPutInstance, scriptGCInstances, scriptReserve, scriptCreateExecution,
	scriptAcquireExecution, scriptFenceExecution, scriptFenceIfRunAt, scriptUpdateExecution, scriptCommit, scriptAppend,
	scriptAcquireLease, scriptReleaseLease, scriptClaimRuns, scriptAssign, scriptListInstances, scriptStartExecution,
	scriptFinishExecution, scriptCommitFinish,
}
