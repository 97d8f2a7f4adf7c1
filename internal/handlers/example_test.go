package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/dairuntime/dair/internal/handlers"
	"github.com/dairuntime/dair/internal/step"
)

func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if _, err := fmt.Fprintf(w, `{"key":%q}`, r.Header.Get("Idempotency-Key")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	defer srv.Close()

	reg := step.NewRegistry()
	if err := handlers.Register(reg, handlers.Options{}); err != nil {
		fmt.Println("register:", err)
		return
	}
	h, ok := reg.Get("http")
	if !ok {
		fmt.Println("http handler missing")
		return
	}
	res, err := h.Run(context.Background(), &step.Request{
		ExecutionID:    "exec-1",
		StepID:         "fetch",
		Attempt:        1,
		IdempotencyKey: "exec-1/fetch",
		With:           map[string]any{"url": srv.URL + "/doc"},
	})
	if err != nil {
		fmt.Println("run:", err)
		return
	}
	out, ok := res.Output.(map[string]any)
	if !ok {
		fmt.Printf("unexpected output %T\n", res.Output)
		return
	}
	fmt.Println(out["status"], out["json"])
	// Output: 200 map[key:exec-1/fetch]
}
