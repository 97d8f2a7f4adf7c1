package engine_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/engine"
	"github.com/dairuntime/dair/messages"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the testdata scenarios")

// TestScenarios runs every script of testdata/: events in, effects out. A script is a list of
// blocks: a command line, input lines, "----", then the expected output up to a blank line.
// Commands: pipeline (YAML input), new [workers=N] [timeout=D] [tenant=T] [fold=true],
// loaded [status=S] [input=JSON] (input lines: "<id> <status> [attempts=N] [output=JSON]"),
// succeed ID ATTEMPT [output=JSON] [ms=N], fail ID ATTEMPT [permanent] [err=TEXT],
// timeout ID ATTEMPT, ack ID..|* [already|fenced], retry ID ATTEMPT, cancel [reason=TEXT],
// pause, resume, fenced, finalized [ok|fenced|failed], state. Every command takes t=D, the
// time of its event (it stays until changed). go test -run TestScenarios -rewrite rewrites
// the expected outputs.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata/")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type block struct {
	line   int
	cmd    string
	input  []string
	expect []string
	// from and to delimit the expected output in the file's lines: [from, to).
	from, to int
}

func parseScript(t *testing.T, lines []string) []block {
	t.Helper()
	var (
		blocks []block
		cur    *block
		inOut  bool
	)
	for n, line := range lines {
		switch {
		case cur == nil && (strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#")):
		case cur == nil:
			blocks = append(blocks, block{line: n + 1, cmd: line})
			cur, inOut = &blocks[len(blocks)-1], false
		case line == "----":
			inOut, cur.from, cur.to = true, n+1, n+1
		case inOut && strings.TrimSpace(line) == "":
			cur = nil
		case inOut:
			cur.expect = append(cur.expect, line)
			cur.to = n + 1
		default:
			cur.input = append(cur.input, line)
		}
	}
	for _, b := range blocks {
		if b.from == 0 {
			t.Fatalf("line %d: %q has no ---- line", b.line, b.cmd)
		}
	}
	return blocks
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	blocks := parseScript(t, lines)
	r := &runner{t: t}
	got := make([][]string, len(blocks))
	for i, b := range blocks {
		got[i] = r.run(b)
		if !*rewrite && strings.Join(got[i], "\n") != strings.Join(b.expect, "\n") {
			t.Errorf("%s:%d: %s\n got:\n\t%s\nwant:\n\t%s", path, b.line, b.cmd,
				strings.Join(got[i], "\n\t"), strings.Join(b.expect, "\n\t"))
		}
	}
	if !*rewrite {
		return
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		lines = append(lines[:b.from], append(append([]string(nil), got[i]...), lines[b.to:]...)...)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runner holds a script's machine, pipeline, clock and unanswered commits.
type runner struct {
	t       *testing.T
	pipe    *dag.Pipeline
	ix      *engine.Index
	m       *engine.Machine
	now     time.Duration
	pending []uint64
}

var t0 = time.Unix(1_700_000_000, 0).UTC()

func (r *runner) run(b block) []string {
	fields := tokenize(b.cmd)
	name, args := fields[0], parseArgs(fields[1:])
	if v, ok := args["t"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return []string{"error: bad t: " + err.Error()}
		}
		r.now = d
	}
	switch name {
	case "pipeline":
		return r.pipeline(b.input)
	case "new":
		return r.newMachine(args)
	case "state":
		return r.state()
	case "ack":
		return r.ack(fields[1:], args)
	}
	ev, err := r.event(name, fields[1:], args, b.input)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	return r.step(ev)
}

// tokenize splits a line at spaces, except inside a quoted value (key="a b"), which loses its
// quotes. Other quotes, such as those of a JSON value, are kept as they are.
func tokenize(line string) []string {
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		end := strings.IndexByte(line, ' ')
		if end < 0 {
			end = len(line)
		}
		if eq := strings.Index(line, "=\""); eq >= 0 && eq < end {
			if q := strings.IndexByte(line[eq+2:], '"'); q >= 0 {
				out = append(out, line[:eq+1]+line[eq+2:eq+2+q])
				line = line[eq+3+q:]
				continue
			}
		}
		out = append(out, line[:end])
		line = line[end:]
	}
	return out
}

func parseArgs(fields []string) map[string]string {
	args := map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = v
		} else {
			args[f] = ""
		}
	}
	return args
}

func (r *runner) pipeline(src []string) []string {
	p, err := dag.Load([]byte(strings.Join(src, "\n")), nil)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	g, err := dag.Compile(p)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	if r.ix, err = engine.NewIndex(g); err != nil {
		return []string{"error: " + err.Error()}
	}
	r.pipe = p
	return []string{"order " + strings.Join(g.Order(), " ")}
}

func (r *runner) newMachine(args map[string]string) []string {
	cfg := engine.Config{TenantID: args["tenant"], FoldFinalize: args["fold"] == "true"}
	if v, ok := args["pure"]; ok {
		pure := strings.Split(v, ",")
		cfg.Pure = func(uses string) bool { return slices.Contains(pure, uses) }
	}
	if v, ok := args["workers"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		cfg.Workers = n
	}
	if v, ok := args["timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		cfg.DefaultTimeout = d
	}
	r.m, r.pending = engine.New(cfg), nil
	return nil
}

func (r *runner) event(name string, pos []string, args map[string]string, input []string) (engine.Event, error) {
	id, attempt := "", 0
	switch name {
	case "succeed", "fail", "timeout", "retry":
		if len(pos) < 2 {
			return nil, fmt.Errorf("%s wants a step id and an attempt", name)
		}
		n, err := strconv.Atoi(pos[1])
		if err != nil {
			return nil, fmt.Errorf("bad attempt %q", pos[1])
		}
		id, attempt = pos[0], n
	}
	switch name {
	case "loaded":
		return r.loaded(args, input)
	case "succeed":
		ms, _ := strconv.Atoi(args["ms"])
		out := args["output"]
		if out == "" {
			out = fmt.Sprintf(`{"step":%q,"attempt":%d}`, id, attempt)
		}
		return engine.AttemptSucceeded{Step: id, Attempt: attempt, Output: []byte(out), Duration: time.Duration(ms) * time.Millisecond}, nil
	case "fail":
		_, perm := args["permanent"]
		return engine.AttemptFailed{Step: id, Attempt: attempt, Err: errors.New(orDefault(args["err"], "boom")), Permanent: perm}, nil
	case "timeout":
		return engine.AttemptTimedOut{Step: id, Attempt: attempt, Err: errors.New("context deadline exceeded")}, nil
	case "retry":
		return engine.RetryDue{Step: id, Attempt: attempt}, nil
	case "cancel":
		return engine.Cancel{Reason: args["reason"]}, nil
	case "pause":
		return engine.Pause{}, nil
	case "resume":
		return engine.Resume{}, nil
	case "fenced":
		return engine.Fenced{Err: errors.New("store: stale epoch")}, nil
	case "confirmed":
		return engine.Confirmed{}, nil
	case "finalized":
		switch {
		case has(args, "fenced"):
			return engine.FinalizeDone{Result: engine.FinalizeFenced, Err: errors.New("store: stale epoch")}, nil
		case has(args, "failed"):
			return engine.FinalizeDone{Result: engine.FinalizeFailed, Err: errors.New("store unavailable")}, nil
		}
		return engine.FinalizeDone{Result: engine.FinalizeOK}, nil
	}
	return nil, fmt.Errorf("unknown command %q", name)
}

func has(args map[string]string, k string) bool { _, ok := args[k]; return ok }

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (r *runner) loaded(args map[string]string, input []string) (engine.Event, error) {
	status, ok := engine.ParseRunStatus(orDefault(args["status"], "running"))
	if !ok {
		return nil, fmt.Errorf("bad status %q", args["status"])
	}
	ev := engine.Loaded{Index: r.ix, ExecutionID: "exec-1", Status: status, Reason: args["reason"], Input: []byte(args["input"]),
		Unconfirmed: has(args, "unconfirmed")}
	for _, l := range input {
		f := tokenize(l)
		if len(f) < 2 {
			return nil, fmt.Errorf("bad record %q", l)
		}
		rec := &messages.StepState{StepId: f[0], Status: f[1]}
		a := parseArgs(f[2:])
		if v, ok := a["attempts"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, err
			}
			rec.Attempts = int32(n)
		}
		if v, ok := a["output"]; ok {
			rec.Output = []byte(v)
		}
		ev.Steps = append(ev.Steps, rec)
	}
	return ev, nil
}

func (r *runner) ack(pos []string, args map[string]string) []string {
	res := engine.CommitOK
	var err error
	switch {
	case has(args, "already"):
		res = engine.CommitAlreadyCommitted
	case has(args, "fenced"):
		res, err = engine.CommitFenced, errors.New("store: stale epoch")
	}
	var ids []uint64
	for _, p := range pos {
		if p == "*" {
			ids = append(ids, r.pending...)
			continue
		}
		if strings.Contains(p, "=") || p == "already" || p == "fenced" {
			continue
		}
		n, perr := strconv.ParseUint(p, 10, 64)
		if perr != nil {
			return []string{"error: bad commit id " + p}
		}
		ids = append(ids, n)
	}
	var out []string
	for _, id := range ids {
		out = append(out, r.step(engine.CommitDone{ID: id, Result: res, Err: err})...)
	}
	return out
}

func (r *runner) step(ev engine.Event) []string {
	if r.m == nil {
		return []string{"error: no machine (use new)"}
	}
	if cd, ok := ev.(engine.CommitDone); ok {
		for i, id := range r.pending {
			if id == cd.ID {
				r.pending = append(r.pending[:i], r.pending[i+1:]...)
				break
			}
		}
	}
	effs, err := r.m.Step(t0.Add(r.now), ev)
	var out []string
	for _, e := range effs {
		if c, ok := e.(engine.Commit); ok {
			r.pending = append(r.pending, c.ID)
		}
		out = append(out, formatEffect(e))
	}
	if err != nil {
		out = append(out, "error: "+err.Error())
	}
	return out
}

func (r *runner) state() []string {
	out := []string{fmt.Sprintf("run %s inflight=%d stopped=%v", r.m.Status(), r.m.Running(), r.m.Stopped())}
	if r.ix == nil {
		return out
	}
	for _, id := range r.ix.Graph().Order() {
		st, attempts, ok := r.m.StepStatus(id)
		if !ok {
			continue
		}
		line := fmt.Sprintf("%s %s attempts=%d", id, st, attempts)
		if r.m.InFlight(id, attempts) {
			line += " inflight"
		}
		out = append(out, line)
	}
	return out
}

func at(t time.Time) string { return t.Sub(t0).String() }

func formatEffect(e engine.Effect) string {
	switch f := e.(type) {
	case engine.StartStep:
		return fmt.Sprintf("start %s#%d uses=%s timeout=%s with=%s", f.Step, f.Attempt, f.Uses, f.Timeout, compact(f.With))
	case engine.Commit:
		s := fmt.Sprintf("commit %d: %s %s attempts=%d", f.ID, f.Record.StepId, f.Record.Status, f.Record.Attempts)
		if len(f.Record.Output) > 0 {
			s += " output=" + string(f.Record.Output)
		}
		s += " | " + f.Ledger.Kind
		if f.Ledger.Attempt != 0 {
			s += fmt.Sprintf(" attempt=%d", f.Ledger.Attempt)
		}
		if f.Ledger.Reason != "" {
			s += fmt.Sprintf(" reason=%q", f.Ledger.Reason)
		}
		if f.Ledger.Kind == messages.KindStepFailed {
			s += " data=" + string(f.Ledger.Data)
		}
		if f.Async {
			s += " async"
		}
		if f.Finalize != nil {
			s += " + " + formatEffect(*f.Finalize)
		}
		return s
	case engine.ScheduleRetry:
		return fmt.Sprintf("retry %s#%d at=%s", f.Step, f.Attempt, at(f.At))
	case engine.CancelAttempt:
		return fmt.Sprintf("cancel %s#%d", f.Step, f.Attempt)
	case engine.SetRunStatus:
		return "run-status " + f.Status.String()
	case engine.Finalize:
		s := fmt.Sprintf("finalize %s reason=%q output=%s", f.Status, f.Reason, f.Output)
		if !f.NotBefore.IsZero() {
			s += " not-before=" + at(f.NotBefore)
		}
		return s
	case engine.Stop:
		if f.Fenced {
			return fmt.Sprintf("stop fenced: %v", f.Err)
		}
		return "stop " + f.Status.String()
	}
	return fmt.Sprintf("unknown effect %T", e)
}

// compact prints v as JSON (encoding/json sorts map keys).
func compact(v map[string]any) string {
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "!" + err.Error()
	}
	return string(b)
}
