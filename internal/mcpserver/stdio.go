package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// drainWait bounds how long, once stdin has ended, the server still answers the requests it
// read before it.
const drainWait = 30 * time.Second

// stdioGuard stands between stdin/stdout and the SDK's newline-delimited JSON-RPC connection.
// The SDK ends the whole session at a line that is not a JSON-RPC message (and answers
// nothing it still owed), and at end of input it stops before answering the requests it read:
// the guard answers a line that is not JSON with a parse error (-32700) and one that is not an
// object with an invalid request (-32600), passes neither on, and holds the end of input until
// every request it passed on has its answer (or drainWait passed).
type stdioGuard struct {
	in  *bufio.Reader
	out io.Writer

	mu      sync.Mutex // guards the fields below and writes to out
	buf     []byte     // a line the SDK has begun to write
	pending map[string]int
	cond    *sync.Cond

	next []byte // the rest of a line being passed on
}

func newStdioGuard(in io.Reader, out io.Writer) *stdioGuard {
	g := &stdioGuard{in: bufio.NewReaderSize(in, 64<<10), out: out, pending: map[string]int{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// transport is the SDK transport over the guard.
func (g *stdioGuard) transport() mcp.Transport {
	return &mcp.IOTransport{Reader: guardReader{g}, Writer: guardWriter{g}}
}

type guardReader struct{ g *stdioGuard }
type guardWriter struct{ g *stdioGuard }

func (r guardReader) Close() error { return nil }
func (w guardWriter) Close() error { return nil }

// Read passes on the next acceptable line.
func (r guardReader) Read(p []byte) (int, error) {
	g := r.g
	for len(g.next) == 0 {
		line, err := g.in.ReadBytes('\n')
		if len(line) > 0 {
			g.take(bytes.TrimSpace(line))
		}
		if err != nil && len(g.next) == 0 {
			if errors.Is(err, io.EOF) {
				g.drain()
			}
			return 0, err
		}
	}
	n := copy(p, g.next)
	g.next = g.next[n:]
	return n, nil
}

// message is what the guard reads of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// take answers a bad line or queues a good one, counting it when it is a request.
func (g *stdioGuard) take(line []byte) {
	switch {
	case len(line) == 0:
		return
	case !json.Valid(line):
		g.reply(-32700, "parse error: the line is not JSON")
		return
	case line[0] != '{':
		g.reply(-32600, "invalid request: a message is a JSON object (batches are not supported)")
		return
	}
	var m message
	if json.Unmarshal(line, &m) != nil {
		g.reply(-32600, "invalid request: the object is not a JSON-RPC message")
		return
	}
	if m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" {
		g.mu.Lock()
		g.pending[string(m.ID)]++
		g.mu.Unlock()
	}
	g.next = append(append(g.next[:0], line...), '\n')
}

// reply writes a JSON-RPC error without an id.
func (g *stdioGuard) reply(code int, msg string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	g.mu.Lock()
	defer g.mu.Unlock()
	_, _ = g.out.Write(append(b, '\n'))
}

// drain waits until every request passed on has been answered, or drainWait.
func (g *stdioGuard) drain() {
	deadline := time.AfterFunc(drainWait, func() {
		g.mu.Lock()
		g.pending = map[string]int{}
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer deadline.Stop()
	g.mu.Lock()
	for len(g.pending) > 0 {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

// Write writes the SDK's output line by line, counting the answers.
func (w guardWriter) Write(p []byte) (int, error) {
	g := w.g
	g.mu.Lock()
	defer g.mu.Unlock()
	g.buf = append(g.buf, p...)
	for {
		i := bytes.IndexByte(g.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := g.buf[:i+1]
		if _, err := g.out.Write(line); err != nil {
			return 0, err
		}
		var m message
		if json.Unmarshal(line, &m) == nil && m.Method == "" && len(m.ID) > 0 && (m.Result != nil || m.Error != nil) {
			if n := g.pending[string(m.ID)]; n > 1 {
				g.pending[string(m.ID)] = n - 1
			} else if n == 1 {
				delete(g.pending, string(m.ID))
				g.cond.Broadcast()
			}
		}
		g.buf = g.buf[i+1:]
	}
}

// serveGuarded runs s over in and out through a stdioGuard.
func serveGuarded(ctx context.Context, s *mcp.Server, in io.Reader, out io.Writer) error {
	return s.Run(ctx, newStdioGuard(in, out).transport())
}
