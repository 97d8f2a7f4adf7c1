// Package server wires one dair node from its serving options: it opens the store, starts the
// actor node, loads the pipeline directory, serves the HTTP API and shuts everything down in
// order when its context ends. The dair binary's serving commands (dev, node) are thin
// wrappers over Run.
//
// # Usage
//
//	opts := server.DevOptions()
//	opts.DataDir = "./.dair"
//	opts.HTTPAddr = "127.0.0.1:8080"
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	if err := server.Run(ctx, opts); err != nil {
//		// errors.Is(err, server.ErrInvalidOptions) or server.ErrBadPipeline: bad usage
//	}
//
// Store URLs are bolt://PATH (the embedded single-node store) and redis://HOST:PORT/DB; see
// OpenStore.
package server
