package history

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/dairuntime/dair/messages"
)

// Span is one timed interval of a run: the run itself, a step attempt, or an instant
// control-plane decision (Start == End).
type Span struct {
	Name       string
	Kind       string
	Start, End time.Time
	Attributes map[string]any
}

// Trace builds a run's timeline from its ledger (entries in Seq order): one "run" span from
// submission to the terminal entry, one "step" span per attempt (started → succeeded/failed),
// and one instant span per control-plane decision. Attempts that never ended (a crash) end at
// the last entry's time with attribute "open": true.
func Trace(entries []*messages.LedgerEntry) []Span {
	if len(entries) == 0 {
		return nil
	}
	at := func(e *messages.LedgerEntry) time.Time { return time.Unix(0, e.At).UTC() }
	last := at(entries[len(entries)-1])
	run := Span{Name: "run " + entries[0].SharedRunId, Kind: "run", Start: at(entries[0]), End: last,
		Attributes: map[string]any{"shared_run_id": entries[0].SharedRunId}}
	var out []Span
	type key struct {
		step    string
		attempt int32
	}
	open := map[key]int{}
	var steps []Span
	for _, e := range entries {
		switch e.Kind {
		case messages.KindStepStarted:
			open[key{e.StepId, e.Attempt}] = len(steps)
			steps = append(steps, Span{Name: "step " + e.StepId, Kind: "step", Start: at(e), End: last,
				Attributes: map[string]any{"step_id": e.StepId, "attempt": e.Attempt, "execution_id": e.ExecutionId,
					"runtime_instance_id": e.RuntimeInstanceId, "epoch": e.Epoch, "open": true}})
		case messages.KindStepSucceeded, messages.KindStepFailed:
			if i, ok := open[key{e.StepId, e.Attempt}]; ok {
				s := &steps[i]
				s.End = at(e)
				s.Attributes["open"] = false
				s.Attributes["status"] = map[string]string{messages.KindStepSucceeded: "succeeded", messages.KindStepFailed: "failed"}[e.Kind]
				if e.Reason != "" {
					s.Attributes["error"] = e.Reason
				}
				delete(open, key{e.StepId, e.Attempt})
			}
		case messages.KindRunSucceeded, messages.KindRunFailed, messages.KindRunCancelled:
			run.End = at(e)
			run.Attributes["status"] = e.Kind
			if e.ExecutionId != "" {
				run.Attributes["execution_id"] = e.ExecutionId
			}
		default:
			attrs := map[string]any{"seq": e.Seq}
			if e.RuntimeInstanceId != "" {
				attrs["runtime_instance_id"] = e.RuntimeInstanceId
			}
			if e.Reason != "" {
				attrs["reason"] = e.Reason
			}
			if e.Epoch != 0 {
				attrs["epoch"] = e.Epoch
			}
			if len(e.Data) > 0 {
				var d any
				if json.Unmarshal(e.Data, &d) == nil {
					attrs["data"] = d
				}
			}
			out = append(out, Span{Name: e.Kind, Kind: "event", Start: at(e), End: at(e), Attributes: attrs})
		}
	}
	res := make([]Span, 0, 1+len(steps)+len(out))
	res = append(res, run)
	res = append(res, steps...)
	res = append(res, out...)
	return res
}

// String renders a span for logs.
func (s Span) String() string {
	return fmt.Sprintf("%s %s %s +%s", s.Kind, s.Name, s.Start.Format(time.RFC3339Nano), s.End.Sub(s.Start))
}
