package chaos_test

import (
	"fmt"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/chaos"
)

// A seed fixes the fault schedule: print it to know what a run will do.
func ExampleNewSchedule() {
	s, err := chaos.NewSchedule(1, chaos.AllFaults, 3, 25*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(s)
	// Output:
	// fault schedule (seed 1): 4 faults in 25s
	//   +3.4s    kill           busiest  held 2.8s
	//   +9.1s    pause          n2       held 2.8s
	//   +14.1s   redis-restart  redis    held 2.8s
	//   +20.2s   partition      n3       held 2.1s
}

// The properties are judged over plain values: here a step committed twice.
func ExampleCheckNoDoubleCommit() {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	run := chaos.RunEvidence{ID: "r1", ExecutionID: "x1", Ledger: []httpapi.LedgerEntry{
		{Seq: 4, At: at, Kind: "step_succeeded", ExecutionID: "x1", StepID: "a", Epoch: 1},
		{Seq: 9, At: at.Add(time.Second), Kind: "step_succeeded", ExecutionID: "x1", StepID: "a", Epoch: 2},
	}}
	p := chaos.CheckNoDoubleCommit([]chaos.RunEvidence{run}, nil, nil, nil)
	fmt.Println(p.Held, p.Violations[0])
	// Output:
	// false run r1 step a: 2 step_succeeded entries (seq 4, 9)
}
