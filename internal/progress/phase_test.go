package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/testsupport"
	"github.com/dairuntime/dair/messages"
)

func ledger(t *testing.T, kind, step, instance, reason string, at time.Time) []byte {
	t.Helper()
	b, err := json.Marshal(httpapi.LedgerEntry{Kind: kind, StepID: step, RuntimeInstanceID: instance, Reason: reason, At: at})
	require.NoError(t, err)
	return b
}

func TestPrinter_Tick_waitsAndLongSteps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	feed := func(p *Printer) {
		for _, ev := range []struct {
			kind, step, inst, reason string
			at                       time.Duration
		}{
			{messages.KindSubmitted, "", "", "", 0},
			{messages.KindAdmission, "", "", "max-runtime-instances-reached", 0},
		} {
			require.NoError(t, p.Event(0, ev.kind, ledger(t, ev.kind, ev.step, ev.inst, ev.reason, t0.Add(ev.at))))
		}
	}
	t.Run("plain", func(t *testing.T) {
		var out bytes.Buffer
		p := New(&out, 1, false)
		feed(p)
		require.NoError(t, p.Tick(t0.Add(2*time.Second)))
		require.NoError(t, p.Tick(t0.Add(5500*time.Millisecond)))
		require.NoError(t, p.Tick(t0.Add(6*time.Second)))
		require.NoError(t, p.Event(0, messages.KindScaleOutRequested, ledger(t, messages.KindScaleOutRequested, "", "", "dedicated-capacity", t0.Add(7*time.Second))))
		require.NoError(t, p.Event(0, messages.KindStepStarted, ledger(t, messages.KindStepStarted, "slow", "i-1", "", t0.Add(8*time.Second))))
		require.NoError(t, p.Tick(t0.Add(14*time.Second)))
		require.NoError(t, p.Tick(t0.Add(15*time.Second)))
		require.NoError(t, p.Tick(t0.Add(26*time.Second)))
		want := []string{
			"queued: max-runtime-instances-reached\n",
			"... still queued after 5.5s: max-runtime-instances-reached\n",
			"scaling out: dedicated-capacity\n",
			"... step slow still running after 6.0s\n",
			"... step slow still running after 18.0s\n",
		}
		require.Equal(t, strings.Join(want, ""), out.String())
	})
	t.Run("live", func(t *testing.T) {
		var out bytes.Buffer
		p := New(&out, 1, true)
		feed(p)
		require.NoError(t, p.Tick(t0.Add(9500*time.Millisecond)))
		require.True(t, strings.HasSuffix(out.String(), "\r\033[Kqueued 9.5s: max-runtime-instances-reached"), "%q", out.String())
		require.NoError(t, p.Event(0, messages.KindStepStarted, ledger(t, messages.KindStepStarted, "fetch", "i-1", "", t0.Add(10*time.Second))))
		require.NoError(t, p.Tick(t0.Add(12*time.Second)))
		require.True(t, strings.HasSuffix(out.String(), "\r\033[Krunning 1: fetch 2.0s"), "%q", out.String())
	})
}

func TestTicking_Start_ticksUntilStopped(t *testing.T) {
	var out syncWriter
	p := New(&out, 0, true)
	tk := NewTicking(p)
	require.NoError(t, tk.Event(0, messages.KindSubmitted, ledger(t, messages.KindSubmitted, "", "", "", time.Now())))
	stop := tk.Start(context.Background(), time.Millisecond, time.Now)
	testsupport.Eventually(t, 10*time.Second, time.Millisecond, func() bool { return strings.Contains(out.String(), "queued ") },
		"no tick redrew the status line")
	stop()
	stop()
}

// syncWriter is a goroutine-safe buffer.
type syncWriter struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (w *syncWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
