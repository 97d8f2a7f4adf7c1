package testsupport

import (
	"net"
	"strconv"
	"testing"

	"github.com/dairuntime/dair/internal/netaddr"
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
// ephemeral range), or one the kernel picks when that range is too small (netaddr.FreePort).
// It is safe for concurrent use.
func FindFreePort() (int, error) { return netaddr.FreePort() }
