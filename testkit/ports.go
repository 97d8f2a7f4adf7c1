package testkit

import (
	"testing"

	"github.com/dairuntime/dair/internal/testsupport"
)

// FreeAddr returns "127.0.0.1:PORT" with a port free for TCP and UDP, outside the ephemeral
// range and never returned before by this process. It fails the test when none is found.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return testsupport.FreeAddr(tb)
}

// freePort returns a free loopback port as FreeAddr does, or an error.
func freePort() (int, error) { return testsupport.FindFreePort() }
