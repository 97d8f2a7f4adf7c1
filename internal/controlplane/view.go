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
	ListInstances(ctx context.Context) ([]*messages.CapacityDescriptor, error)
	ReservationCount(ctx context.Context, instanceID string) (int, error)
}

// instanceView is the dispatcher's cached registry and reservation counts, read at most once
// per ttl (its staleness bound) and corrected by the live hold count every reservation
// answers. Decisions taken on it are safe because the store re-checks capacity atomically
// when it reserves: a stale view costs a retry, never an over-commit. Goroutine-safe.
type instanceView struct {
	st  viewStore
	ttl time.Duration
	now func() time.Time

	mu        sync.Mutex // guards insts, reserved, at and reloading
	insts     []*messages.CapacityDescriptor
	reserved  map[string]int
	at        time.Time
	reloading bool // a caller is reading the view from the store
}

func newInstanceView(st viewStore, ttl time.Duration, now func() time.Time) *instanceView {
	return &instanceView{st: st, ttl: ttl, now: now}
}

// get returns the registry and a copy of the reservation counts (the caller owns both; the
// descriptors are shared and must not be modified). fresh forces a read from the store.
func (v *instanceView) get(ctx context.Context, fresh bool) ([]*messages.CapacityDescriptor, map[string]int, error) {
	v.mu.Lock()
	// While one caller reloads an expired view, the others keep deciding on the old one (one
	// reload at a time, not one per concurrent dispatch).
	if !fresh && v.reserved != nil && (v.now().Sub(v.at) < v.ttl || v.reloading) {
		insts, reserved := v.insts, maps.Clone(v.reserved)
		v.mu.Unlock()
		return insts, reserved, nil
	}
	v.reloading = true
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.reloading = false
		v.mu.Unlock()
	}()
	at := v.now()
	insts, err := v.st.ListInstances(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list instances: %w", err)
	}
	reserved := make(map[string]int, len(insts))
	for _, x := range insts {
		n, err := v.st.ReservationCount(ctx, x.RuntimeInstanceId)
		if err != nil {
			return nil, nil, fmt.Errorf("count reservations: %w", err)
		}
		reserved[x.RuntimeInstanceId] = n
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if at.After(v.at) {
		v.insts, v.reserved, v.at = insts, reserved, at
	}
	return insts, maps.Clone(reserved), nil
}

// held records the live hold count of instanceID a reservation answered.
func (v *instanceView) held(instanceID string, n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reserved != nil {
		v.reserved[instanceID] = n
	}
}
