package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dairuntime/dair/internal/store"
)

// Tenant quota keys: the hash run -> "<instance>\n<tenant>" of the tenant concurrency holds
// (store.TenantQuotas), the prefix of the tenant holds zsets (reservation zsets of the pseudo
// instance store.TenantHolds(tenant)) and the rate bucket hash of a tenant.
func (s *Store) holdOf() string               { return s.k("resv", "holdof") }
func (s *Store) tenantHoldsPrefix() string    { return s.resvKey(store.TenantHoldsPrefix) }
func (s *Store) rateKey(tenant string) string { return s.k("rate", tenant) }

// scriptReserveTenant is scriptReserve that also holds a tenant concurrency slot.
// KEYS[1] instance holds, KEYS[2] tenant holds, KEYS[3] hold-of hash. ARGV[1] now,
// ARGV[2] deadline, ARGV[3] run id, ARGV[4] limit, ARGV[5] tenant limit (0: none),
// ARGV[6] "<instance>\n<tenant>". Returns 1 held, 0 instance full, 2 tenant full.
var scriptReserveTenant = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
local id, tl = ARGV[3], tonumber(ARGV[5])
if tl > 0 and not redis.call('ZSCORE', KEYS[2], id) and redis.call('ZCARD', KEYS[2]) >= tl then return 2 end
if not redis.call('ZSCORE', KEYS[1], id) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], id)
redis.call('ZADD', KEYS[2], ARGV[2], id)
redis.call('HSET', KEYS[3], id, ARGV[6])
return 1
`)

// holdLib finds the tenant hold of run id that follows instance inst's hold: hk is the
// hold-of hash, prefix the tenant holds prefix. It returns the tenant zset key or nil.
const holdLib = `
local function tenantHold(id, hk, inst, prefix)
  local h = redis.call('HGET', hk, id)
  if not h then return nil end
  local nl = string.find(h, '\n', 1, true)
  if not nl or string.sub(h, 1, nl - 1) ~= inst then return nil end
  return prefix .. string.sub(h, nl + 1)
end
`

// scriptReleaseHold drops a run's instance hold and the tenant hold that follows it.
// KEYS[1] instance holds, KEYS[2] hold-of hash. ARGV[1] run id, ARGV[2] instance, ARGV[3]
// tenant holds prefix.
var scriptReleaseHold = redis.NewScript(holdLib + `
redis.call('ZREM', KEYS[1], ARGV[1])
local th = tenantHold(ARGV[1], KEYS[2], ARGV[2], ARGV[3])
if th then
  redis.call('ZREM', th, ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
end
return 1
`)

// scriptRefresh extends live holds and the tenant holds that follow them. KEYS[1] instance
// holds, KEYS[2] hold-of hash. ARGV[1] now, ARGV[2] instance, ARGV[3] tenant holds prefix,
// ARGV[4] deadline, ARGV[5..] run ids.
var scriptRefresh = redis.NewScript(holdLib + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for i = 5, #ARGV do
  if redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[4], ARGV[i]) == 1 or redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    local th = tenantHold(ARGV[i], KEYS[2], ARGV[2], ARGV[3])
    if th then redis.call('ZADD', th, 'XX', ARGV[4], ARGV[i]) end
  end
end
return 1
`)

// scriptTakeToken takes a token from a bucket refilled at ARGV[2] per second up to ARGV[3].
// KEYS[1] bucket hash. ARGV[1] now (µs). Returns 1 taken, 0 empty.
var scriptTakeToken = redis.NewScript(`
local now, rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(b[1]) or burst, tonumber(b[2]) or now
if now < ts then now = ts end
tokens = math.min(burst, tokens + (now - ts) / 1e6 * rate)
local ok = 0
if tokens >= 1 then
  tokens = tokens - 1
  ok = 1
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', string.format('%d', now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 60000)
return ok
`)

var fairScripts = []*redis.Script{scriptReserveTenant, scriptReleaseHold, scriptRefresh, scriptTakeToken}

// ClaimTenants claims, per entry of want, up to Max oldest pending items of its tenant, in one
// script. See store.TenantQueues.
func (s *Store) ClaimTenants(ctx context.Context, pumpID string, want []store.TenantClaim, visibility time.Duration) ([]store.Claim, error) {
	total := 0
	args := s.qArgs(s.nowMicros(), s.deadline(visibility), len(want))
	for _, w := range want {
		n := max(w.Max, 0)
		total += n
		args = append(args, w.TenantID, n)
	}
	args, err := appendTokens(args, pumpID, total)
	if err != nil {
		return nil, err
	}
	res, err := s.runScript(ctx, "claim tenants for "+pumpID, scriptClaimTenants, s.qKeys(), args...)
	if err != nil {
		return nil, err
	}
	return claims(pumpID, res)
}

// Backlog returns the tenants with pending items in one script. See store.TenantQueues.
func (s *Store) Backlog(ctx context.Context, limit int) ([]store.TenantBacklog, error) {
	res, err := s.runScript(ctx, "backlog", scriptBacklog, s.qKeys(), s.qArgs(limit)...)
	if err != nil {
		return nil, err
	}
	flat, _ := res.([]any)
	out := make([]store.TenantBacklog, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		t, ok := asString(flat[i])
		n, ok2 := flat[i+1].(int64)
		if !ok || !ok2 {
			return nil, fmt.Errorf("redisstore: backlog: unexpected reply %v", res)
		}
		out = append(out, store.TenantBacklog{TenantID: t, Pending: int(n)})
	}
	sortBacklog(out)
	return out, nil
}

// QueuedCount returns the number of tenantID's queue items. See store.TenantQueues.
func (s *Store) QueuedCount(ctx context.Context, tenantID string) (int, error) {
	if err := s.check(); err != nil {
		return 0, fmt.Errorf("redisstore: queued count %s: %w", tenantID, err)
	}
	n, err := s.rdb.HGet(ctx, s.qCount(), tenantID).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("redisstore: queued count %s: %w", tenantID, err)
	}
	return max(n, 0), nil
}

// ReserveForTenant holds an instance slot and a tenant slot in one script. See
// store.TenantQuotas.
func (s *Store) ReserveForTenant(ctx context.Context, instanceID, runID string, limit int, tenantID string, tenantLimit int,
	ttl time.Duration) (bool, bool, error) {
	res, err := s.runScript(ctx, "reserve "+instanceID+"/"+runID+" for "+tenantID, scriptReserveTenant,
		[]string{s.resvKey(instanceID), s.resvKey(store.TenantHolds(tenantID)), s.holdOf()},
		s.nowMicros(), s.deadline(ttl), runID, limit, max(tenantLimit, 0), instanceID+"\n"+tenantID)
	if err != nil {
		return false, false, err
	}
	n, _ := res.(int64)
	return n == 1, n == 2, nil
}

// TakeToken takes a token of tenantID's rate bucket in one script. See store.TenantQuotas.
func (s *Store) TakeToken(ctx context.Context, tenantID string, rate float64, burst int) (bool, error) {
	if rate <= 0 {
		return true, nil
	}
	res, err := s.runScript(ctx, "take token of "+tenantID, scriptTakeToken, []string{s.rateKey(tenantID)},
		s.nowMicros(), strconv.FormatFloat(rate, 'f', -1, 64), max(burst, 1))
	if err != nil {
		return false, err
	}
	n, _ := res.(int64)
	return n == 1, nil
}

// sortBacklog orders a backlog by tenant id.
func sortBacklog(b []store.TenantBacklog) {
	slices.SortFunc(b, func(x, y store.TenantBacklog) int { return strings.Compare(x.TenantID, y.TenantID) })
}
