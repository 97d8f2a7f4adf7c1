package agents

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/messages"
)

func TestValidateAgentID_cases(t *testing.T) {
	tests := []struct {
		name string
		id   *messages.AgentId
		ok   bool
	}{
		{"simple", aid("echo", "k1"), true},
		{"dotted type, any key", aid("llm.chat-v2_x", "user/42 é"), true},
		{"nil", nil, false},
		{"empty type", aid("", "k"), false},
		{"upper-case type", aid("Echo", "k"), false},
		{"type starting with a digit", aid("1echo", "k"), false},
		{"long type", aid(strings.Repeat("a", 65), "k"), false},
		{"empty key", aid("echo", ""), false},
		{"long key", aid("echo", strings.Repeat("k", 257)), false},
		{"control character in key", aid("echo", "a\nb"), false},
		{"invalid UTF-8 key", aid("echo", "\xff"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateAgentID(tt.id)
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrInvalidAgentID) {
				t.Fatalf("ValidateAgentID() = %v, ok %v", err, tt.ok)
			}
		})
	}
}

func TestValidateTopic_cases(t *testing.T) {
	if err := ValidateTopic(topic("orders", "")); err != nil {
		t.Fatal(err)
	}
	if err := ValidateTopic(topic("orders", "a source with spaces")); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []*messages.TopicId{nil, topic("", "x"), topic("orders", "a\x00"), topic("Bad Topic", ""), topic("tab\tbed", "")} {
		if err := ValidateTopic(tp); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("ValidateTopic(%v) = %v", tp, err)
		}
	}
	// The errors speak of topics, not of agent ids.
	for tp, want := range map[*messages.TopicId]string{
		topic("\xff", ""):       "agents: invalid topic: type must be 1 to 256 bytes of UTF-8",
		topic("orders", "\x01"): `agents: invalid topic: source "\x01" has a control character`,
	} {
		err := ValidateTopic(tp)
		if err == nil || err.Error() != want || errors.Is(err, ErrInvalidAgentID) {
			t.Errorf("ValidateTopic(%v) = %v, want %s", tp, err, want)
		}
	}
}

func TestValidateSubscription_cases(t *testing.T) {
	tests := []struct {
		name string
		s    *messages.Subscription
		ok   bool
	}{
		{"exact", sub("s", "acme", "orders", "echo", ""), true},
		{"prefix with key", prefixSub("s", "acme", "orders.", "echo", "k"), true},
		{"nil", nil, false},
		{"no tenant", sub("s", "", "orders", "echo", ""), false},
		{"invalid tenant", sub("s", "ac/me", "orders", "echo", ""), false},
		{"neither topic nor prefix", sub("s", "acme", "", "echo", ""), false},
		{"both topic and prefix", &messages.Subscription{TenantId: "acme", Topic: "a", TopicPrefix: "a", AgentType: "echo"}, false},
		{"bad agent type", sub("s", "acme", "orders", "Echo", ""), false},
		{"bad key", sub("s", "acme", "orders", "echo", "a\tb"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateSubscription(tt.s)
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrInvalidSubscription) {
				t.Fatalf("ValidateSubscription() = %v, ok %v", err, tt.ok)
			}
		})
	}
}

func TestTenancy_seedRules(t *testing.T) {
	if _, err := TenantOf(&messages.MessageEnvelope{}); !errors.Is(err, ErrNoTenant) {
		t.Errorf("TenantOf(no snapshot) = %v", err)
	}
	for _, bad := range []string{"ba/d", "has space", "Acme", "x/counter"} {
		if _, err := TenantOf(&messages.MessageEnvelope{Snapshot: &messages.ExecutionContextSnapshot{TenantId: bad}}); !errors.Is(err, ErrInvalidTenant) {
			t.Errorf("TenantOf(%q) = %v, want ErrInvalidTenant (a tenant id as a run's)", bad, err)
		}
	}
	ten, err := TenantOf(&messages.MessageEnvelope{Snapshot: &messages.ExecutionContextSnapshot{TenantId: "acme"}})
	if err != nil || ten != "acme" {
		t.Errorf("TenantOf = %q, %v", ten, err)
	}
	if !TenantAllowed(nil, "acme") || !TenantAllowed([]string{"acme"}, "acme") || TenantAllowed([]string{"globex"}, "acme") {
		t.Error("TenantAllowed")
	}
	if KeyOf("acme", aid("echo", "k")) == KeyOf("globex", aid("echo", "k")) {
		t.Error("the same agent id under two tenants must be two agents")
	}
	if KeyOf("acme", aid("echo", "k")).String() != "acme/echo/k" {
		t.Error("Key.String")
	}
}

func TestReasonCode_StatusName(t *testing.T) {
	if got := ReasonCode(Reason(ReasonTenantRefused, "tenant %q", "acme")); got != ReasonTenantRefused {
		t.Errorf("ReasonCode = %q", got)
	}
	if got := ReasonCode("handler said: no"); got != "" {
		t.Errorf("ReasonCode(free text) = %q", got)
	}
	names := map[*messages.DeliveryOutcome]string{
		Delivered(nil, "", "w"): "delivered", TimedOut("", "w"): "timeout",
		Undeliverable("", "w"): "undeliverable", Failed("x", "w"): "error", {}: "unspecified",
	}
	for o, want := range names {
		if got := StatusName(o.Status); got != want {
			t.Errorf("StatusName(%v) = %q, want %q", o.Status, got, want)
		}
	}
}

func TestConfig_defaultsAndValidate(t *testing.T) {
	c := Config{}.WithDefaults()
	if c != DefaultConfig() || c.HealthInterval != 5*time.Second || c.FailureThreshold != 2 || c.RPCTimeout != 30*time.Second {
		t.Fatalf("defaults = %+v", c)
	}
	if c.ProbeTimeout() != 5*time.Second || c.EvictionBound() != 20*time.Second {
		t.Fatalf("ProbeTimeout %v EvictionBound %v", c.ProbeTimeout(), c.EvictionBound())
	}
	low := Config{HealthInterval: 100 * time.Millisecond, RPCTimeout: 50 * time.Millisecond}
	if low.ProbeTimeout() != 50*time.Millisecond {
		t.Fatalf("ProbeTimeout = %v", low.ProbeTimeout())
	}
	for _, bad := range []Config{{HealthInterval: -1}, {FailureThreshold: -1}, {RPCTimeout: -1}, {IdleTimeout: -1}, {MaxBatch: -1}} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v", bad, err)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
}
