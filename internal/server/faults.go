package server

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/hashicorp/memberlist"

	"github.com/dairuntime/dair/cluster"
)

// faults is the test-only fault-injection facility of a cluster node (Options.FaultInjection):
// the membership transport of the current incarnation is a cluster.FaultTransport, and
// POST /debug/partition and POST /debug/heal (loopback callers only) cut it off and restore it.
// A partition outlives a restart under a new member id: the node stays cut off until healed.
type faults struct {
	mu          sync.Mutex              // guards cur and partitioned
	cur         *cluster.FaultTransport // transport of the current incarnation; nil before the first
	partitioned bool                    // set by /debug/partition, cleared by /debug/heal
}

// newTransport binds a memberlist network transport on bindAddr, wraps it in a FaultTransport
// and makes it the current one. memberlist shuts it down with the membership.
func (f *faults) newTransport(bindAddr string) (*cluster.FaultTransport, error) {
	if bindAddr == "" {
		bindAddr = "127.0.0.1:0"
	}
	host, portStr, err := net.SplitHostPort(bindAddr)
	if err != nil {
		return nil, fmt.Errorf("server: fault transport bind address %q: %w", bindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("server: fault transport bind port %q: %w", portStr, err)
	}
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{host}, BindPort: port, Logger: log.New(io.Discard, "", 0),
	})
	if err != nil {
		return nil, fmt.Errorf("server: fault transport: %w", err)
	}
	ft := cluster.NewFaultTransport(nt)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.partitioned {
		ft.Partition()
	}
	f.cur = ft
	return ft, nil
}

// wrap serves POST /debug/partition and POST /debug/heal to loopback callers and passes every
// other request to next.
func (f *faults) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cut bool
		switch r.URL.Path {
		case "/debug/partition":
			cut = true
		case "/debug/heal":
		default:
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case r.Method != http.MethodPost:
			http.Error(w, "server: method not allowed", http.StatusMethodNotAllowed)
			return
		case !loopbackCaller(r.RemoteAddr):
			http.Error(w, "server: debug endpoints answer loopback callers only", http.StatusForbidden)
			return
		}
		f.set(cut)
		w.WriteHeader(http.StatusNoContent)
	})
}

// set partitions (cut) or heals the current transport and every later one.
func (f *faults) set(cut bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partitioned = cut
	if f.cur == nil {
		return
	}
	if cut {
		f.cur.Partition()
	} else {
		f.cur.Heal()
	}
}

// loopbackCaller reports whether a request's remote address is a loopback address.
func loopbackCaller(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
