package server

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/messages"
)

func TestParseAgentSubscriptions_cases(t *testing.T) {
	cases := []struct {
		spec    string
		want    *messages.Subscription
		wantErr bool
	}{
		{"acme:orders.created=counter", &messages.Subscription{TenantId: "acme", Topic: "orders.created", AgentType: "counter"}, false},
		{"acme:orders.*=echo/ops", &messages.Subscription{TenantId: "acme", TopicPrefix: "orders.", AgentType: "echo", AgentKey: "ops"}, false},
		{"acme:a=b=counter/k/1", &messages.Subscription{TenantId: "acme", Topic: "a=b", AgentType: "counter", AgentKey: "k/1"}, false},
		{"acme:orders", nil, true},
		{"orders=counter", nil, true},
		{":orders=counter", nil, true},
		{"acme:=counter", nil, true},
		{"acme:*=counter", nil, true},
		{"acme:orders=Counter", nil, true},
		{"acme:orders=", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ParseAgentSubscriptions([]string{tc.spec})
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.Equal(t, tc.want.String(), got[0].String())
		})
	}
	// The refusals a user is likely to meet say what to change.
	for spec, want := range map[string]string{
		"acme:*=counter": "a topic prefix needs at least one character before the *",
		"acme:=counter":  "no topic before the =",
	} {
		_, err := ParseAgentSubscriptions([]string{spec})
		require.ErrorContains(t, err, want, spec)
	}
}

func TestAgentOptions_validate(t *testing.T) {
	ok := AgentOptions{Types: []string{"echo", "counter"}, Subscriptions: []string{"acme:t=echo"}, HealthInterval: time.Second}
	require.NoError(t, ok.validate())
	for name, o := range map[string]AgentOptions{
		"unknown type":     {Types: []string{"llm"}},
		"bad subscription": {Subscriptions: []string{"nope"}},
		"negative knob":    {RPCTimeout: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			err := Options{StoreURL: "bolt:///tmp/x.db", Agents: o}.Validate()
			require.True(t, errors.Is(err, ErrInvalidOptions), "%v", err)
		})
	}
}
