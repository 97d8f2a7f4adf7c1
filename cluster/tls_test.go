package cluster_test

import (
	"crypto/tls"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/testkit"
)

func TestLoadTLS_cases(t *testing.T) {
	ca := testkit.NewTestCA(t, "ca")
	nc := ca.Issue(t, "n1")
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name              string
		cert, key, caFile string
		wantErr           bool
	}{
		{"valid", nc.CertFile, nc.KeyFile, nc.CAFile, false},
		{"no ca", nc.CertFile, nc.KeyFile, "", true},
		{"missing ca file", nc.CertFile, nc.KeyFile, missing, true},
		{"ca file without certificates", nc.CertFile, nc.KeyFile, nc.KeyFile, true},
		{"key does not match", nc.CertFile, ca.Issue(t, "n2").KeyFile, nc.CAFile, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := cluster.LoadTLS(tt.cert, tt.key, tt.caFile)
			if tt.wantErr {
				if !errors.Is(err, cluster.ErrInvalidConfig) {
					t.Fatalf("LoadTLS err = %v, want ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.MinVersion != tls.VersionTLS13 || len(cfg.Certificates) != 1 {
				t.Fatalf("config = %+v", cfg)
			}
		})
	}
}

func TestMember_YieldsTo_cases(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	self := cluster.Member{ID: "m2", NodeID: "n1", Session: "b", Started: t0.Add(time.Second), MemberlistAddr: "127.0.0.1:7946"}
	tests := []struct {
		name  string
		other cluster.Member
		want  bool
	}{
		{"older process with the same node id", cluster.Member{ID: "m1", NodeID: "n1", Session: "a", Started: t0}, true},
		{"younger process", cluster.Member{ID: "m3", NodeID: "n1", Session: "a", Started: t0.Add(time.Hour)}, false},
		{"same start, smaller session", cluster.Member{ID: "m1", NodeID: "n1", Session: "a", Started: self.Started}, true},
		{"same start, larger session", cluster.Member{ID: "m1", NodeID: "n1", Session: "c", Started: self.Started}, false},
		{"same process, older incarnation", cluster.Member{ID: "m1", NodeID: "n1", Session: "b", Started: t0}, false},
		{"other node id", cluster.Member{ID: "m1", NodeID: "n9", Session: "a", Started: t0}, false},
		{"itself", self, false},
		{"dead process at this member's memberlist address", cluster.Member{ID: "m1", NodeID: "n1", Session: "a", Started: t0,
			MemberlistAddr: "127.0.0.1:7946"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := self.YieldsTo(tt.other); got != tt.want {
				t.Fatalf("YieldsTo = %v, want %v", got, tt.want)
			}
		})
	}
}
