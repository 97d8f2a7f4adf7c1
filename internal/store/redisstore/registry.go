package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// Registry keys: one value per instance, a zset of heartbeat deadlines and a hash of shapes
// (store.DescriptorShape, the version Assign checks).
func (s *Store) instKey(id string) string { return s.k("inst", id) }
func (s *Store) instDeadlines() string    { return s.k("insts") }
func (s *Store) instShapes() string       { return s.k("instshape") }
func (s *Store) resvKey(id string) string { return s.k("resv", id) }

// PutInstance upserts d and sets its heartbeat deadline to now+ttl, atomically.
func (s *Store) PutInstance(ctx context.Context, d *messages.CapacityDescriptor, ttl time.Duration) error {
	id := d.GetRuntimeInstanceId()
	if id == "" {
		return fmt.Errorf("redisstore: put instance: empty runtime_instance_id")
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("redisstore: put instance %s: %w", id, err)
	}
	pb, err := marshal("instance", d)
	if err != nil {
		return err
	}
	res, err := s.runScript(ctx, "put instance "+id, scriptPutInstance,
		[]string{s.instKey(id), s.instDeadlines(), s.leaseKey(store.TombstoneLease(d.GetNodeId())), s.instShapes()},
		pb, s.deadline(ttl), id, s.nowMicros(), store.TombstoneHolderPrefix, store.DescriptorShape(d))
	if err != nil {
		return err
	}
	if n, _ := res.(int64); n == 0 {
		return fmt.Errorf("redisstore: put instance %s of member %s: %w", id, d.GetNodeId(), store.ErrMemberDead)
	}
	return nil
}

// GetInstance returns a live descriptor or store.ErrNotFound (also when expired).
func (s *Store) GetInstance(ctx context.Context, id string) (*messages.CapacityDescriptor, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: get instance %s: %w", id, err)
	}
	pipe := s.rdb.Pipeline()
	dl := pipe.ZScore(ctx, s.instDeadlines(), id)
	val := pipe.Get(ctx, s.instKey(id))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: get instance %s: %w", id, err)
	}
	score, err := dl.Result()
	if errors.Is(err, redis.Nil) || (err == nil && int64(score) <= s.nowMicros()) {
		return nil, fmt.Errorf("redisstore: get instance %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get instance %s: %w", id, err)
	}
	pb, err := val.Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: get instance %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get instance %s: %w", id, err)
	}
	d := &messages.CapacityDescriptor{}
	if err := unmarshal("instance", pb, d); err != nil {
		return nil, err
	}
	return d, nil
}

// ListInstances deletes expired descriptors and returns the live ones ordered by id.
func (s *Store) ListInstances(ctx context.Context) ([]*messages.CapacityDescriptor, error) {
	now := s.nowMicros()
	if _, err := s.runScript(ctx, "list instances", scriptGCInstances,
		[]string{s.instDeadlines(), s.instShapes()}, now, s.k("inst", "")); err != nil {
		return nil, err
	}
	ids, err := s.rdb.ZRangeByScore(ctx, s.instDeadlines(), &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(now, 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list instances: %w", err)
	}
	sort.Strings(ids)
	out := make([]*messages.CapacityDescriptor, 0, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.instKey(id)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: list instances: %w", err)
	}
	for _, v := range vals {
		b, ok := asString(v)
		if !ok {
			continue
		}
		d := &messages.CapacityDescriptor{}
		if err := unmarshal("instance", []byte(b), d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// DeleteInstance removes a descriptor; a missing id is not an error.
func (s *Store) DeleteInstance(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("redisstore: delete instance %s: %w", id, err)
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.instKey(id))
		p.ZRem(ctx, s.instDeadlines(), id)
		p.HDel(ctx, s.instShapes(), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: delete instance %s: %w", id, err)
	}
	return nil
}

// Reserve holds a slot of instanceID for runID in one script. See store.Reservations.
func (s *Store) Reserve(ctx context.Context, instanceID, runID string, limit int, ttl time.Duration) (bool, error) {
	res, err := s.runScript(ctx, "reserve "+instanceID+"/"+runID, scriptReserve,
		[]string{s.resvKey(instanceID)}, s.nowMicros(), s.deadline(ttl), runID, limit)
	if err != nil {
		return false, err
	}
	n, _ := res.(int64)
	return n == 1, nil
}

// RefreshReservations extends the live holds of runIDs; expired or missing holds stay gone.
func (s *Store) RefreshReservations(ctx context.Context, instanceID string, runIDs []string, ttl time.Duration) error {
	if len(runIDs) == 0 {
		return nil
	}
	args := make([]any, 0, 4+len(runIDs))
	args = append(args, s.nowMicros(), instanceID, s.tenantHoldsPrefix(), s.deadline(ttl))
	for _, id := range runIDs {
		args = append(args, id)
	}
	_, err := s.runScript(ctx, "refresh reservations "+instanceID, scriptRefresh,
		[]string{s.resvKey(instanceID), s.holdOf()}, args...)
	return err
}

// ReleaseReservation drops a hold, and the tenant hold that follows it (see
// ReserveForTenant); a missing hold is not an error.
func (s *Store) ReleaseReservation(ctx context.Context, instanceID, runID string) error {
	_, err := s.runScript(ctx, "release reservation "+instanceID+"/"+runID, scriptReleaseHold,
		[]string{s.resvKey(instanceID), s.holdOf()}, runID, instanceID, s.tenantHoldsPrefix())
	return err
}

// ReservationExpiries returns when each of runIDs' live hold on instanceID lapses (zero: none),
// with one ZMSCORE.
func (s *Store) ReservationExpiries(ctx context.Context, instanceID string, runIDs []string) ([]time.Time, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: reservations of %s: %w", instanceID, err)
	}
	out := make([]time.Time, len(runIDs))
	if len(runIDs) == 0 {
		return out, nil
	}
	scores, err := s.rdb.ZMScore(ctx, s.resvKey(instanceID), runIDs...).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: reservations of %s: %w", instanceID, err)
	}
	now := s.nowMicros()
	for i, until := range scores {
		if int64(until) > now { // a missing member reads 0
			out[i] = time.UnixMicro(int64(until))
		}
	}
	return out, nil
}

// ReservationCount returns the number of live holds on instanceID.
func (s *Store) ReservationCount(ctx context.Context, instanceID string) (int, error) {
	if err := s.check(); err != nil {
		return 0, fmt.Errorf("redisstore: reservation count %s: %w", instanceID, err)
	}
	n, err := s.rdb.ZCount(ctx, s.resvKey(instanceID), "("+strconv.FormatInt(s.nowMicros(), 10), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("redisstore: reservation count %s: %w", instanceID, err)
	}
	return int(n), nil
}
