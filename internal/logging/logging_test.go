package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

func TestNew_config(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr error
	}{
		{name: "defaults", cfg: Config{}},
		{name: "debug json", cfg: Config{Level: "debug", Format: "json"}},
		{name: "warn console", cfg: Config{Level: "WARN", Format: "console"}},
		{name: "error", cfg: Config{Level: "error"}},
		{name: "bad level", cfg: Config{Level: "loud"}, wantErr: ErrUnknownLevel},
		{name: "bad format", cfg: Config{Format: "xml"}, wantErr: ErrUnknownFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.cfg.Output = &buf
			l, err := New(tt.cfg)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("New() error = %v, want %v", err, tt.wantErr)
				}
				if vErr := tt.cfg.Validate(); !errors.Is(vErr, tt.wantErr) {
					t.Fatalf("Validate() error = %v, want %v", vErr, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			l.Error("boom")
			if !strings.Contains(buf.String(), "boom") {
				t.Fatalf("output %q lacks message", buf.String())
			}
		})
	}
}

func TestNew_levelFilter(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(Config{Level: "warn", Format: "json", Output: &buf})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	l.Info("hidden")
	l.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Fatalf("unexpected output %q", buf.String())
	}
}

func TestNew_errorMessage(t *testing.T) {
	_, err := New(Config{Level: "loud"})
	if err == nil || err.Error() != `logging: unknown level "loud"` {
		t.Fatalf("error = %v", err)
	}
}

func TestSlog_routesToZap(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(Config{Format: "json", Output: &buf})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	Slog(l).Info("hello", slog.String("k", "v"))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("decode %q: %v", buf.String(), err)
	}
	if rec["msg"] != "hello" || rec["k"] != "v" {
		t.Fatalf("record = %v", rec)
	}
}

func TestActorLoggerFactory_systemField(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(Config{Format: "json", Output: &buf})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(ActorLoggerFactory(l)))
	defer system.Shutdown()
	system.Logger().Info("from actor")
	var found bool
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("decode %q: %v", line, err)
		}
		if rec["msg"] == "from actor" {
			found = true
			if rec["system"] != system.ID {
				t.Fatalf("system field = %v, want %s", rec["system"], system.ID)
			}
		}
	}
	if !found {
		t.Fatalf("record not found in %q", buf.String())
	}
}

func TestDiscard_silent(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(Discard()))
	defer system.Shutdown()
	system.Logger().Error("nobody hears this")
	if system.Logger().Handler().Enabled(t.Context(), slog.LevelError) {
		t.Fatal("discard handler should be disabled")
	}
}
