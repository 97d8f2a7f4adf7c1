package chaos

import (
	"encoding/binary"
	"net"
	"os"
	"testing"
)

func TestSocketOwner_findsTheDialingProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ln.Close(); err != nil {
			t.Error(err)
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Close(); err != nil {
			t.Error(err)
		}
	}()
	client := conn.LocalAddr().(*net.TCPAddr)
	server := ln.Addr().(*net.TCPAddr)
	if got := socketOwner(client, server, []int{os.Getpid() + 1_000_000, os.Getpid()}); got != os.Getpid() {
		t.Fatalf("socketOwner = %d, want this process %d", got, os.Getpid())
	}
	if got := socketOwner(client, server, nil); got != 0 {
		t.Fatalf("socketOwner without candidates = %d, want 0", got)
	}
}

func TestProcAddr(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the expected form is a little-endian host's")
	}
	a := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	if got := procAddr(a); got != "0100007F:1F90" {
		t.Fatalf("procAddr = %q, want 0100007F:1F90 (little-endian host)", got)
	}
	if got := procAddr(&net.TCPAddr{IP: net.ParseIP("::1"), Port: 1}); got != "" {
		t.Fatalf("procAddr(::1) = %q, want \"\"", got)
	}
}
