package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

var _ store.Assigner = (*Store)(nil)

// runVersion returns the record version of run id (store.CreatedRunVersion until its first
// update).
func runVersion(tx *bolt.Tx, id string) int64 {
	if v := tx.Bucket(bRuns).Get(versionKey(id)); len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v))
	}
	if v := tx.Bucket(bRunsVer).Get([]byte(id)); len(v) == 8 { // a file written before 2026-12
		return int64(binary.BigEndian.Uint64(v))
	}
	return store.CreatedRunVersion
}

// bumpRunVersion increments the record version of run id.
func bumpRunVersion(tx *bolt.Tx, id string) error {
	if err := tx.Bucket(bRuns).Put(versionKey(id), u64(uint64(runVersion(tx, id)+1))); err != nil {
		return fmt.Errorf("run version %s: %w", id, err)
	}
	return nil
}

// versionKey is the key of run id's record version in the runs bucket: the id and "\x00v",
// which sorts right after the run's own key (ids hold no NUL), so a write of the run and its
// version usually dirties one page, not two trees.
func versionKey(id string) []byte { return append([]byte(id), 0, 'v') }

// isVersionKey reports whether k, a key of the runs bucket, is a version key, not a run id.
func isVersionKey(k []byte) bool { return bytes.IndexByte(k, 0) >= 0 }

// ClaimRuns claims like Claim, then reads the claimed runs. See store.Assigner.
func (s *Store) ClaimRuns(ctx context.Context, pumpID string, max int, visibility time.Duration) ([]store.ClaimedRun, error) {
	claims, err := s.Claim(ctx, pumpID, max, visibility)
	if err != nil || len(claims) == 0 {
		return []store.ClaimedRun{}, err
	}
	out := make([]store.ClaimedRun, len(claims))
	err = s.view(ctx, func(tx *bolt.Tx) error {
		for i, c := range claims {
			out[i] = store.ClaimedRun{Claim: c}
			r := &messages.SharedRun{}
			ok, err := get(tx, bRuns, []byte(c.RunID), r)
			if err != nil {
				return err
			}
			if ok {
				out[i].Run, out[i].Version = r, runVersion(tx, c.RunID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("claim runs", pumpID, err)
	}
	return out, nil
}

// GetRunVersion returns the run and its record version. See store.Assigner.
func (s *Store) GetRunVersion(ctx context.Context, id string) (*messages.SharedRun, int64, error) {
	r := &messages.SharedRun{}
	var ver int64
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if err := getFound(tx, bRuns, []byte(id), r); err != nil {
			return err
		}
		ver = runVersion(tx, id)
		return nil
	})
	if err != nil {
		return nil, 0, wrap("get run", id, err)
	}
	return r, ver, nil
}

// Assign writes a dispatch decision in one transaction (grouped with concurrent writes by the
// writer goroutine). See store.Assigner.
func (s *Store) Assign(ctx context.Context, a store.Assignment) (store.AssignResult, int, error) {
	id := a.Run.GetSharedRunId()
	if id == "" || a.InstanceID == "" {
		return 0, 0, fmt.Errorf("boltstore: assign: empty run or instance id")
	}
	var (
		res  store.AssignResult
		held int
	)
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		res, held, err = s.assignTx(tx, a)
		return err
	})
	if err != nil {
		return 0, 0, wrap("assign", id, err)
	}
	return res, held, nil
}

var _ store.StartingAssigner = (*Store)(nil)

// AssignAndStart writes a dispatch decision and the start of the run's execution in one
// transaction. See store.StartingAssigner.
func (s *Store) AssignAndStart(ctx context.Context, a store.Assignment, st store.ExecutionStart) (store.AssignResult, int, store.StartResult, error) {
	id := a.Run.GetSharedRunId()
	if id == "" || a.InstanceID == "" {
		return 0, 0, store.StartResult{}, fmt.Errorf("boltstore: assign: empty run or instance id")
	}
	if err := checkStart(st); err != nil {
		return 0, 0, store.StartResult{}, err
	}
	if st.Execution.GetSharedRunId() != id || st.Execution.GetRuntimeInstanceId() != a.InstanceID {
		return 0, 0, store.StartResult{}, fmt.Errorf("boltstore: assign %s: the start names run %q on instance %q",
			id, st.Execution.GetSharedRunId(), st.Execution.GetRuntimeInstanceId())
	}
	var (
		res     store.AssignResult
		held    int
		started store.StartResult
	)
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		started = store.StartResult{}
		if res, held, err = s.assignTx(tx, a); err != nil || res != store.Assigned {
			return err
		}
		started, err = startTx(tx, s.nowNanos(), st)
		return err
	})
	if err != nil {
		return 0, 0, store.StartResult{}, wrap("assign and start", id, err)
	}
	return res, held, started, nil
}

// assignTx is Assign inside tx.
func (s *Store) assignTx(tx *bolt.Tx, a store.Assignment) (store.AssignResult, int, error) {
	id := a.Run.GetSharedRunId()
	now := s.nowNanos()
	if a.Version == store.NewRunVersion && a.Run.GetIdempotencyKey() != "" {
		return 0, 0, fmt.Errorf("boltstore: assign %s: a run with an idempotency key is created by CreateRun", id)
	}
	if id == "" || strings.Contains(id, sep) {
		return 0, 0, fmt.Errorf("boltstore: assign: empty run id or id with NUL %q", id)
	}
	cur := &messages.SharedRun{}
	ok, err := get(tx, bRuns, []byte(id), cur)
	if err != nil {
		return 0, 0, err
	}
	if a.InstanceVersion != 0 {
		d, err := decodeInstance(tx.Bucket(bInstances).Get([]byte(a.InstanceID)), now)
		if err != nil || d == nil || store.DescriptorShape(d) != a.InstanceVersion {
			_, live, err := holdSlot(tx, now, a.InstanceID, "", 0, 0)
			return store.InstanceChanged, live, err
		}
	}
	create := a.Version == store.NewRunVersion
	if ok == create || (!create && runVersion(tx, id) != a.Version) {
		_, live, err := holdSlot(tx, now, a.InstanceID, "", 0, 0)
		return store.RunChanged, live, err
	}
	held, live, err := holdSlot(tx, now, a.InstanceID, id, a.Limit, a.TTL)
	if err != nil || !held {
		return store.InstanceFull, live, err
	}
	r := proto.Clone(a.Run).(*messages.SharedRun)
	r.UpdatedAt = now
	if r.CreatedAt == 0 {
		r.CreatedAt = now
	}
	if err := writeAssignedRun(tx, cur, r, create); err != nil {
		return 0, 0, err
	}
	if err := dropQueueItem(tx, id); err != nil {
		return 0, 0, err
	}
	for _, le := range a.Ledger {
		e := proto.Clone(le).(*messages.LedgerEntry)
		e.SharedRunId, e.Seq = id, 0
		if err := appendEntry(tx, now, e); err != nil {
			return 0, 0, err
		}
	}
	return store.Assigned, live, nil
}

// writeAssignedRun stores r over cur (or as a new run, version CreatedRunVersion, with create),
// keeping the creation index and the record version.
func writeAssignedRun(tx *bolt.Tx, cur, r *messages.SharedRun, create bool) error {
	id := r.SharedRunId
	idx := tx.Bucket(bRunsCreated)
	if oldIdx, newIdx := createdKey(cur), createdKey(r); create || !bytes.Equal(oldIdx, newIdx) {
		if !create {
			if err := idx.Delete(oldIdx); err != nil {
				return fmt.Errorf("reindex run %s: %w", id, err)
			}
		}
		if err := idx.Put(newIdx, nil); err != nil {
			return fmt.Errorf("index run %s: %w", id, err)
		}
	}
	if err := put(tx, bRuns, []byte(id), r); err != nil {
		return err
	}
	var oldIdx []byte
	if !create {
		oldIdx = createdKey(cur)
	}
	if err := indexLive(tx, oldIdx, r); err != nil {
		return err
	}
	if create {
		return nil
	}
	return bumpRunVersion(tx, id)
}

// dropQueueItem removes runID's queue entry, pending or claimed by any pump, with its
// tenant's index entry and count.
func dropQueueItem(tx *bolt.Tx, runID string) error {
	q, ok, err := loadQueueItem(tx, runID)
	if err != nil || !ok {
		return err
	}
	if err := unindex(tx, q); err != nil {
		return err
	}
	if err := tx.Bucket(bQueueItems).Delete([]byte(runID)); err != nil {
		return fmt.Errorf("drop queue item %s: %w", runID, err)
	}
	return unfileTenant(tx, runID)
}

// ListInstanceVersions lists the live instances with their shapes (store.DescriptorShape) as
// versions. See store.Assigner.
func (s *Store) ListInstanceVersions(ctx context.Context) ([]*messages.CapacityDescriptor, []int64, error) {
	insts, vers := []*messages.CapacityDescriptor{}, []int64{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		now := s.nowNanos()
		return tx.Bucket(bInstances).ForEach(func(k, v []byte) error {
			d, err := decodeInstance(v, now)
			if err != nil {
				return fmt.Errorf("instance %s: %w", k, err)
			}
			if d != nil {
				insts, vers = append(insts, d), append(vers, store.DescriptorShape(d))
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, wrap("list instance versions", "", err)
	}
	return insts, vers, nil
}
