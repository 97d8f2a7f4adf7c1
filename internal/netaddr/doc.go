// Package netaddr holds the small network-address helpers shared across packages, so that
// each rule is written once: what counts as loopback (IsLoopback, for the serving packages)
// and which loopback port a test or a local cluster may bind (FreePort, FreeAddr, for
// internal/testsupport and internal/localcluster). It imports only the standard library.
//
// # Usage
//
//	host, _, err := net.SplitHostPort(addr)
//	if err == nil && !netaddr.IsLoopback(host) {
//		// refuse to serve without auth on a reachable address
//	}
//	bind, err := netaddr.FreeAddr() // "127.0.0.1:PORT", never handed out twice
package netaddr
