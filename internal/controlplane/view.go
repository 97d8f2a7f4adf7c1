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

	mu        sync.Mutex // guards insts, versions, reserved, at and reloading
	insts     []*messages.CapacityDescriptor
	versions  map[string]int64
	reserved  map[string]int
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
	if at.After(v.at) {
		v.insts, v.versions, v.reserved, v.at = insts, out.versions, maps.Clone(out.reserved), at
	}
	return out, nil
}

// held records the live hold count of instanceID a reservation answered.
func (v *instanceView) held(instanceID string, n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reserved != nil {
		v.reserved[instanceID] = n
	}
}
