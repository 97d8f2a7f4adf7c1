package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStdioGuard: lines that are not JSON-RPC messages are answered with an error and the
// session goes on; the requests read before the end of input are all answered before the
// server returns.
func TestStdioGuard(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{bad json`,
		`"a string"`,
		``,
		`[1,2]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"two","method":"no/such/method"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := serveGuarded(ctx, New(Config{Server: "http://127.0.0.1:1"}), strings.NewReader(in), &out); err != nil {
		t.Fatalf("serve: %v", err)
	}
	answered := map[string]bool{}
	codes := map[float64]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code float64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		if string(m.ID) == "null" && m.Error != nil {
			codes[m.Error.Code]++
			continue
		}
		answered[string(m.ID)] = true
	}
	if codes[-32700] != 1 || codes[-32600] != 2 {
		t.Fatalf("error answers %v, want one parse error and two invalid requests; output:\n%s", codes, out.String())
	}
	for _, id := range []string{`0`, `1`, `"two"`} {
		if !answered[id] {
			t.Fatalf("request %s unanswered; output:\n%s", id, out.String())
		}
	}
}
