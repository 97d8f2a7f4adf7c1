package chaos

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestParseFaults(t *testing.T) {
	tests := []struct {
		in      string
		want    []Fault
		wantErr bool
	}{
		{"kill,pause,redis-restart,partition", AllFaults, false},
		{" pause , kill ,pause", []Fault{FaultPause, FaultKill}, false},
		{"none", []Fault{}, false},
		{"", nil, true},
		{",", nil, true},
		{"kill,explode", nil, true},
		{"KILL", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFaults(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrBadConfig) {
					t.Fatalf("err = %v, want ErrBadConfig", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseFaults(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFault_textRoundTrip(t *testing.T) {
	for _, f := range AllFaults {
		b, err := f.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Fault
		if err := back.UnmarshalText(b); err != nil || back != f {
			t.Fatalf("%s: round trip gave %v, %v", f, back, err)
		}
	}
	var f Fault
	if err := f.UnmarshalText([]byte("meteor")); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("err = %v, want ErrBadConfig", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr bool
	}{
		{"defaults", func(*Config) {}, false},
		{"zero value means defaults", func(c *Config) { *c = Config{} }, false},
		{"short profile", func(c *Config) { c.Runs, c.Duration, c.Seed = 30, 25*time.Second, 1 }, false},
		{"store without redis-restart", func(c *Config) {
			c.StoreURL, c.Faults = "redis://127.0.0.1:6379/0", []Fault{FaultKill}
		}, false},
		{"store: default faults drop redis-restart", func(c *Config) { *c = Config{StoreURL: "redis://127.0.0.1:6379/0"} }, false},
		{"store with redis-restart", func(c *Config) { c.StoreURL = "redis://127.0.0.1:6379/0" }, true},
		{"bolt store", func(c *Config) { c.StoreURL, c.Faults = "bolt:///tmp/x", []Fault{FaultKill} }, true},
		{"too many nodes", func(c *Config) { c.Nodes = 10 }, true},
		{"negative runs", func(c *Config) { c.Runs = -1 }, true},
		{"too many runs", func(c *Config) { c.Runs = 4001 }, true},
		{"duration too short", func(c *Config) { c.Duration = 10 * time.Second }, true},
		{"negative duration", func(c *Config) { c.Duration = -time.Second }, true},
		{"bad profile", func(c *Config) { c.Profile = "wan" }, true},
		{"negative timeout", func(c *Config) { c.FinishTimeout = -time.Second }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantErr != (err != nil) {
				t.Fatalf("Validate() = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrBadConfig) {
				t.Fatalf("err = %v, want ErrBadConfig", err)
			}
		})
	}
}
