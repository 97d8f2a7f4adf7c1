package netaddr

import "net"

// IsLoopback reports whether host, the host part of a listen address (as returned by
// net.SplitHostPort, without brackets), names only the loopback interface: "localhost" or a
// loopback IP (127.0.0.0/8, ::1). An empty host (all interfaces), any other name and any other
// IP are not loopback. It is a pure function and safe for concurrent use.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
