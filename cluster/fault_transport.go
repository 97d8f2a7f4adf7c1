package cluster

import (
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

var _ memberlist.NodeAwareTransport = (*FaultTransport)(nil)

// FaultTransport wraps a memberlist transport (normally *memberlist.NetTransport) and can cut
// the node off: while partitioned it drops every outgoing and incoming packet, fails outgoing
// stream dials and closes incoming streams. It is for tests; pass it as Config.Transport.
// Methods are goroutine-safe.
type FaultTransport struct {
	inner       memberlist.NodeAwareTransport
	partitioned atomic.Bool
	dropped     atomic.Int64
	closeErrs   atomic.Int64

	packets chan *memberlist.Packet
	streams chan net.Conn
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// NewFaultTransport wraps inner and starts forwarding its packets and streams. memberlist
// shuts it down (and inner) on Memberlist.Shutdown.
func NewFaultTransport(inner memberlist.NodeAwareTransport) *FaultTransport {
	t := &FaultTransport{
		inner:   inner,
		packets: make(chan *memberlist.Packet),
		streams: make(chan net.Conn),
		stop:    make(chan struct{}),
	}
	t.wg.Add(2)
	go t.pumpPackets()
	go t.pumpStreams()
	return t
}

// NewLoopbackTransport returns a memberlist NetTransport bound to 127.0.0.1 on a free port.
func NewLoopbackTransport() (*memberlist.NetTransport, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{"127.0.0.1"},
		BindPort:  0,
		Logger:    log.New(io.Discard, "", 0),
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: loopback transport: %w", err)
	}
	return nt, nil
}

// Partition cuts the node off from everyone.
func (t *FaultTransport) Partition() { t.partitioned.Store(true) }

// Heal restores connectivity.
func (t *FaultTransport) Heal() { t.partitioned.Store(false) }

// Dropped returns how many packets and streams were dropped so far.
func (t *FaultTransport) Dropped() int64 { return t.dropped.Load() }

// FinalAdvertiseAddr delegates to the inner transport.
func (t *FaultTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

// WriteTo sends a packet unless partitioned (then it is silently dropped, like UDP).
func (t *FaultTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.partitioned.Load() {
		t.dropped.Add(1)
		return time.Now(), nil
	}
	return t.inner.WriteTo(b, addr)
}

// WriteToAddress sends a packet unless partitioned.
func (t *FaultTransport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	if t.partitioned.Load() {
		t.dropped.Add(1)
		return time.Now(), nil
	}
	return t.inner.WriteToAddress(b, addr)
}

// PacketCh returns incoming packets that were not dropped.
func (t *FaultTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// DialTimeout dials unless partitioned (then ErrPartitioned).
func (t *FaultTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.partitioned.Load() {
		t.dropped.Add(1)
		return nil, fmt.Errorf("dial %s: %w", addr, ErrPartitioned)
	}
	return t.inner.DialTimeout(addr, timeout)
}

// DialAddressTimeout dials unless partitioned (then ErrPartitioned).
func (t *FaultTransport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.partitioned.Load() {
		t.dropped.Add(1)
		return nil, fmt.Errorf("dial %s: %w", addr.Addr, ErrPartitioned)
	}
	return t.inner.DialAddressTimeout(addr, timeout)
}

// StreamCh returns incoming streams that were not dropped.
func (t *FaultTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown stops forwarding and shuts the inner transport down. Idempotent.
func (t *FaultTransport) Shutdown() error {
	var err error
	t.once.Do(func() {
		err = t.inner.Shutdown()
		close(t.stop)
		t.wg.Wait()
	})
	if err != nil {
		return fmt.Errorf("cluster: shutdown transport: %w", err)
	}
	return nil
}

func (t *FaultTransport) pumpPackets() {
	defer t.wg.Done()
	in := t.inner.PacketCh()
	for {
		select {
		case <-t.stop:
			return
		case p := <-in:
			if t.partitioned.Load() {
				t.dropped.Add(1)
				continue
			}
			select {
			case t.packets <- p:
			case <-t.stop:
				return
			}
		}
	}
}

func (t *FaultTransport) pumpStreams() {
	defer t.wg.Done()
	in := t.inner.StreamCh()
	for {
		select {
		case <-t.stop:
			return
		case c := <-in:
			if t.partitioned.Load() {
				t.dropped.Add(1)
				t.closeConn(c)
				continue
			}
			select {
			case t.streams <- c:
			case <-t.stop:
				t.closeConn(c)
				return
			}
		}
	}
}

// closeConn closes a dropped incoming stream, counting close errors.
func (t *FaultTransport) closeConn(c net.Conn) {
	if err := c.Close(); err != nil {
		t.closeErrs.Add(1)
	}
}
