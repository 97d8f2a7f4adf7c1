package testkit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dairuntime/dair/testkit"
)

func ExampleWaitFor() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	polls := 0
	err := testkit.WaitFor(ctx, time.Millisecond, func() (bool, error) {
		polls++
		return polls == 3, nil
	})
	fmt.Println(polls, err)
	// Output: 3 <nil>
}
