package handlers

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/dairuntime/dair/internal/standin"
)

func TestLLMChat_Run_baseURLFromEnv(t *testing.T) {
	srv := httptest.NewServer(standin.Handler())
	t.Cleanup(srv.Close)
	t.Setenv(LLMBaseURLEnv, srv.URL+"/v1/")
	res, err := run(context.Background(), LLMChat(Options{}), 1, map[string]any{"model": "m", "prompt": "hello there"})
	if err != nil {
		t.Fatalf("llm.chat with DAIR_LLM_BASE_URL: %v", err)
	}
	out, ok := res.Output.(map[string]any)
	if !ok || out["content"] != "[stand-in m] hello there" {
		t.Fatalf("output = %#v", res.Output)
	}
	// with.base_url wins over the environment.
	t.Setenv(LLMBaseURLEnv, "http://127.0.0.1:1/v1")
	if _, err := run(context.Background(), LLMChat(Options{}), 1,
		map[string]any{"base_url": srv.URL + "/v1", "model": "m", "prompt": "x"}); err != nil {
		t.Fatalf("with.base_url over DAIR_LLM_BASE_URL: %v", err)
	}
}

func TestLLMBaseURL(t *testing.T) {
	t.Setenv(LLMBaseURLEnv, "")
	if got := llmBaseURL(" "); got != DefaultLLMBaseURL {
		t.Fatalf("default = %q", got)
	}
	t.Setenv(LLMBaseURLEnv, "http://h/v1/")
	if got := llmBaseURL(""); got != "http://h/v1" {
		t.Fatalf("env = %q", got)
	}
	if got := llmBaseURL("http://w/"); got != "http://w" {
		t.Fatalf("with = %q", got)
	}
}
