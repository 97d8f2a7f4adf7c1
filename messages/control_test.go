package messages

import (
	"errors"
	"testing"
)

func TestControlOp_String_roundTrip(t *testing.T) {
	for _, tc := range []struct {
		op    ControlOp
		wire  string
		runOp bool
	}{
		{OpCancelRun, "cancel_run", true},
		{OpPauseRun, "pause_run", true},
		{OpResumeRun, "resume_run", true},
		{OpPauseQueue, "pause_queue", false},
		{OpResumeQueue, "resume_queue", false},
		{OpDrainQueue, "drain_queue", false},
		{OpUndrainQueue, "undrain_queue", false},
		{OpStopInstance, "stop_instance", false},
	} {
		t.Run(tc.wire, func(t *testing.T) {
			if got := tc.op.String(); got != tc.wire {
				t.Fatalf("String() = %q, want %q", got, tc.wire)
			}
			got, err := ParseControlOp(tc.wire)
			if err != nil || got != tc.op {
				t.Fatalf("ParseControlOp(%q) = %v, %v; want %v", tc.wire, got, err, tc.op)
			}
			req := &ControlRequest{Op: tc.wire}
			if got, err := req.ControlOp(); err != nil || got != tc.op {
				t.Fatalf("ControlRequest.ControlOp() = %v, %v; want %v", got, err, tc.op)
			}
			if tc.op.IsRunOp() != tc.runOp {
				t.Fatalf("IsRunOp() = %v, want %v", tc.op.IsRunOp(), tc.runOp)
			}
		})
	}
}

func TestParseControlOp_unknown(t *testing.T) {
	for _, s := range []string{"", "unknown", "cancel", "CANCEL_RUN", "create-instance"} {
		op, err := ParseControlOp(s)
		if !errors.Is(err, ErrUnknownControlOp) || op != 0 {
			t.Fatalf("ParseControlOp(%q) = %v, %v; want 0, ErrUnknownControlOp", s, op, err)
		}
	}
	if got := ControlOp(0).String(); got != "unknown" {
		t.Fatalf("ControlOp(0).String() = %q", got)
	}
	if got := ControlOp(200).String(); got != "unknown" {
		t.Fatalf("ControlOp(200).String() = %q", got)
	}
}
