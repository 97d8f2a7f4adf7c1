package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var _ store.Assigner = (*Store)(nil)

// scriptClaimRuns is scriptClaim that also reads each claimed run's pb and version.
// KEYS and ARGV[1] as every queue script (qlib). ARGV[2] now, ARGV[3] deadline, ARGV[4] max,
// ARGV[5] run key prefix, ARGV[6..] tokens. Returns a flat list id, token, pb or false, ver or
// false, ...
var scriptClaimRuns = redis.NewScript(qlib + `
qreclaim(ARGV[2])
local out = {}
local max = tonumber(ARGV[4])
if max <= 0 then return out end
local ids = redis.call('ZRANGE', KEYS[1], 0, max - 1)
for i, id in ipairs(ids) do
  local token = ARGV[5 + i]
  qclaim(id, ARGV[3], token)
  local r = redis.call('HMGET', ARGV[5] .. id, 'pb', 'ver')
  out[#out + 1] = id
  out[#out + 1] = token
  out[#out + 1] = r[1]
  out[#out + 1] = r[2]
end
return out
`)

// Result codes of scriptAssign (the store.AssignResult values).
const (
	assignOK      = int64(store.Assigned)
	assignFull    = int64(store.InstanceFull)
	assignChanged = int64(store.RunChanged)

	assignInstChanged = int64(store.InstanceChanged)
)

// scriptAssign is the dispatch decision's write: version check, slot reservation under the
// limit, run write, queue entry removal (pending or claimed, with its per-tenant index) and
// ledger appends, all or nothing. Expected version '0' creates the run (it must not exist) and
// indexes it as scriptCreateRun does.
// KEYS[1..7] and ARGV[1] as every queue script (qlib); KEYS[8] run hash, KEYS[9] holds zset,
// KEYS[10] ledger list, KEYS[11] all-runs index, KEYS[12] tenant index, KEYS[13] instance
// deadline zset, KEYS[14] instance shape hash, KEYS[15] live-runs index. ARGV[2] expected ver, ARGV[3] run pb, ARGV[4]
// now, ARGV[5] hold deadline, ARGV[6] run id, ARGV[7] limit, ARGV[8] created_at score,
// ARGV[9] expected instance version (its shape; '0' unchecked), ARGV[10] instance id,
// ARGV[11..] ledger entry pbs. Returns {code, live holds}: code 0 assigned, 1 full, 2 run
// changed, 3 instance changed.
var scriptAssign = redis.NewScript(qlib + `
local id = ARGV[6]
redis.call('ZREMRANGEBYSCORE', KEYS[9], '-inf', ARGV[4])
if ARGV[9] ~= '0' then
  local dl = redis.call('ZSCORE', KEYS[13], ARGV[10])
  if not dl or tonumber(dl) <= tonumber(ARGV[4]) or redis.call('HGET', KEYS[14], ARGV[10]) ~= ARGV[9] then
    return {3, redis.call('ZCARD', KEYS[9])}
  end
end
local create = ARGV[2] == '0'
if create then
  if redis.call('EXISTS', KEYS[8]) == 1 then return {2, redis.call('ZCARD', KEYS[9])} end
elseif redis.call('HGET', KEYS[8], 'ver') ~= ARGV[2] then
  return {2, redis.call('ZCARD', KEYS[9])}
end
if not redis.call('ZSCORE', KEYS[9], id) and redis.call('ZCARD', KEYS[9]) >= tonumber(ARGV[7]) then
  return {1, redis.call('ZCARD', KEYS[9])}
end
redis.call('ZADD', KEYS[9], ARGV[5], id)
redis.call('ZADD', KEYS[15], ARGV[8], id)
if create then
  redis.call('HSET', KEYS[8], 'pb', ARGV[3], 'ver', '1')
  redis.call('ZADD', KEYS[11], ARGV[8], id)
  redis.call('ZADD', KEYS[12], ARGV[8], id)
else
  redis.call('HSET', KEYS[8], 'pb', ARGV[3])
  redis.call('HINCRBY', KEYS[8], 'ver', 1)
end
local t = redis.call('HGET', KEYS[6], id)
if t then
  qunpend(id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id, 's:' .. id)
  redis.call('HDEL', KEYS[6], id)
  if redis.call('HINCRBY', KEYS[7], t, -1) <= 0 then redis.call('HDEL', KEYS[7], t) end
else
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id, 's:' .. id)
end
for i = 11, #ARGV do redis.call('RPUSH', KEYS[10], ARGV[i]) end
return {0, redis.call('ZCARD', KEYS[9])}
`)

// ClaimRuns claims like Claim and reads the claimed runs in the same script. See store.Assigner.
func (s *Store) ClaimRuns(ctx context.Context, pumpID string, max int, visibility time.Duration) ([]store.ClaimedRun, error) {
	max = maxInt(max, 0)
	args := make([]any, 0, 5+max)
	args = append(args, s.qTenantPrefix(), s.nowMicros(), s.deadline(visibility), max, s.runKey(""))
	for range max {
		tok, err := newToken(pumpID)
		if err != nil {
			return nil, err
		}
		args = append(args, tok)
	}
	res, err := s.runScript(ctx, "claim runs for "+pumpID, scriptClaimRuns,
		s.qKeys(), args...)
	if err != nil {
		return nil, err
	}
	flat, _ := res.([]any)
	out := make([]store.ClaimedRun, 0, len(flat)/4)
	for i := 0; i+3 < len(flat); i += 4 {
		id, ok1 := asString(flat[i])
		tok, ok2 := asString(flat[i+1])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("redisstore: claim runs for %s: unexpected reply %v", pumpID, res)
		}
		cr := store.ClaimedRun{Claim: store.Claim{RunID: id, Token: tok}}
		pb, okPB := asString(flat[i+2])
		ver, okVer := asString(flat[i+3])
		if okPB && okVer {
			if cr.Run, cr.Version, err = decodeVersionedRun([]byte(pb), ver); err != nil {
				return nil, err
			}
		}
		out = append(out, cr)
	}
	return out, nil
}

// GetRunVersion returns the run and its record version. See store.Assigner.
func (s *Store) GetRunVersion(ctx context.Context, id string) (*messages.SharedRun, int64, error) {
	if err := s.check(); err != nil {
		return nil, 0, fmt.Errorf("redisstore: get run %s: %w", id, err)
	}
	pb, ver, err := s.loadVersioned(ctx, s.runKey(id))
	if err != nil {
		return nil, 0, fmt.Errorf("redisstore: get run %s: %w", id, err)
	}
	return decodeVersionedRun(pb, ver)
}

func decodeVersionedRun(pb []byte, ver string) (*messages.SharedRun, int64, error) {
	v, err := strconv.ParseInt(ver, 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("redisstore: run version %q: %w", ver, err)
	}
	r := &messages.SharedRun{}
	if err := unmarshal("run", pb, r); err != nil {
		return nil, 0, err
	}
	return r, v, nil
}

// Assign writes a dispatch decision in one script. See store.Assigner.
func (s *Store) Assign(ctx context.Context, a store.Assignment) (store.AssignResult, int, error) {
	id := a.Run.GetSharedRunId()
	if id == "" || a.InstanceID == "" {
		return 0, 0, fmt.Errorf("redisstore: assign: empty run or instance id")
	}
	if a.Version == store.NewRunVersion && a.Run.GetIdempotencyKey() != "" {
		return 0, 0, fmt.Errorf("redisstore: assign %s: a run with an idempotency key is created by CreateRun", id)
	}
	r := proto.Clone(a.Run).(*messages.SharedRun)
	now := s.now()
	r.UpdatedAt = now.UnixNano()
	if r.CreatedAt == 0 {
		r.CreatedAt = r.UpdatedAt
	}
	pb, err := marshal("run", r)
	if err != nil {
		return 0, 0, err
	}
	args := make([]any, 0, 10+len(a.Ledger))
	args = append(args, s.qTenantPrefix(), a.Version, pb, micros(now), micros(now.Add(a.TTL)), id, a.Limit, r.CreatedAt, a.InstanceVersion, a.InstanceID)
	for _, le := range a.Ledger {
		e := proto.Clone(le).(*messages.LedgerEntry)
		e.SharedRunId, e.Seq = id, 0
		if e.At == 0 {
			e.At = r.UpdatedAt
		}
		b, err := marshal("ledger entry", e)
		if err != nil {
			return 0, 0, err
		}
		args = append(args, b)
	}
	keys := append(s.qKeys(), s.runKey(id), s.resvKey(a.InstanceID), s.ledgerKey(id),
		s.runsIndex(), s.tenantRunsIndex(r.TenantId), s.instDeadlines(), s.instShapes(), s.liveIndex())
	res, err := s.runScript(ctx, "assign "+id+" to "+a.InstanceID, scriptAssign, keys, args...)
	if err != nil {
		return 0, 0, err
	}
	out, _ := res.([]any)
	if len(out) != 2 {
		return 0, 0, fmt.Errorf("redisstore: assign %s: unexpected reply %v", id, res)
	}
	code, _ := out[0].(int64)
	held, _ := out[1].(int64)
	switch code {
	case assignOK, assignFull, assignChanged, assignInstChanged:
		return store.AssignResult(code), int(held), nil
	}
	return 0, 0, fmt.Errorf("redisstore: assign %s: unexpected reply %v", id, res)
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// scriptListInstances drops expired registry entries and returns the live ones with their
// shapes (their registry versions). KEYS[1] deadline zset, KEYS[2] shape hash. ARGV[1] now,
// ARGV[2] instance key prefix. Returns a flat list id, shape or false, pb or false, ...
var scriptListInstances = redis.NewScript(`
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, id in ipairs(gone) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('DEL', ARGV[2] .. id)
  redis.call('HDEL', KEYS[2], id)
end
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf')
local out = {}
for _, id in ipairs(live) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id)
  out[#out + 1] = redis.call('GET', ARGV[2] .. id)
end
return out
`)

// ListInstanceVersions lists the live instances and their shapes (store.DescriptorShape, as
// PutInstance stored them) as versions in one script. See store.Assigner.
func (s *Store) ListInstanceVersions(ctx context.Context) ([]*messages.CapacityDescriptor, []int64, error) {
	res, err := s.runScript(ctx, "list instance versions", scriptListInstances, []string{s.instDeadlines(), s.instShapes()},
		s.nowMicros(), s.k("inst", ""))
	if err != nil {
		return nil, nil, err
	}
	flat, _ := res.([]any)
	type item struct {
		d   *messages.CapacityDescriptor
		ver int64
	}
	items := make([]item, 0, len(flat)/3)
	for i := 0; i+2 < len(flat); i += 3 {
		b, ok := asString(flat[i+2])
		if !ok {
			continue // deleted between the range and the read
		}
		d := &messages.CapacityDescriptor{}
		if err := unmarshal("instance", []byte(b), d); err != nil {
			return nil, nil, err
		}
		// An entry stored without a shape (by an older version) is listed with the shape it
		// would have; Assign refuses it until the instance publishes again.
		ver := store.DescriptorShape(d)
		if sh, ok := asString(flat[i+1]); ok {
			v, err := strconv.ParseInt(sh, 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("redisstore: list instance versions: shape %q: %w", sh, err)
			}
			ver = v
		}
		items = append(items, item{d, ver})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].d.RuntimeInstanceId < items[j].d.RuntimeInstanceId })
	insts, vers := make([]*messages.CapacityDescriptor, len(items)), make([]int64, len(items))
	for i, it := range items {
		insts[i], vers[i] = it.d, it.ver
	}
	return insts, vers, nil
}
