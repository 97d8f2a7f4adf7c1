package actors_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/testkit"
)

func TestConfig_Validate_liveness(t *testing.T) {
	st := testkit.OpenStore(t, testkit.BackendEmbedded, nil)
	cases := []struct {
		name          string
		ttl, interval time.Duration
		wantErr       string
	}{
		{name: "defaults"},
		{name: "ttl only: interval is a quarter", ttl: 2 * time.Second},
		{name: "both", ttl: time.Second, interval: 100 * time.Millisecond},
		{name: "interval as long as the ttl", ttl: time.Second, interval: time.Second, wantErr: "LivenessInterval 1s must be shorter than LivenessTTL 1s"},
		{name: "interval longer than the default ttl", interval: 2 * time.Second, wantErr: "must be shorter than LivenessTTL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := actors.Config{Store: st, LivenessTTL: tc.ttl, LivenessInterval: tc.interval}.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
