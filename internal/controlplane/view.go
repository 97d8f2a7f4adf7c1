package controlplane

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/dairuntime/dair/messages"
)

// viewStore is what the instance view reads.
type viewStore interface {
	ListInstanceVersions(ctx context.Context) ([]*messages.CapacityDescriptor, []int64, error)
	ReservationCount(ctx context.Context, instanceID string) (int, error)
}

// viewData is one read of the view: the registry, each descriptor's registry version and the
// live reservation counts. The caller owns the maps; the descriptors are shared and must not
// be modified.
type viewData struct {
	insts    []*messages.CapacityDescriptor
	versions map[string]int64
	reserved map[string]int
}

// instanceView is the dispatcher's cached registry and reservation counts, read at most once
// per ttl (its staleness bound) and corrected by the live hold count every reservation
// answers. Decisions taken on it are safe because the store re-checks capacity atomically
// when it reserves: a stale view costs a retry, never an over-commit. Goroutine-safe.
type instanceView struct {
	st  viewStore
	ttl time.Duration
	now func() time.Time

	mu        sync.Mutex // guards insts, versions, reserved, landed, at and reloading
	insts     []*messages.CapacityDescriptor
	versions  map[string]int64
	reserved  map[string]int
	landed    map[string]int64 // holds this dispatcher's assignments added, per instance (ever)
	at        time.Time
	reloading bool // a caller is reading the view from the store
}

func newInstanceView(st viewStore, ttl time.Duration, now func() time.Time) *instanceView {
	return &instanceView{st: st, ttl: ttl, now: now}
}

// get returns the view (see viewData). fresh forces a read from the store.
func (v *instanceView) get(ctx context.Context, fresh bool) (viewData, error) {
	v.mu.Lock()
	// While one caller reloads an expired view, the others keep deciding on the old one (one
	// reload at a time, not one per concurrent dispatch).
	if !fresh && v.reserved != nil && (v.now().Sub(v.at) < v.ttl || v.reloading) {
		out := viewData{insts: v.insts, versions: v.versions, reserved: maps.Clone(v.reserved)}
		v.mu.Unlock()
		return out, nil
	}
	v.reloading = true
	landed := maps.Clone(v.landed) // the assignments that land during the read are added to it
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.reloading = false
		v.mu.Unlock()
	}()
	at := v.now()
	insts, vers, err := v.st.ListInstanceVersions(ctx)
	if err != nil {
		return viewData{}, fmt.Errorf("list instances: %w", err)
	}
	out := viewData{insts: insts, versions: make(map[string]int64, len(insts)), reserved: make(map[string]int, len(insts))}
	for i, x := range insts {
		n, err := v.st.ReservationCount(ctx, x.RuntimeInstanceId)
		if err != nil {
			return viewData{}, fmt.Errorf("count reservations: %w", err)
		}
		out.reserved[x.RuntimeInstanceId], out.versions[x.RuntimeInstanceId] = n, vers[i]
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range out.reserved {
		// Holds that this dispatcher's assignments added while the read ran may be missing
		// from it: count them (one that the read saw is counted twice, which only costs a
		// fresh read later; one missed would be a slot chosen that is gone).
		out.reserved[id] += int(v.landed[id] - landed[id])
	}
	if at.After(v.at) {
		v.insts, v.versions, v.reserved, v.at = insts, out.versions, maps.Clone(out.reserved), at
	}
	return out, nil
}

// assigned records that an assignment added a hold on instanceID. The view counts it on top of
// what it read rather than taking the hold count the assignment answered: concurrent
// assignments answer in any order, and the count of an earlier one would undo a later one.
func (v *instanceView) assigned(instanceID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.landed == nil {
		v.landed = map[string]int64{}
	}
	v.landed[instanceID]++
	if v.reserved != nil {
		v.reserved[instanceID]++
	}
}

// full records that an assignment found instanceID with n holds, at its limit: the view counts
// at least that many until its next read.
func (v *instanceView) full(instanceID string, n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reserved != nil {
		v.reserved[instanceID] = max(v.reserved[instanceID], n)
	}
}
