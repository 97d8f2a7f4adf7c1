// Package client is a small typed client of the dair HTTP API (CONTRACT.md, "HTTP API"). It
// sends and decodes the wire types of package httpapi and turns every non-2xx answer into an
// *Error carrying the status and the server's error code and message. It depends on nothing of
// the runtime, so programs and tests outside this module (see package testkit) can drive a
// node with it.
//
// # Usage
//
//	c := client.New("http://127.0.0.1:8080", os.Getenv("DAIR_TOKEN"))
//	sub, err := c.Submit(ctx, httpapi.SubmitRequest{Pipeline: "hello", TenantID: "acme"})
//	if err != nil {
//		var ce *client.Error
//		if errors.As(err, &ce) && ce.Status == http.StatusNotFound { ... }
//	}
//	run, err := c.Follow(ctx, sub.SharedRunID, func(id int64, kind string, data []byte) error {
//		fmt.Println(kind) // data is an httpapi.LedgerEntry
//		return nil
//	})
//
// A Client is safe for concurrent use. Every method blocks on one HTTP exchange (Follow on
// a stream) and honours ctx.
package client
