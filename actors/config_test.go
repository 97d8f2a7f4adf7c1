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

func TestConfig_defaults_pump(t *testing.T) {
	st := testkit.OpenStore(t, testkit.BackendEmbedded, nil)
	cases := []struct {
		name                  string
		batch, parallelism    int
		wantBatch, wantParall int
	}{
		{name: "defaults: a cycle dispatches its whole claim at once", wantBatch: 128, wantParall: 128},
		{name: "batch only: as wide as the batch", batch: 256, wantBatch: 256, wantParall: 256},
		{name: "both", batch: 256, parallelism: 64, wantBatch: 256, wantParall: 64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := actors.ConfigDefaults(actors.Config{Store: st, PumpBatch: tc.batch, PumpParallelism: tc.parallelism})
			require.NoError(t, err)
			require.Equal(t, tc.wantBatch, c.PumpBatch)
			require.Equal(t, tc.wantParall, c.PumpParallelism)
		})
	}
}
