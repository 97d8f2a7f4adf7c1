package api

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
)

// Store probe timings.
const (
	// probeEvery is how long a probe result is reused: /readyz costs the store at most one
	// read per interval, however often it is polled.
	probeEvery = time.Second
	// probeTimeout bounds one probe.
	probeTimeout = time.Second
	// probeRunID is the run id the probe reads; it never exists.
	probeRunID = "readyz-store-probe"
)

// storeProbe caches whether the node's store answers: one cheap read (a run that does not
// exist) at most every probeEvery, one probe at a time; concurrent callers get the cached
// result. A request that meets an unavailable store marks it down at once. It is
// goroutine-safe.
type storeProbe struct {
	st  store.Store
	now func() time.Time

	mu      sync.Mutex // guards at, ok and running
	at      time.Time  // when ok was determined; zero: never
	ok      bool
	running bool
}

func newStoreProbe(st store.Store) *storeProbe { return &storeProbe{st: st, now: time.Now} }

// healthy reports whether the store answered its last probe, probing first when the result
// is older than probeEvery and no probe is running. It blocks for at most probeTimeout.
func (p *storeProbe) healthy(ctx context.Context) bool {
	p.mu.Lock()
	if p.running || (!p.at.IsZero() && p.now().Sub(p.at) < probeEvery) {
		ok := p.ok
		p.mu.Unlock()
		return ok
	}
	p.running = true
	p.mu.Unlock()

	ok := p.ping(ctx)

	p.mu.Lock()
	p.at, p.ok, p.running = p.now(), ok, false
	p.mu.Unlock()
	return ok
}

// ping reads a run that does not exist: an answer (found or not) means the store is up; an
// unavailable-store error or the probe's timeout means it is not.
func (p *storeProbe) ping(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := p.st.GetRun(ctx, probeRunID)
	return err == nil || (!StoreUnavailable(err) && ctx.Err() == nil)
}

// markDown records that a request just found the store unavailable.
func (p *storeProbe) markDown() {
	p.mu.Lock()
	p.at, p.ok = p.now(), false
	p.mu.Unlock()
}

// readyz handles GET /readyz: 503 not_ready while the node starts or stops, 503
// store_unavailable (with Retry-After) while the store does not answer, else 200.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Ready() {
		s.writeError(w, http.StatusServiceUnavailable, "not_ready", "api: node is not ready")
		return
	}
	if !s.probe.healthy(r.Context()) {
		s.storeUnavailable(w)
		return
	}
	s.writeJSON(w, http.StatusOK, httpapi.Health{Status: "ready"})
}
