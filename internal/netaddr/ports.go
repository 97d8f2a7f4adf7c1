package netaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports handed to child processes are chosen below the kernel's ephemeral range: a port the
// kernel hands out for "127.0.0.1:0" is also what it gives the next outgoing connection of any
// process, so it can be taken between the probe and the child's bind. Ports below the range
// are only ever taken by an explicit bind.
const (
	lowestPort           = 10000
	defaultEphemeralLow  = 32768
	ephemeralRangeConfig = "/proc/sys/net/ipv4/ip_local_port_range"
)

var (
	portsMu   sync.Mutex // guards portsUsed
	portsUsed = map[int]bool{}
)

// FreeAddr returns "127.0.0.1:PORT" with a port of FreePort. It is safe for concurrent use.
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// FreePort returns a loopback port free for TCP and UDP (memberlist uses both on one port),
// never returned before by this process: a random one in [10000, start of the ephemeral
// range), or one the kernel picks when that range is too small. It is safe for concurrent use.
func FreePort() (int, error) {
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
	return 0, fmt.Errorf("netaddr: no free loopback port below %d", hi)
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
	u, uerr := net.ListenPacket("udp", addr)
	ok := uerr == nil
	if ok && u.Close() != nil {
		ok = false
	}
	if l.Close() != nil {
		ok = false
	}
	return ok
}

// kernelPort asks the kernel for a free loopback TCP port (the fallback when the ephemeral
// range leaves no room below it).
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("netaddr: find free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("netaddr: find free port: %w", err)
	}
	return port, nil
}
