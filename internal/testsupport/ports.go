package testsupport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Ports handed to child processes are chosen below the kernel's ephemeral range. A port that
// the kernel gives out for "127.0.0.1:0" is also what it hands to the next outgoing connection
// of any process (a Redis client, a memberlist probe), so such a port can be taken between the
// moment we find it free and the moment the child binds it. Ports below the range are only
// ever taken by an explicit bind.
const (
	lowestPort           = 10000
	defaultEphemeralLow  = 32768
	ephemeralRangeConfig = "/proc/sys/net/ipv4/ip_local_port_range"
)

var (
	portsMu   sync.Mutex // guards portsUsed
	portsUsed = map[int]bool{}
)

// FreeAddr returns "127.0.0.1:PORT" with a port of FreePort. It fails the test when none is
// found.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(tb)))
}

// FreePort returns a port of FindFreePort and fails the test when none is found.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := FindFreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// FindFreePort returns a loopback port free for TCP and UDP (memberlist uses both on one
// port), never returned before by this process: a random one in [10000, start of the
// ephemeral range), or one the kernel picks when that range is too small. It is safe for
// concurrent use.
func FindFreePort() (int, error) {
	hi := ephemeralLow()
	if hi-lowestPort < 1000 {
		return kernelPort()
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 500 {
		p := lowestPort + rand.IntN(hi-lowestPort)
		if portsUsed[p] || !bindable(p) {
			continue
		}
		portsUsed[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("testsupport: no free loopback port below %d", hi)
}

// ephemeralLow returns the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile(ephemeralRangeConfig)
	if err != nil {
		return defaultEphemeralLow
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return defaultEphemeralLow
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n <= lowestPort {
		return defaultEphemeralLow
	}
	return n
}

// bindable reports whether port p can be bound on 127.0.0.1 for TCP and for UDP right now.
func bindable(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// kernelPort asks the kernel for a free loopback TCP port (the fallback when the ephemeral
// range leaves no room below it).
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testsupport: find free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("testsupport: find free port: %w", err)
	}
	return port, nil
}
