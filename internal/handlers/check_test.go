package handlers

import (
	"strings"
	"testing"

	"github.com/dairuntime/dair/internal/step"
)

// The registry's check of sleep, fail, http and llm.chat when a pipeline is stored: one row
// per rule; a templated value passes, and the message is the run's, without its prefix.
func TestHandlers_CheckWith(t *testing.T) {
	reg := step.NewRegistry()
	if err := Register(reg, Options{}); err != nil {
		t.Fatal(err)
	}
	chat := func(kv ...any) map[string]any {
		w := map[string]any{"model": "m", "prompt": "hi"}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(w, kv[i].(string))
				continue
			}
			w[kv[i].(string)] = kv[i+1]
		}
		return w
	}
	tests := []struct {
		name, uses string
		with       map[string]any
		field      string
		want       string // "" = accepted, else a part of the message
	}{
		{"sleep", NameSleep, map[string]any{"duration": "250ms"}, "", ""},
		{"sleep in ms", NameSleep, map[string]any{"duration": 20}, "", ""},
		{"sleep without duration", NameSleep, map[string]any{}, "", ""},
		{"sleep templated", NameSleep, map[string]any{"duration": "{{ .input.d }}"}, "", ""},
		{"sleep bad duration", NameSleep, map[string]any{"duration": "abc"}, "duration", "duration must be a Go duration or milliseconds, got abc"},
		{"sleep negative", NameSleep, map[string]any{"duration": "-1s"}, "duration", "negative duration -1s"},
		{"sleep unknown field", NameSleep, map[string]any{"durration": "1s"}, "durration", `unknown field "durration"`},
		{"fail", NameFail, map[string]any{"times": 2, "message": "m", "permanent": true}, "", ""},
		{"fail times as text", NameFail, map[string]any{"times": "3"}, "", ""},
		{"fail templated", NameFail, map[string]any{"times": "{{ .input.n }}", "message": "{{ .input.m }}"}, "", ""},
		{"fail negative times", NameFail, map[string]any{"times": -1}, "", "times must be a non-negative integer"},
		{"fail message not text", NameFail, map[string]any{"message": 3}, "", "message must be a string"},
		{"fail permanent not a bool", NameFail, map[string]any{"permanent": "maybe"}, "", "permanent must be a bool"},
		{"fail unknown field", NameFail, map[string]any{"time": 1}, "time", `unknown field "time"`},
		{"http", NameHTTP, map[string]any{"url": "http://127.0.0.1:1/x", "method": "post", "headers": map[string]any{"X-A": "b"}, "body": map[string]any{"k": 1}}, "", ""},
		{"http templated url and header", NameHTTP, map[string]any{"url": "{{ .input.url }}", "headers": map[string]any{"X-A": "{{ .input.h }}"}}, "", ""},
		{"http templated headers", NameHTTP, map[string]any{"url": "https://example.test", "headers": "{{ .input.headers }}"}, "", ""},
		{"http without url", NameHTTP, map[string]any{"method": "GET"}, "url", "url is required"},
		{"http url not http", NameHTTP, map[string]any{"url": "ftp://h/x"}, "url", `url scheme must be http or https, got "ftp"`},
		{"http url without host", NameHTTP, map[string]any{"url": "http:///x"}, "url", "has no host"},
		{"http url not text", NameHTTP, map[string]any{"url": 5}, "url", "url must be a string"},
		{"http bad method", NameHTTP, map[string]any{"url": "http://h", "method": "GE T"}, "method", "method must be an HTTP method"},
		{"http headers not a map", NameHTTP, map[string]any{"url": "http://h", "headers": "X-A: b"}, "headers", "headers must be a map"},
		{"http bad header name", NameHTTP, map[string]any{"url": "http://h", "headers": map[string]any{"X A": "b"}}, "headers", `invalid header name "X A"`},
		{"http bad header value", NameHTTP, map[string]any{"url": "http://h", "headers": map[string]any{"X-A": "b\r\nc"}}, "headers", `invalid value for header "X-A"`},
		{"http unknown field", NameHTTP, map[string]any{"url": "http://h", "json": 1}, "json", `unknown field "json"`},
		{"llm.chat", NameLLMChat, chat("system", "s", "temperature", 0.2, "max_tokens", 10), "", ""},
		{"llm.chat messages", NameLLMChat, chat("prompt", nil, "messages", []any{map[string]any{"role": "user", "content": "x"}}), "", ""},
		{"llm.chat templated model and prompt", NameLLMChat, chat("model", "{{ .input.m }}", "prompt", "{{ .input.q }}"), "", ""},
		{"llm.chat templated messages", NameLLMChat, chat("prompt", nil, "messages", "{{ .input.msgs }}"), "", ""},
		{"llm.chat templated base_url", NameLLMChat, chat("base_url", "{{ .input.base }}"), "", ""},
		{"llm.chat without model", NameLLMChat, chat("model", nil), "", "model is required"},
		{"llm.chat blank model", NameLLMChat, chat("model", "  "), "", "model is required"},
		{"llm.chat without messages", NameLLMChat, chat("prompt", nil), "", "no messages: set messages or prompt"},
		{"llm.chat message without role", NameLLMChat, chat("messages", []any{map[string]any{"content": "x"}}), "", "messages[0].role must be a non-empty string"},
		{"llm.chat messages not a list", NameLLMChat, chat("messages", map[string]any{"role": "user"}), "", "messages must be a list"},
		{"llm.chat negative temperature", NameLLMChat, chat("temperature", -1), "", "temperature must be a non-negative number"},
		{"llm.chat zero max_tokens", NameLLMChat, chat("max_tokens", 0), "", "max_tokens must be a positive integer"},
		{"llm.chat bad base_url", NameLLMChat, chat("base_url", "localhost:1"), "base_url", "url scheme must be http or https"},
		{"llm.chat unknown field", NameLLMChat, chat("top_p", 1), "top_p", `unknown field "top_p"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			field, err := reg.CheckWith(tt.uses, tt.with)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckWith = %q, %v; want accepted", field, err)
				}
				return
			}
			if err == nil || field != tt.field || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckWith = %q, %v; want field %q and %q", field, err, tt.field, tt.want)
			}
			if strings.Contains(err.Error(), "handlers:") {
				t.Fatalf("CheckWith = %v: the message keeps the run's prefix", err)
			}
		})
	}
}
