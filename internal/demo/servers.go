package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// localServer is an HTTP server on a free 127.0.0.1 port, served by one tracked goroutine.
type localServer struct {
	url  string
	srv  *http.Server
	done chan error
}

// startLocal serves h on 127.0.0.1 on a port chosen by the kernel.
func startLocal(h http.Handler) (*localServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: listen on 127.0.0.1: %w", err)
	}
	s := &localServer{url: "http://" + ln.Addr().String(), done: make(chan error, 1),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// close shuts the server down, waiting up to two seconds for open requests.
func (s *localServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	return errors.Join(err, <-s.done)
}

// standInModel answers POST /chat/completions like an OpenAI-compatible server, with a
// deterministic completion derived from the last user message, and counts its calls.
type standInModel struct {
	mu    sync.Mutex // guards calls
	calls int
}

// chatIn is the part of a chat completion request the stand-in reads.
type chatIn struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
}

func (m *standInModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	var in chatIn
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	prompt := ""
	words := 0
	for _, msg := range in.Messages {
		s, ok := msg.Content.(string)
		if !ok {
			continue
		}
		words += len(strings.Fields(s))
		if msg.Role == "user" {
			prompt = s
		}
	}
	first, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if len(first) > 60 {
		first = first[:60] + "..."
	}
	content := fmt.Sprintf("[stand-in %s] notes on %q: 1) context 2) key facts 3) trade-offs 4) open questions 5) next steps.",
		in.Model, first)
	completion := len(strings.Fields(content))
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(map[string]any{
		"id":      "chatcmpl-demo",
		"object":  "chat.completion",
		"model":   in.Model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": words, "completion_tokens": completion, "total_tokens": words + completion},
	}); err != nil {
		http.Error(w, "encode", http.StatusInternalServerError)
	}
}

// callCount returns how many completions the stand-in served.
func (m *standInModel) callCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// flakyEndpoint fails the first request of each Idempotency-Key with 503 and answers later
// ones with a small JSON document, so a retrying client succeeds on its second attempt.
type flakyEndpoint struct {
	mu   sync.Mutex // guards seen
	seen map[string]int
}

func (f *flakyEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	f.seen[key]++
	n := f.seen[key]
	f.mu.Unlock()
	if n == 1 {
		http.Error(w, "warming up, try again", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(map[string]any{"quote": "durable beats fast", "served_on_attempt": n}); err != nil {
		http.Error(w, "encode", http.StatusInternalServerError)
	}
}
