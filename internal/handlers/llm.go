package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/dairuntime/dair/internal/dag"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/dairuntime/dair/internal/step"
)

// chatMessage is one OpenAI chat message. Content is usually a string but may be a list of
// content parts, which is passed through untouched.
type chatMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	MaxTokens   *int64        `json:"max_tokens,omitempty"`
}

// chatUsage is the token accounting of a chat completion.
type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// apiError is the OpenAI error envelope's inner object.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// chatResponse is the part of a chat completion the handler reads.
type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage chatUsage `json:"usage"`
	Error *apiError `json:"error"`
}

// LLMChat returns the llm.chat handler, a client of OpenAI-compatible Chat Completions.
// `with` holds:
//
//   - base_url: default DAIR_LLM_BASE_URL, else DefaultLLMBaseURL; the request goes to
//     <base_url>/chat/completions.
//   - model: required.
//   - messages: list of {role, content}; and/or prompt (a user message appended last) with an
//     optional system (a system message put first). At least one message is required.
//   - temperature, max_tokens: optional numbers.
//
// The request carries `Authorization: Bearer <key>` when Options.LLMAPIKey or
// DAIR_LLM_API_KEY is set, `Idempotency-Key: <req.IdempotencyKey>` and the tenant headers
// x-tenant-id, x-org-id and x-user-id of the run's snapshot. The output is
// {"content", "model", "finish_reason", "usage": {"prompt_tokens", "completion_tokens",
// "total_tokens"}} and Result.Usage carries the token counts.
//
// Error answers surface the server's `error.message`. 408, 429, 5xx, transport errors and
// malformed 2xx answers are retryable; other statuses, a missing model, no messages and bad
// `with` values are step.Permanent. Run blocks until the answer is read or ctx is done; the
// handler is safe for concurrent use.
func LLMChat(opts Options) step.Handler {
	opts = opts.withDefaults()
	return step.Checked(step.HandlerFunc(func(ctx context.Context, req *step.Request) (step.Result, error) {
		return runLLMChat(ctx, opts, req)
	}), checkLLMChat)
}

// runLLMChat is one attempt of the llm.chat handler.
func runLLMChat(ctx context.Context, opts Options, req *step.Request) (step.Result, error) {
	u, err := chatURL(req.With)
	if err != nil {
		return step.Result{}, err
	}
	body, err := buildChatRequest(req.With)
	if err != nil {
		return step.Result{}, err
	}
	hreq, what, err := newChatHTTPRequest(ctx, opts, req, u, body)
	if err != nil {
		return step.Result{}, err
	}
	resp, err := send(ctx, opts.HTTPClient, hreq, opts.MaxBodyBytes, what)
	if err != nil {
		return step.Result{}, err
	}
	return chatResult(what, resp, body.Model)
}

// chatURL returns the chat completions endpoint of `with.base_url` (or the default base).
func chatURL(with map[string]any) (*url.URL, error) {
	base, err := optString(NameLLMChat, with, "base_url")
	if err != nil {
		return nil, err
	}
	return checkURL(NameLLMChat, llmBaseURL(base)+"/chat/completions")
}

// newChatHTTPRequest builds the POST of body to u, with the API key, idempotency key and
// tenant headers. what names the request in errors.
func newChatHTTPRequest(ctx context.Context, opts Options, req *step.Request, u *url.URL, body *chatRequest) (hreq *http.Request, what string, err error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, "", invalid(NameLLMChat, "encode request: %v", err)
	}
	what = fmt.Sprintf("llm.chat POST %s", u.Redacted())
	hreq, err = http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(raw))
	if err != nil {
		return nil, "", invalid(NameLLMChat, "build request %s: %v", what, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	key := opts.LLMAPIKey
	if key == "" {
		key = os.Getenv(LLMAPIKeyEnv)
	}
	if key != "" {
		hreq.Header.Set("Authorization", "Bearer "+key)
	}
	if req.IdempotencyKey != "" {
		hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	setTenantHeaders(hreq.Header, req.Snapshot)
	return hreq, what, nil
}

// chatResult turns a chat completion answer into the step's output; a non-2xx status, an
// undecodable body, an error object or no choices is an error. model is the requested model,
// reported when the answer names none.
func chatResult(what string, resp *response, model string) (step.Result, error) {
	var cr chatResponse
	decErr := json.Unmarshal(resp.body, &cr)
	if resp.status < 200 || resp.status > 299 {
		detail := snippet(resp.body)
		if decErr == nil && cr.Error != nil && cr.Error.Message != "" {
			detail = cr.Error.Message
		}
		return step.Result{}, statusError(what, resp.status, detail)
	}
	if decErr != nil {
		return step.Result{}, fmt.Errorf("handlers: %s: status %d: decode chat completion: %w: %w",
			what, resp.status, decErr, ErrBadResponse)
	}
	if cr.Error != nil && cr.Error.Message != "" {
		return step.Result{}, fmt.Errorf("handlers: %s: status %d: %s: %w", what, resp.status, cr.Error.Message, ErrBadResponse)
	}
	if len(cr.Choices) == 0 {
		return step.Result{}, fmt.Errorf("handlers: %s: status %d: no choices: %w", what, resp.status, ErrBadResponse)
	}
	choice := cr.Choices[0]
	content := ""
	if choice.Message.Content != nil {
		content = *choice.Message.Content
	}
	if cr.Model != "" {
		model = cr.Model
	}
	out := map[string]any{
		"content":       content,
		"model":         model,
		"finish_reason": choice.FinishReason,
		"usage": map[string]any{
			"prompt_tokens":     cr.Usage.PromptTokens,
			"completion_tokens": cr.Usage.CompletionTokens,
			"total_tokens":      cr.Usage.TotalTokens,
		},
	}
	return step.Result{
		Output: out,
		Usage:  step.Usage{PromptTokens: cr.Usage.PromptTokens, CompletionTokens: cr.Usage.CompletionTokens},
	}, nil
}

// buildChatRequest validates `with` and assembles the request body.
func buildChatRequest(with map[string]any) (*chatRequest, error) {
	model, err := optString(NameLLMChat, with, "model")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(model) == "" {
		return nil, invalid(NameLLMChat, "model is required")
	}
	system, err := optString(NameLLMChat, with, "system")
	if err != nil {
		return nil, err
	}
	prompt, err := optString(NameLLMChat, with, "prompt")
	if err != nil {
		return nil, err
	}
	listed, err := parseMessages(with["messages"])
	if err != nil {
		return nil, err
	}
	msgs := make([]chatMessage, 0, len(listed)+2)
	if system != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: system})
	}
	msgs = append(msgs, listed...)
	if prompt != "" {
		msgs = append(msgs, chatMessage{Role: "user", Content: prompt})
	}
	if len(listed) == 0 && prompt == "" {
		return nil, invalid(NameLLMChat, "no messages: set messages or prompt")
	}
	cr := &chatRequest{Model: model, Messages: msgs}
	if v, ok := with["temperature"]; ok && v != nil {
		f, good := asFloat64(v)
		if !good || f < 0 {
			return nil, invalid(NameLLMChat, "temperature must be a non-negative number, got %v", v)
		}
		cr.Temperature = &f
	}
	if v, ok := with["max_tokens"]; ok && v != nil {
		n, good := asInt64(v)
		if !good || n <= 0 {
			return nil, invalid(NameLLMChat, "max_tokens must be a positive integer, got %v", v)
		}
		cr.MaxTokens = &n
	}
	return cr, nil
}

// parseMessages reads `with.messages`: a list of maps with a string role and a content.
func parseMessages(v any) ([]chatMessage, error) {
	var items []any
	switch l := v.(type) {
	case nil:
		return nil, nil
	case []any:
		items = l
	case []map[string]any:
		items = make([]any, len(l))
		for i, m := range l {
			items[i] = m
		}
	case []map[string]string:
		items = make([]any, len(l))
		for i, m := range l {
			items[i] = map[string]any{"role": m["role"], "content": m["content"]}
		}
	default:
		return nil, invalid(NameLLMChat, "messages must be a list, got %s", dag.KindOf(v))
	}
	out := make([]chatMessage, 0, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, invalid(NameLLMChat, "messages[%d] must be a mapping with role and content, got %s", i, dag.KindOf(it))
		}
		role, ok := m["role"].(string)
		if !ok || role == "" {
			return nil, invalid(NameLLMChat, "messages[%d].role must be a non-empty string", i)
		}
		content, ok := m["content"]
		if !ok || content == nil {
			return nil, invalid(NameLLMChat, "messages[%d].content is required", i)
		}
		out = append(out, chatMessage{Role: role, Content: content})
	}
	return out, nil
}
