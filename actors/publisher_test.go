package actors

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/metrics"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/testsupport"
	"github.com/dairuntime/dair/internal/workgroup"
	"github.com/dairuntime/dair/messages"
)

// A heartbeat's hold extension is written even when a publication without holds (a
// dispatch's, a finished run's) replaced its descriptor before the publisher's write.
func TestPublisher_heartbeatExtensionSurvivesALaterPublication(t *testing.T) {
	ctx := context.Background()
	var offset atomic.Int64 // the store's clock: now + offset
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if ok, err := st.Reserve(ctx, "i1", "r1", 4, time.Minute); err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	p := newPublisher(st, zap.NewNop(), metrics.New(), time.Hour, time.Hour, "")
	d := &messages.CapacityDescriptor{RuntimeInstanceId: "i1", Status: messages.InstanceReady, MaxConcurrentRuns: 4}
	p.put(d, []string{"r1"}) // a heartbeat's
	p.put(d, nil)            // a dispatch's, before the publisher wrote the heartbeat's
	g := workgroup.New()
	p.start(g)
	testsupport.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		_, err := st.GetInstance(ctx, "i1")
		return err == nil
	}, "the descriptor was written")
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(2 * time.Minute)) // past the hold's first deadline, within the extension
	n, err := st.ReservationCount(ctx, "i1")
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatal("the heartbeat's hold extension was dropped by the later publication")
	}
}

// stuckHolds is a store whose hold refreshes wait until released.
type stuckHolds struct {
	*boltstore.Store
	release chan struct{}
}

func (s stuckHolds) RefreshReservations(ctx context.Context, instanceID string, runIDs []string, ttl time.Duration) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.RefreshReservations(ctx, instanceID, runIDs, ttl)
}

// A heartbeat's descriptor does not wait for hold extensions in flight: under load a round of
// holds takes seconds, and a descriptor behind it reads as a stale heartbeat (a healthy
// instance replaced). The extension is still written once the store answers.
func TestPublisher_descriptorsDoNotWaitForHolds(t *testing.T) {
	ctx := context.Background()
	bs, err := boltstore.Open(boltstore.Options{Path: filepath.Join(t.TempDir(), "dair.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bs.Close() }()
	st := stuckHolds{Store: bs, release: make(chan struct{})}
	if ok, err := bs.Reserve(ctx, "i1", "r1", 4, time.Minute); err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	until0, err := bs.ReservationExpiries(ctx, "i1", []string{"r1"})
	if err != nil {
		t.Fatal(err)
	}
	p := newPublisher(st, zap.NewNop(), metrics.New(), time.Hour, time.Hour, "")
	g := workgroup.New()
	p.start(g)
	defer func() { _ = g.Stop(ctx) }()
	p.put(&messages.CapacityDescriptor{RuntimeInstanceId: "i1", Status: messages.InstanceReady, MaxConcurrentRuns: 4}, []string{"r1"})
	testsupport.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		_, err := st.GetInstance(ctx, "i1")
		return err == nil
	}, "the first descriptor was written")
	p.put(&messages.CapacityDescriptor{RuntimeInstanceId: "i2", Status: messages.InstanceReady, MaxConcurrentRuns: 4, LastHeartbeatAt: 42}, []string{})
	testsupport.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		d, err := st.GetInstance(ctx, "i2")
		return err == nil && d.LastHeartbeatAt == 42
	}, "a heartbeat waited for another instance's holds")
	close(st.release)
	testsupport.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		until, err := bs.ReservationExpiries(ctx, "i1", []string{"r1"})
		return err == nil && until[0].After(until0[0])
	}, "the hold extension was not written once the store answered")
}
