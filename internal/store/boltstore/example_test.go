package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/messages"
)

func Example() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Println(err)
		}
	}()
	st, err := boltstore.Open(boltstore.Options{Path: filepath.Join(dir, "dair.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := st.Close(); err != nil {
			fmt.Println(err)
		}
	}()
	ctx := context.Background()
	run, created, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r1", TenantId: "t1", IdempotencyKey: "k"})
	if err != nil {
		fmt.Println(err)
		return
	}
	again, createdAgain, err := st.CreateRun(ctx, &messages.SharedRun{SharedRunId: "r2", TenantId: "t1", IdempotencyKey: "k"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(run.GetSharedRunId(), created, again.GetSharedRunId(), createdAgain)
	// Output: r1 true r1 false
}
