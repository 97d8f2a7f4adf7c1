// Package standin serves local stand-ins for the outside services of dair's example
// pipelines, so they run without network access or API keys: a small document for `http`
// steps and an OpenAI-compatible chat completions endpoint for `llm.chat` steps, answering
// deterministically. `dair standin` serves it; docs/handlers.md shows how to use it.
//
// # Usage
//
//	srv := httptest.NewServer(standin.Handler())
//	// http steps:     GET srv.URL + "/doc" (text) or "/doc.json" (JSON)
//	// llm.chat steps: DAIR_LLM_BASE_URL=srv.URL + "/v1"
package standin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Document is the text GET /doc answers.
const Document = "dair runs AI pipelines durably: every step result is committed under a fencing epoch, " +
	"a crashed execution resumes from its committed steps, and a run pins its pipeline's content hash.\n"

// Handler returns the stand-in's routes:
//
//	GET  /doc                  Document, as text/plain
//	GET  /doc.json             {"title", "body"} as JSON
//	POST /v1/chat/completions  an OpenAI-compatible chat completion (also /chat/completions)
//
// The completion's content is "[stand-in MODEL] " followed by the start of the last user
// message; usage counts words. It is safe for concurrent use.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /doc", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, Document)
	})
	mux.HandleFunc("GET /doc.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"title": "dair", "body": Document})
	})
	mux.HandleFunc("POST /v1/chat/completions", chat)
	mux.HandleFunc("POST /chat/completions", chat)
	return mux
}

// chatRequest is the part of a chat completion request the stand-in reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
}

func chat(w http.ResponseWriter, r *http.Request) {
	var in chatRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Model == "" || len(in.Messages) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
			"message": "want a JSON body with model and messages", "type": "invalid_request_error"}})
		return
	}
	prompt, words := "", 0
	for _, m := range in.Messages {
		s, ok := m.Content.(string)
		if !ok {
			continue
		}
		words += len(strings.Fields(s))
		if m.Role == "user" {
			prompt = s
		}
	}
	first := strings.Join(strings.Fields(prompt), " ")
	if len(first) > 80 {
		first = first[:80] + "..."
	}
	content := fmt.Sprintf("[stand-in %s] %s", in.Model, first)
	completion := len(strings.Fields(content))
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-standin", "object": "chat.completion", "model": in.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}},
		"usage": map[string]any{"prompt_tokens": words, "completion_tokens": completion, "total_tokens": words + completion},
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return // the client went away; nothing to report it to
	}
}
