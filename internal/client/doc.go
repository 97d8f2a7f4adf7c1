// Package client is a small typed client of the dair HTTP API (CONTRACT.md, "HTTP API"). It
// decodes answers into the JSON views of package api and turns every non-2xx answer into an
// *Error carrying the status and the server's error code and message.
//
// # Usage
//
//	c := client.New("http://127.0.0.1:8080", os.Getenv("DAIR_TOKEN"))
//	sub, err := c.Submit(ctx, api.SubmitRequest{Pipeline: "hello", TenantID: "acme"})
//	if err != nil {
//		var ce *client.Error
//		if errors.As(err, &ce) && ce.Status == http.StatusNotFound { ... }
//	}
//	run, err := c.Follow(ctx, sub.SharedRunID, func(e client.Event) error {
//		fmt.Println(e.Kind)
//		return nil
//	})
//
// A Client is safe for concurrent use. Every method blocks on one HTTP exchange (Follow on
// a stream) and honours ctx.
package client
