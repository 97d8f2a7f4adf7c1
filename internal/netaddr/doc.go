// Package netaddr holds the small network-address checks shared by the serving packages, so
// that the rules (what counts as loopback) are written once.
//
// # Usage
//
//	host, _, err := net.SplitHostPort(addr)
//	if err == nil && !netaddr.IsLoopback(host) {
//		// refuse to serve without auth on a reachable address
//	}
package netaddr
