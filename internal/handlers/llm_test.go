package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/dairuntime/dair/internal/step"
)

// fakeOpenAI is a minimal OpenAI Chat Completions server. It validates the request shape and
// answers with a completion whose content echoes the last message, or with an error envelope
// when the model name is "status-<code>".
type fakeOpenAI struct {
	t    *testing.T
	key  string
	reqs chan map[string]any
	hdrs chan http.Header
}

func newFakeOpenAI(t *testing.T, key string) (*httptest.Server, *fakeOpenAI) {
	t.Helper()
	f := &fakeOpenAI{t: t, key: key, reqs: make(chan map[string]any, 16), hdrs: make(chan http.Header, 16)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv, f
}

func (f *fakeOpenAI) writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		f.t.Errorf("encode: %v", err)
	}
}

func (f *fakeOpenAI) fail(w http.ResponseWriter, code int, msg string) {
	f.writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.fail(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if f.key != "" && r.Header.Get("Authorization") != "Bearer "+f.key {
		f.fail(w, http.StatusUnauthorized, "Incorrect API key provided")
		return
	}
	if r.Header.Get("Content-Type") != "application/json" {
		f.fail(w, http.StatusBadRequest, "content type must be json")
		return
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		f.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		f.fail(w, http.StatusBadRequest, "bad json")
		return
	}
	f.reqs <- body
	f.hdrs <- r.Header.Clone()
	model, _ := body["model"].(string)
	msgs, _ := body["messages"].([]any)
	if model == "" || len(msgs) == 0 {
		f.fail(w, http.StatusBadRequest, "model and messages are required")
		return
	}
	switch model {
	case "status-429":
		f.fail(w, http.StatusTooManyRequests, "Rate limit reached")
		return
	case "status-500":
		f.writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{"message": "server exploded"}})
		return
	case "status-400":
		f.fail(w, http.StatusBadRequest, "Invalid model")
		return
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		if _, err := io.WriteString(w, "not json"); err != nil {
			f.t.Errorf("write: %v", err)
		}
		return
	case "empty":
		f.writeJSON(w, http.StatusOK, map[string]any{"model": model, "choices": []any{}})
		return
	}
	last, _ := msgs[len(msgs)-1].(map[string]any)
	f.writeJSON(w, http.StatusOK, map[string]any{
		"id":      "chatcmpl-1",
		"object":  "chat.completion",
		"model":   model + "-2025",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "re: " + last["content"].(string)}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
	})
}

func TestLLMChat_Run_success(t *testing.T) {
	srv, fake := newFakeOpenAI(t, "sk-test")
	h := LLMChat(Options{LLMAPIKey: "sk-test"})
	base := srv.URL + "/v1/"
	cases := []struct {
		name     string
		with     map[string]any
		wantMsgs []any
		extra    map[string]any
		content  string
	}{
		{
			name:     "prompt",
			with:     map[string]any{"base_url": base, "model": "m", "prompt": "hi"},
			wantMsgs: []any{map[string]any{"role": "user", "content": "hi"}},
			content:  "re: hi",
		},
		{
			name: "prompt with system and params",
			with: map[string]any{"base_url": base, "model": "m", "prompt": "hi", "system": "be brief",
				"temperature": json.Number("0.2"), "max_tokens": 64},
			wantMsgs: []any{map[string]any{"role": "system", "content": "be brief"},
				map[string]any{"role": "user", "content": "hi"}},
			extra:   map[string]any{"temperature": 0.2, "max_tokens": 64.0},
			content: "re: hi",
		},
		{
			name: "messages",
			with: map[string]any{"base_url": base, "model": "m", "messages": []any{
				map[string]any{"role": "system", "content": "s"},
				map[string]any{"role": "user", "content": "q"},
			}},
			wantMsgs: []any{map[string]any{"role": "system", "content": "s"},
				map[string]any{"role": "user", "content": "q"}},
			content: "re: q",
		},
		{
			name: "typed messages",
			with: map[string]any{"base_url": base, "model": "m", "messages": []map[string]string{
				{"role": "user", "content": "typed"},
			}},
			wantMsgs: []any{map[string]any{"role": "user", "content": "typed"}},
			content:  "re: typed",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(context.Background(), h, 1, tc.with)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			body := <-fake.reqs
			hdr := <-fake.hdrs
			if hdr.Get("Idempotency-Key") != "exec-1/s1" {
				t.Fatalf("Idempotency-Key = %q", hdr.Get("Idempotency-Key"))
			}
			if body["model"] != "m" || !reflect.DeepEqual(body["messages"], tc.wantMsgs) {
				t.Fatalf("request body = %#v", body)
			}
			for _, k := range []string{"temperature", "max_tokens"} {
				if got, want := body[k], tc.extra[k]; !reflect.DeepEqual(got, want) {
					t.Fatalf("%s = %#v, want %#v", k, got, want)
				}
			}
			want := map[string]any{
				"content": tc.content, "model": "m-2025", "finish_reason": "stop",
				"usage": map[string]any{"prompt_tokens": int64(11), "completion_tokens": int64(7), "total_tokens": int64(18)},
			}
			if !reflect.DeepEqual(res.Output, want) {
				t.Fatalf("output = %#v\nwant %#v", res.Output, want)
			}
			if res.Usage != (step.Usage{PromptTokens: 11, CompletionTokens: 7}) {
				t.Fatalf("usage = %+v", res.Usage)
			}
		})
	}
}

func TestLLMChat_Run_apiKeyFromEnv(t *testing.T) {
	srv, fake := newFakeOpenAI(t, "sk-env")
	t.Setenv(LLMAPIKeyEnv, "sk-env")
	cases := []struct {
		name    string
		opts    Options
		wantErr bool
	}{
		{"env key", Options{}, false},
		{"option overrides env", Options{LLMAPIKey: "sk-wrong"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(context.Background(), LLMChat(tc.opts), 1,
				map[string]any{"base_url": srv.URL + "/v1", "model": "m", "prompt": "x"})
			if tc.wantErr {
				if !step.IsPermanent(err) || !strings.Contains(err.Error(), "Incorrect API key provided") {
					t.Fatalf("want permanent auth error, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			<-fake.reqs
			<-fake.hdrs
		})
	}
}

func TestLLMChat_Run_errors(t *testing.T) {
	srv, _ := newFakeOpenAI(t, "")
	base := srv.URL + "/v1"
	h := LLMChat(Options{})
	cases := []struct {
		name      string
		with      map[string]any
		is        error
		permanent bool
		mention   string
	}{
		{"429 retryable", map[string]any{"base_url": base, "model": "status-429", "prompt": "x"}, ErrStatus, false, "Rate limit reached"},
		{"500 retryable", map[string]any{"base_url": base, "model": "status-500", "prompt": "x"}, ErrStatus, false, "server exploded"},
		{"400 permanent", map[string]any{"base_url": base, "model": "status-400", "prompt": "x"}, ErrStatus, true, "Invalid model"},
		{"404 permanent", map[string]any{"base_url": srv.URL + "/nope", "model": "m", "prompt": "x"}, ErrStatus, true, "404"},
		{"garbage body", map[string]any{"base_url": base, "model": "garbage", "prompt": "x"}, ErrBadResponse, false, "decode"},
		{"no choices", map[string]any{"base_url": base, "model": "empty", "prompt": "x"}, ErrBadResponse, false, "no choices"},
		{"missing model", map[string]any{"base_url": base, "prompt": "x"}, ErrInvalidArgument, true, "model"},
		{"no messages", map[string]any{"base_url": base, "model": "m"}, ErrInvalidArgument, true, "no messages"},
		{"empty messages", map[string]any{"base_url": base, "model": "m", "messages": []any{}}, ErrInvalidArgument, true, "no messages"},
		{"message without role", map[string]any{"base_url": base, "model": "m",
			"messages": []any{map[string]any{"content": "x"}}}, ErrInvalidArgument, true, "role"},
		{"messages not list", map[string]any{"base_url": base, "model": "m", "messages": "x"}, ErrInvalidArgument, true, "list"},
		{"bad temperature", map[string]any{"base_url": base, "model": "m", "prompt": "x", "temperature": "hot"}, ErrInvalidArgument, true, "temperature"},
		{"bad max_tokens", map[string]any{"base_url": base, "model": "m", "prompt": "x", "max_tokens": 0}, ErrInvalidArgument, true, "max_tokens"},
		{"bad base_url", map[string]any{"base_url": "file:///etc", "model": "m", "prompt": "x"}, ErrInvalidArgument, true, "scheme"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(context.Background(), h, 1, tc.with)
			if !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			if step.IsPermanent(err) != tc.permanent {
				t.Fatalf("permanent = %v, want %v (err %v)", step.IsPermanent(err), tc.permanent, err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("err %q does not mention %q", err, tc.mention)
			}
		})
	}
}
