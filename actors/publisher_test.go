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
