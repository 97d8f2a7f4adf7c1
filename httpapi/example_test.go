package httpapi_test

import (
	"encoding/json"
	"fmt"

	"github.com/dairuntime/dair/httpapi"
)

// Encode a submission and decode the answers a node sends back.
func Example() {
	body, err := json.Marshal(httpapi.SubmitRequest{Pipeline: "hello", TenantID: "acme", Input: json.RawMessage(`{"n":1}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(body))

	var sub httpapi.SubmitResponse
	if err := json.Unmarshal([]byte(`{"shared_run_id":"run-1","status":"queued"}`), &sub); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sub.SharedRunID, sub.Status)

	var eb httpapi.ErrorBody
	if err := json.Unmarshal([]byte(`{"error":{"code":"not_found","message":"no run run-2"}}`), &eb); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(eb.Error.Code == httpapi.CodeNotFound, eb.Error.Message)
	// Output:
	// {"pipeline":"hello","tenant_id":"acme","input":{"n":1}}
	// run-1 queued
	// true no run run-2
}
