// Package testsupport holds the test helpers that packages at every level share: polling with
// a deadline instead of sleeping (Eventually, EventuallyErr, WaitFor) and free loopback ports
// (FreePort, FreeAddr, over internal/netaddr's allocator, which internal/localcluster shares).
// It imports only the standard library and internal/netaddr, so low-level packages (cluster,
// internal/store/...) can use it in their own tests without an import cycle; package testkit,
// which imports the runtime, re-exports these helpers for everyone else.
//
// # Usage
//
//	func TestX(t *testing.T) {
//		addr := testsupport.FreeAddr(t)
//		// ... start something on addr
//		testsupport.Eventually(t, 5*time.Second, 10*time.Millisecond, up, "server on %s", addr)
//	}
package testsupport
