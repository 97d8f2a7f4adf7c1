package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/dairuntime/dair/client"
)

func ExampleClient_GetRun_notFound() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"code":"not_found","message":"no run r1"}}`)
	}))
	defer srv.Close()

	_, err := client.New(srv.URL, "").GetRun(context.Background(), "r1")
	var ce *client.Error
	if errors.As(err, &ce) {
		fmt.Println(ce.Status, ce.Code, ce.Message)
	}
	// Output:
	// 404 not_found no run r1
}
