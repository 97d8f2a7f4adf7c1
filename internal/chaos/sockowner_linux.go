package chaos

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// socketOwner returns the pid, among candidates, of the process holding the loopback TCP
// socket whose local address is local and peer address is peer (the client end of a
// connection the counting server accepted), or 0 when it cannot tell. It reads /proc: the
// socket's inode from /proc/net/tcp, then each candidate's /proc/PID/fd links.
func socketOwner(local, peer *net.TCPAddr, candidates []int) int {
	inode := tcpInode(local, peer)
	if inode == "" {
		return 0
	}
	target := "socket:[" + inode + "]"
	for _, pid := range candidates {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // the process is gone or not ours to read: not the owner we can name
		}
		for _, fd := range fds {
			if link, err := os.Readlink(dir + "/" + fd.Name()); err == nil && link == target {
				return pid
			}
		}
	}
	return 0
}

// tcpInode finds the inode of the IPv4 socket local→peer in /proc/net/tcp ("" if absent).
func tcpInode(local, peer *net.TCPAddr) string {
	want := procAddr(local) + " " + procAddr(peer)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 10 && fields[1]+" "+fields[2] == want {
			return fields[9]
		}
	}
	return ""
}

// procAddr renders an IPv4 address as /proc/net/tcp does: the 32-bit address in host byte
// order and the port, both in hex.
func procAddr(a *net.TCPAddr) string {
	ip4 := a.IP.To4()
	if ip4 == nil {
		return ""
	}
	return fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(ip4), a.Port)
}
