package netaddr_test

import (
	"fmt"
	"testing"

	"github.com/dairuntime/dair/internal/netaddr"
)

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"", false},
		{"0.0.0.0", false},
		{"::", false},
		{"10.0.0.1", false},
		{"192.168.1.10", false},
		{"2001:db8::1", false},
		{"[::1]", false},
		{"example.com", false},
		{"localhost.localdomain", false},
		{"LOCALHOST", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.host), func(t *testing.T) {
			if got := netaddr.IsLoopback(tt.host); got != tt.want {
				t.Errorf("IsLoopback(%q) = %v, want %v", tt.host, got, tt.want)
			}
		})
	}
}

func ExampleIsLoopback() {
	fmt.Println(netaddr.IsLoopback("127.0.0.1"), netaddr.IsLoopback("0.0.0.0"))
	// Output: true false
}
