package client_test

import (
	"errors"
	"testing"

	"github.com/dairuntime/dair/client"
)

func TestNormalizeBaseURL(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{in: "http://127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{in: "https://dair.example/", want: "https://dair.example"},
		{in: "http://h:1/prefix/", want: "http://h:1/prefix"},
		{in: "127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{in: "localhost", want: "http://localhost"},
		{in: "[::1]:8080", want: "http://[::1]:8080"},
		{in: " localhost:9 ", want: "http://localhost:9"},
		{in: "", bad: true},
		{in: "ftp://h", bad: true},
		{in: "http://", bad: true},
		{in: "h:1/x", bad: true},
		{in: "http://h:1?q=1", bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := client.NormalizeBaseURL(tc.in)
			if tc.bad {
				if !errors.Is(err, client.ErrBadBaseURL) {
					t.Fatalf("NormalizeBaseURL(%q) = %q, %v; want ErrBadBaseURL", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("NormalizeBaseURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}
