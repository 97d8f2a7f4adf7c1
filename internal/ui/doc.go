// Package ui is the dair web dashboard: a single-page application of plain HTML, CSS and
// JavaScript modules, embedded in the binary and served by every node at /ui/.
//
// The dashboard is a client of the HTTP API (package api) and nothing more: it shows tenants
// with their settings, usage and state, runtime instances with their capacity, runs with
// filters and live updates, a run's DAG coloured by step status and updated from the run's
// event stream, the run's trace on a time axis, its ledger, a replay with its divergence
// report, and the cluster members. The page itself is public; every data call carries the
// bearer token the user pasted into the page (kept in sessionStorage), so the page shows only
// what that token may see. Nothing is fetched from outside the node at run time.
//
// # Usage
//
//	mux := http.NewServeMux()
//	mux.Handle("GET /ui/", ui.Handler())
//	mux.Handle("GET /{$}", ui.Handler()) // browsers asking for / are sent to /ui/
//
// Handler answers GET and HEAD of /ui/ (the application) and of its assets under /ui/. A
// request for / or /ui from a browser (one that accepts text/html) is redirected to /ui/;
// any other request it cannot answer gets the API's JSON 404 body.
package ui
