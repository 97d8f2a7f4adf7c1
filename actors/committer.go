package actors

import (
	"github.com/dairuntime/dair/internal/ledger"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/messages"
)

// commitReq is one fenced commit, or (when ledger is set) an unfenced ledger append, and the
// callback that receives its outcome (called once, from a committer goroutine; it must not
// block).
type commitReq struct {
	c      store.StepCommit
	ledger []*messages.LedgerEntry
	run    string
	// async: nothing waits for the commit (a pure step's success, engine.Commit.Async).
	async bool
	done  func(error)
}

// committer is the node's ledger.Committer as the execution actors use it.
type committer struct{ *ledger.Committer }

// submit hands a commit to its shard. It blocks only while the shard's buffer is full, and
// reports false (done is then never called) once the node is stopping.
func (c *committer) submit(r commitReq) bool {
	return c.Submit(ledger.Request{Commit: r.c, Ledger: r.ledger, Run: r.run, Async: r.async, Done: r.done})
}
