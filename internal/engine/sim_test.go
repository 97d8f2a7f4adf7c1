package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dairuntime/dair/messages"
)

// TestMachine_randomRuns drives random pipelines through random interleavings of attempt
// outcomes, commit answers, timers, pause/resume/cancel, crashes (a new machine loaded from
// what was committed) and fencing, against a store model, and checks the engine's promises:
// the worker budget holds; a step starts only after its needs' successes are committed (or,
// for a pure need, sent to be committed: every other seed runs echo as pure); a committed
// success never runs again; a run finalizes only once every commit is answered; nothing
// follows Stop; a run ends, and ends as its records say.
func TestMachine_randomRuns(t *testing.T) {
	for seed := uint64(1); seed <= 400; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { newSim(t, seed).run() })
	}
}

type attempt struct {
	step string
	n    int
}

type sim struct {
	t       *testing.T
	rng     *rand.Rand
	ix      *Index
	workers int
	pure    bool // echo is pure (Config.Pure)
	// unconfirmed: the activation was loaded Unconfirmed (a fresh start queued, on pure
	// seeds) and has had no Confirmed yet.
	unconfirmed bool
	m           *Machine
	now         time.Time

	records   map[string]*messages.StepState // the store's step records
	runStatus RunStatus                      // the execution record's status
	reason    string
	finalized bool

	inflight  []attempt
	commits   []Commit
	retries   []RetryDue
	finalize  *Finalize
	cancelled bool
	crashed   bool
	stopped   bool
}

func newSim(t *testing.T, seed uint64) *sim {
	rng := rand.New(rand.NewPCG(seed, 7))
	n := 1 + rng.IntN(10)
	var b strings.Builder
	b.WriteString("key: random\nsteps:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - id: s%d\n    uses: %s\n", i, []string{"echo", "fail"}[rng.IntN(2)])
		fmt.Fprintf(&b, "    retry: {max_attempts: %d}\n", 1+rng.IntN(3))
		var needs []string
		for j := 0; j < i; j++ {
			if rng.IntN(4) == 0 {
				needs = append(needs, fmt.Sprintf("s%d", j))
			}
		}
		if len(needs) > 0 {
			fmt.Fprintf(&b, "    needs: [%s]\n", strings.Join(needs, ", "))
		}
	}
	s := &sim{t: t, rng: rng, ix: mustIndex(t, b.String()), workers: 1 + rng.IntN(3), pure: seed%2 == 0,
		now: time.Unix(1000, 0), records: map[string]*messages.StepState{}}
	s.start()
	return s
}

// start makes a new machine (a new activation) and loads it from the store model.
func (s *sim) start() {
	cfg := Config{Workers: s.workers}
	if s.pure {
		cfg.Pure = func(uses string) bool { return uses == "echo" }
	}
	s.m = New(cfg)
	s.inflight, s.commits, s.retries, s.finalize, s.stopped = nil, nil, nil, nil, false
	var recs []*messages.StepState
	for _, r := range s.records {
		recs = append(recs, r)
	}
	s.unconfirmed = s.pure && len(recs) == 0 && !s.crashed && s.rng.IntN(2) == 0
	s.step(Loaded{Index: s.ix, Status: s.runStatus, Reason: s.reason, Steps: recs, Unconfirmed: s.unconfirmed})
}

func (s *sim) run() {
	for i := 0; i < 2000; i++ {
		if s.finalized && s.stopped {
			s.checkEnd()
			return
		}
		if s.stopped { // fenced: a new owner takes over, rerunning what was interrupted
			s.crashed = true
			s.start()
			continue
		}
		s.now = s.now.Add(time.Duration(1+s.rng.IntN(50)) * time.Millisecond)
		s.act()
	}
	s.t.Fatalf("run did not end: paused=%v inflight=%v commits=%d retries=%v", s.m.paused, s.inflight, len(s.commits), s.retries)
}

// act delivers one random happening.
func (s *sim) act() {
	switch r := s.rng.IntN(100); {
	case r < 2:
		s.crashed = true
		s.start()
	case r < 3:
		if len(s.commits) > 0 {
			c := s.commits[0]
			s.commits = s.commits[1:]
			s.step(CommitDone{ID: c.ID, Result: CommitFenced, Err: errors.New("stale")})
			if !s.stopped {
				s.t.Fatal("a fenced commit did not stop the machine")
			}
		}
	case r < 5:
		s.cancelled = true
		s.step(Cancel{})
	case r < 7 && s.unconfirmed:
		s.unconfirmed = false
		s.step(Confirmed{})
	case r < 8:
		s.step(Pause{})
	case r < 20:
		s.step(Resume{})
	case r < 45 && len(s.commits) > 0:
		s.ackFirst()
	case r < 75 && len(s.inflight) > 0:
		s.report(s.rng.IntN(len(s.inflight)))
	case r < 85 && len(s.retries) > 0:
		i := s.rng.IntN(len(s.retries))
		rd := s.retries[i]
		s.retries = append(s.retries[:i], s.retries[i+1:]...)
		s.step(rd)
	case s.finalize != nil && len(s.commits) == 0:
		s.finalized = true
		s.runStatus, s.reason = s.finalize.Status, s.finalize.Reason
		s.finalize = nil
		s.step(FinalizeDone{Result: FinalizeOK})
	case len(s.commits) > 0:
		s.ackFirst()
	}
}

// ackFirst answers the oldest commit as the store would (commits reach it in order).
func (s *sim) ackFirst() {
	c := s.commits[0]
	s.commits = s.commits[1:]
	res := CommitOK
	if prev := s.records[c.Record.StepId]; prev != nil && prev.Status == messages.StepSucceeded {
		if c.Record.Status == messages.StepSucceeded {
			res = CommitAlreadyCommitted
		} else {
			s.t.Fatalf("commit %s %s over a committed success", c.Record.StepId, c.Record.Status)
		}
	}
	if res == CommitOK {
		s.records[c.Record.StepId] = c.Record
	}
	s.step(CommitDone{ID: c.ID, Result: res})
}

func (s *sim) report(i int) {
	a := s.inflight[i]
	s.inflight = append(s.inflight[:i], s.inflight[i+1:]...)
	uses := s.ix.steps[s.ix.pos[a.step]].Uses
	switch r := s.rng.IntN(10); {
	case uses == "fail" && r < 4:
		s.step(AttemptFailed{Step: a.step, Attempt: a.n, Err: errors.New("boom"), Permanent: r == 0})
	case r == 9:
		s.step(AttemptTimedOut{Step: a.step, Attempt: a.n, Err: errors.New("deadline")})
	default:
		s.step(AttemptSucceeded{Step: a.step, Attempt: a.n, Output: []byte(`{"ok":true}`)})
	}
}

func (s *sim) step(ev Event) {
	effs, err := s.m.Step(s.now, ev)
	if err != nil {
		s.t.Fatalf("%T: %v", ev, err)
	}
	if s.stopped && len(effs) > 0 {
		s.t.Fatalf("effects after Stop: %v", effs)
	}
	for k, e := range effs {
		switch f := e.(type) {
		case StartStep:
			if s.unconfirmed && s.ix.steps[s.ix.pos[f.Step]].Uses != "echo" {
				s.t.Fatalf("start %s (not pure) before the execution's start was confirmed", f.Step)
			}
			s.checkStart(f)
			s.inflight = append(s.inflight, attempt{f.Step, f.Attempt})
		case Commit:
			if f.Async && !(s.pure && f.Record.Status == messages.StepSucceeded && s.ix.steps[s.ix.pos[f.Record.StepId]].Uses == "echo") {
				s.t.Fatalf("commit %s %s: async %v", f.Record.StepId, f.Record.Status, f.Async)
			}
			s.commits = append(s.commits, f)
		case ScheduleRetry:
			s.retries = append(s.retries, RetryDue{Step: f.Step, Attempt: f.Attempt})
		case CancelAttempt:
		case SetRunStatus:
			s.runStatus = f.Status
		case Finalize:
			if s.unconfirmed {
				s.t.Fatal("finalize before the execution's start was confirmed")
			}
			if len(s.commits) > 0 {
				s.t.Fatalf("finalize with %d commits unanswered", len(s.commits))
			}
			s.finalize = &f
		case Stop:
			if k != len(effs)-1 {
				s.t.Fatalf("Stop is not the last effect: %v", effs)
			}
			s.stopped = true
		}
	}
	if s.m.Running() > s.workers {
		s.t.Fatalf("%d attempts in flight, budget %d", s.m.Running(), s.workers)
	}
}

func (s *sim) checkStart(f StartStep) {
	if r := s.records[f.Step]; r != nil && r.Status == messages.StepSucceeded {
		s.t.Fatalf("start %s#%d: its success is committed", f.Step, f.Attempt)
	}
	for _, n := range s.ix.needs[s.ix.pos[f.Step]] {
		id := s.ix.ids[n]
		if r := s.records[id]; (r == nil || r.Status != messages.StepSucceeded) && !s.sent(id) {
			s.t.Fatalf("start %s before its need %s succeeded", f.Step, id)
		}
	}
	if max := s.ix.maxAttempts(s.ix.pos[f.Step]); !s.crashed && f.Attempt > max {
		s.t.Fatalf("start %s#%d: budget is %d attempts", f.Step, f.Attempt, max)
	}
}

// sent reports whether the success of pure step id is on its way to the store.
func (s *sim) sent(id string) bool {
	for _, c := range s.commits {
		if s.pure && c.Record.StepId == id && c.Record.Status == messages.StepSucceeded && s.ix.steps[s.ix.pos[id]].Uses == "echo" {
			return true
		}
	}
	return false
}

// checkEnd compares the finalized status with the records.
func (s *sim) checkEnd() {
	counts := map[string]int{}
	for _, id := range s.ix.ids {
		st := messages.StepPending
		if r := s.records[id]; r != nil {
			st = r.Status
		}
		counts[st]++
	}
	switch s.runStatus {
	case RunSucceeded:
		if counts[messages.StepSucceeded] != len(s.ix.ids) {
			s.t.Fatalf("succeeded with records %v", counts)
		}
	case RunFailed:
		if counts[messages.StepFailed] == 0 || counts[messages.StepPending] > 0 {
			s.t.Fatalf("failed with records %v", counts)
		}
	case RunCancelled:
		if !s.cancelled {
			s.t.Fatal("cancelled without a cancel")
		}
	default:
		s.t.Fatalf("ended as %v", s.runStatus)
	}
}
