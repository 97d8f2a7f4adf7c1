package server_test

import (
	"errors"
	"fmt"

	"github.com/dairuntime/dair/internal/server"
)

func ExampleOptions_Validate() {
	opts := server.DevOptions()
	opts.HTTPAddr = "0.0.0.0:8080" // with --auth none a node serves on loopback only
	err := opts.Validate()
	fmt.Println(errors.Is(err, server.ErrInvalidOptions))

	opts = server.DefaultOptions()
	opts.StoreURL = "bolt://./.dair/dair.db"
	opts.Join = []string{"10.0.0.2:7946"}
	fmt.Println(opts.Validate())
	// Output:
	// true
	// server: invalid options: a file store cannot be shared; use --store redis://HOST:PORT/DB with --join
}
