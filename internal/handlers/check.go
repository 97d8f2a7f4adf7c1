package handlers

import (
	"errors"
	"net/http"
	"strings"
)

// The checks below run when a pipeline is stored (step.WithChecker): each refuses a field the
// handler does not know and a value that can only fail, with the words the run would use. A
// string holding a template is only known at run time and passes.

// checkSleep: only duration, a Go duration or milliseconds, not negative.
func checkSleep(with map[string]any) (string, error) {
	if field, err := onlyFields(with, "duration"); err != nil {
		return field, err
	}
	if _, err := sleepDuration(untemplated(with)); err != nil {
		return "duration", detail(NameSleep, err)
	}
	return "", nil
}

// checkFail: only times, message and permanent, as fail reads them.
func checkFail(with map[string]any) (string, error) {
	if field, err := onlyFields(with, "times", "message", "permanent"); err != nil {
		return field, err
	}
	_, _, _, err := failArgs(untemplated(with))
	return "", detail(NameFail, err)
}

// checkHTTP: only method, url, headers and body; a method that is a token, an absolute http or
// https url, headers a map of valid names and values, a body JSON can encode.
func checkHTTP(with map[string]any) (string, error) {
	if field, err := onlyFields(with, "method", "url", "headers", "body"); err != nil {
		return field, err
	}
	w := untemplated(with)
	method, err := optString(NameHTTP, w, "method")
	if err != nil {
		return "method", detail(NameHTTP, err)
	}
	if m := strings.TrimSpace(method); m != "" && !isToken(m) {
		return "method", errors.New("method must be an HTTP method such as GET or POST, got " + quote(method))
	}
	if s, ok := with["url"].(string); !ok || !templated(s) {
		rawURL, err := optString(NameHTTP, w, "url")
		if err == nil {
			_, err = checkURL(NameHTTP, rawURL)
		}
		if err != nil {
			return "url", detail(NameHTTP, err)
		}
	}
	if err := setHeaders(http.Header{}, w["headers"]); err != nil {
		return "headers", detail(NameHTTP, err)
	}
	if _, _, err := encodeBody(w["body"]); err != nil {
		return "body", detail(NameHTTP, err)
	}
	return "", nil
}

// checkLLMChat: only llm.chat's fields, each as the request is built from it; a model and at
// least one message (messages or prompt), which a template may provide.
func checkLLMChat(with map[string]any) (string, error) {
	if field, err := onlyFields(with, "base_url", "model", "messages", "prompt", "system", "temperature", "max_tokens"); err != nil {
		return field, err
	}
	w := untemplated(with)
	for k, v := range with {
		if s, ok := v.(string); ok && templated(s) {
			switch k {
			case "model", "prompt", "system":
				w[k] = "template" // a string the run renders
			}
		}
	}
	if s, ok := with["messages"].(string); ok && templated(s) && w["prompt"] == nil {
		w["prompt"] = "template" // the messages the run renders
	}
	if s, ok := with["base_url"].(string); !ok || !templated(s) {
		if _, err := chatURL(w); err != nil {
			return "base_url", detail(NameLLMChat, err)
		}
	}
	if _, err := buildChatRequest(w); err != nil {
		return "", detail(NameLLMChat, err)
	}
	return "", nil
}

// untemplated is a copy of with without the top-level values that are templated strings.
func untemplated(with map[string]any) map[string]any {
	out := make(map[string]any, len(with))
	for k, v := range with {
		if s, ok := v.(string); ok && templated(s) {
			continue
		}
		out[k] = v
	}
	return out
}

// detail is err, a handler's invalid argument, in a check's words: without the handler's
// prefix, which the pipeline error's step and field replace. nil stays nil.
func detail(name string, err error) error {
	if err == nil {
		return nil
	}
	return errors.New(strings.TrimPrefix(err.Error(), ErrInvalidArgument.Error()+": "+name+": "))
}

// isToken reports whether s is an HTTP token (the characters of a method or a header name).
func isToken(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r)
	})
}

func quote(s string) string { return `"` + s + `"` }
