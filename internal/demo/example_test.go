package demo_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/dairuntime/dair/internal/demo"
)

// ExampleRun plays the whole scenario into stdout. It is not run by go test (its output
// holds ids and timings); TestRun_Run_scenario runs it.
func ExampleRun() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := demo.Run(ctx, demo.Options{Out: os.Stdout}); err != nil {
		fmt.Println("demo failed:", err)
	}
}
