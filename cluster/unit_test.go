package cluster

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestConfig_Validate_cases(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"defaults", DefaultConfig("n1"), false},
		{"zero fields default", Config{NodeID: "n1"}, false},
		{"local profile", Config{NodeID: "n1", Profile: ProfileLocal}, false},
		{"missing node id", Config{}, true},
		{"bad profile", Config{NodeID: "n1", Profile: "wan"}, true},
		{"hostname bind", Config{NodeID: "n1", BindAddr: "localhost:0"}, true},
		{"bind without port", Config{NodeID: "n1", BindAddr: "127.0.0.1"}, true},
		{"actor port range", Config{NodeID: "n1", ActorPort: 70000}, true},
		{"key 16", Config{NodeID: "n1", Keyring: [][]byte{make([]byte, 16)}}, false},
		{"key 20", Config{NodeID: "n1", Keyring: [][]byte{make([]byte, 20)}}, true},
		{"bad seed", Config{NodeID: "n1", Join: []string{"nope"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestLoses_cases(t *testing.T) {
	tests := []struct {
		name   string
		mutual bool
		side   int
		minID  string
		n      notice
		want   bool
	}{
		{"one-sided declaration", false, 3, "a", notice{From: "x", Side: 1, MinID: "x"}, true},
		{"minority loses", true, 1, "c", notice{From: "a", Side: 2, MinID: "a"}, true},
		{"majority stays", true, 2, "a", notice{From: "c", Side: 1, MinID: "c"}, false},
		{"tie larger min id loses", true, 1, "b", notice{From: "a", Side: 1, MinID: "a"}, true},
		{"tie smaller min id stays", true, 1, "a", notice{From: "b", Side: 1, MinID: "b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loses(tt.mutual, tt.side, tt.minID, tt.n); got != tt.want {
				t.Errorf("loses() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMember_FromNode_cases(t *testing.T) {
	meta, err := encodeMeta(nodeMeta{NodeID: "n1", Host: "127.0.0.1", Port: 9000, Roles: []string{"runtime"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		node    memberlist.Node
		wantErr bool
	}{
		{"ok", memberlist.Node{Name: "sys1", Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: meta}, false},
		{"not json", memberlist.Node{Name: "sys1", Meta: []byte("x")}, true},
		{"no address", memberlist.Node{Name: "sys1", Meta: []byte(`{"n":"n1"}`)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := memberFromNode(&tt.node)
			if (err != nil) != tt.wantErr {
				t.Fatalf("memberFromNode() = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && (m.ID != "sys1" || m.NodeID != "n1" || m.Address != "127.0.0.1:9000" ||
				!m.HasRole("runtime") || m.MemberlistAddr != "127.0.0.1:7946") {
				t.Errorf("member = %+v", m)
			}
		})
	}
}

func TestEncodeMeta_Limit_cases(t *testing.T) {
	tests := []struct {
		name    string
		roles   []string
		wantErr error
	}{
		{"small", []string{"runtime", "control-plane"}, nil},
		{"too large", []string{strings.Repeat("r", memberlist.MetaMaxSize)}, ErrMetaTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := encodeMeta(nodeMeta{NodeID: "n", Host: "h", Port: 1, Roles: tt.roles})
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("encodeMeta() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestNotice_Decode_cases(t *testing.T) {
	good, err := encodeNotice(notice{From: "a", Side: 2, MinID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      []byte
		wantErr bool
	}{
		{"round trip", good, false},
		{"empty", nil, true},
		{"unknown tag", []byte("X{}"), true},
		{"no sender", []byte(`D{"s":1}`), true},
		{"bad json", []byte("D{"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := decodeNotice(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodeNotice() = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && (n.From != "a" || n.Side != 2) {
				t.Errorf("notice = %+v", n)
			}
		})
	}
}

func TestEventKind_String_cases(t *testing.T) {
	tests := []struct {
		kind EventKind
		want string
	}{
		{MemberJoined, "member_joined"},
		{MemberLeft, "member_left"},
		{MemberUpdated, "member_updated"},
		{SelfDeclaredDead, "self_declared_dead"},
		{EventKind(42), "unknown(42)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.kind.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSubscribers_Publish_cases(t *testing.T) {
	tests := []struct {
		name   string
		buf    int
		events int
	}{
		{"unbuffered keeps order", 0, 50},
		{"buffered keeps order", 4, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s subscribers
			ch, cancel := s.add(tt.buf)
			for i := range tt.events {
				s.publish(Event{Kind: MemberJoined, Member: Member{Port: i}})
			}
			for i := range tt.events {
				if ev := <-ch; ev.Member.Port != i {
					t.Fatalf("event %d has port %d", i, ev.Member.Port)
				}
			}
			cancel()
			cancel()
			if _, ok := <-ch; ok {
				t.Fatal("channel open after cancel")
			}
			s.closeAll()
		})
	}
}

func TestProvider_StartClient_notSupported(t *testing.T) {
	p, err := NewProvider(DefaultConfig("n1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.StartClient(nil); !errors.Is(err, ErrClientNotSupported) {
		t.Errorf("StartClient() = %v, want ErrClientNotSupported", err)
	}
	if err := p.Shutdown(true); err != nil {
		t.Errorf("Shutdown() before start = %v", err)
	}
}

// TestProvider_handleNotice_otherIncarnation: a declared-dead notice addressed to an earlier
// incarnation of this process (same memberlist address) is ignored; one addressed to this
// member, or to nobody in particular, declares it dead.
func TestProvider_handleNotice_otherIncarnation(t *testing.T) {
	tests := []struct {
		name string
		to   string
		dead bool
	}{
		{"earlier incarnation", "old-member", false},
		{"this member", "new-member", true},
		{"unaddressed", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewProvider(Config{NodeID: "n3"})
			if err != nil {
				t.Fatal(err)
			}
			p.selfMember = Member{ID: "new-member", NodeID: "n3"}
			ev, cancel := p.Subscribe(1)
			defer cancel()
			p.handleNotice(notice{From: "peer", Side: 2, MinID: "peer", To: tt.to})
			if p.selfDead != tt.dead {
				t.Fatalf("selfDead = %v, want %v", p.selfDead, tt.dead)
			}
			if !tt.dead {
				return
			}
			select {
			case e := <-ev:
				if e.Kind != SelfDeclaredDead {
					t.Fatalf("event %v, want SelfDeclaredDead", e.Kind)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no SelfDeclaredDead event")
			}
		})
	}
}
