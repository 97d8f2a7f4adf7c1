// Package httpapi holds the wire types of the dair HTTP API (CONTRACT.md, "HTTP API", prefix
// /v1): the JSON request bodies, the answers and the error body with its codes. The server
// (internal/api) encodes these types and clients decode them, so the field names are the
// contract and never change; new fields are only added.
//
// The package imports only the standard library: a program that talks to a node over HTTP
// (the dair CLI, package client, a user's own tool or test) depends on nothing of the runtime.
// Times are RFC 3339 UTC; run input and output, step output and ledger data are raw JSON.
//
// # Usage
//
//	body, err := json.Marshal(httpapi.SubmitRequest{Pipeline: "hello", TenantID: "acme"})
//	// POST body to /v1/runs; a 202 answer decodes into httpapi.SubmitResponse:
//	var sub httpapi.SubmitResponse
//	err = json.NewDecoder(resp.Body).Decode(&sub)
//	// a 4xx/5xx answer decodes into httpapi.ErrorBody; eb.Error.Code is one of the Code constants.
package httpapi
