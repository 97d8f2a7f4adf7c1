package main

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
)

// hintFor returns the next step to suggest for a failed command, or "" when there is none:
// what to list after a not-found, how to start a node when none answers, how to pass a token.
// cmdPath is the failed command's path ("dair runs get"); server is the --server address.
func hintFor(err error, cmdPath, server string) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return apiHint(ce, cmdPath)
	}
	if unreachable(err) && !serving(cmdPath) {
		return "is a node running at " + server + `? start one with "dair dev" (or pass --server URL)`
	}
	return ""
}

// serving reports whether cmdPath is a command that serves rather than calls a node: its
// connection errors are about its own store or peers, not about --server.
func serving(cmdPath string) bool {
	switch cmdPath {
	case "dair dev", "dair node", "dair standin", "dair demo", "dair chaos":
		return true
	}
	return false
}

// apiHint is hintFor for an error answer of the API.
func apiHint(ce *client.Error, cmdPath string) string {
	switch {
	case ce.Code == httpapi.CodeUnknownPipeline:
		return `run "dair pipelines list" to see the stored pipelines, or "dair pipelines put FILE" to add one`
	case ce.Status == http.StatusUnauthorized:
		return `pass --token (or set DAIR_TOKEN); "dair token" mints a development token`
	case ce.Status == http.StatusForbidden:
		return "the token's tenant or roles do not allow this"
	case ce.Status != http.StatusNotFound:
		return ""
	}
	for _, c := range []struct{ prefix, list string }{
		{"dair runs", `run "dair runs list" to see recent runs`},
		{"dair executions", `run "dair runs list" to see recent runs; a run's execution_id is in "dair runs get ID"`},
		{"dair pipelines", `run "dair pipelines list" to see the stored pipelines`},
		{"dair tenants", `run "dair tenants list" to see the tenants that were put, or "dair tenants put ID --isolation shared"`},
		{"dair instances", `run "dair instances list" to see the runtime instances`},
		{"dair cluster", `cluster commands need a node started with "dair node" (dair dev runs a single node)`},
	} {
		if strings.HasPrefix(cmdPath, c.prefix) {
			return c.list
		}
	}
	return ""
}

// unreachable reports whether err says no server answered at the address: refused, no such
// host, or a dial timeout.
func unreachable(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// internalPrefixes are the "name: " prefixes of this module's packages that start error
// messages; a user reads the message without them ("invalid options: ..." rather than
// "server: invalid options: ..."). The documented "api: " and "dag: " forms stay.
var internalPrefixes = []string{"server: ", "mcpserver: ", "auth: ", "client: ", "actors: ",
	"boltstore: ", "redisstore: ", "store: "}

// withoutPackagePrefix removes the leading internal package prefixes of msg.
func withoutPackagePrefix(msg string) string {
	for stripped := true; stripped; {
		stripped = false
		for _, p := range internalPrefixes {
			if rest, ok := strings.CutPrefix(msg, p); ok {
				msg, stripped = rest, true
			}
		}
	}
	return msg
}
