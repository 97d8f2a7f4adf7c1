package handlers

import (
	"os"
	"strings"
)

// LLMBaseURLEnv is the environment variable llm.chat reads its base URL from when a step's
// `with.base_url` is empty (before DefaultLLMBaseURL). It lets one setting point every
// llm.chat step at a local or self-hosted OpenAI-compatible server.
const LLMBaseURLEnv = "DAIR_LLM_BASE_URL"

// llmBaseURL returns the base URL of an llm.chat call: with.base_url when set, else
// DAIR_LLM_BASE_URL (read at each call), else DefaultLLMBaseURL; without a trailing slash.
func llmBaseURL(fromWith string) string {
	for _, s := range []string{fromWith, os.Getenv(LLMBaseURLEnv), DefaultLLMBaseURL} {
		if s = strings.TrimRight(strings.TrimSpace(s), "/"); s != "" {
			return s
		}
	}
	return DefaultLLMBaseURL
}
