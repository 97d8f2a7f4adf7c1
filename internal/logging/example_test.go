package logging_test

import (
	"fmt"
	"os"

	"github.com/dairuntime/dair/internal/logging"
)

func ExampleNew() {
	_, err := logging.New(logging.Config{Level: "verbose"})
	fmt.Println(err)
	l, err := logging.New(logging.Config{Level: "info", Format: "json", Output: os.Stdout})
	if err != nil {
		fmt.Println(err)
		return
	}
	l.Debug("not printed")
	fmt.Println(l.Core().Enabled(-1))
	// Output:
	// logging: unknown level "verbose"
	// false
}
