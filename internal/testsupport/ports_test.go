package testsupport

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePort_distinctAndBindable(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("listen on free port %d: %v", p, err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("close listener: %v", err)
		}
	}
}

func TestFreeAddr_loopback(t *testing.T) {
	host, port, err := net.SplitHostPort(FreeAddr(t))
	if err != nil || host != "127.0.0.1" || port == "" {
		t.Fatalf("FreeAddr() host %q port %q err %v, want 127.0.0.1:PORT", host, port, err)
	}
}
