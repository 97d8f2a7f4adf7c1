package jsonvalid

import (
	"errors"
	"testing"
)

// TestCheckText: valid UTF-8 and paired surrogates only; structure, depth and numbers are left
// to the decoder.
func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		bad      bool
	}{
		{"object", `{"k":"v"}`, false},
		{"paired surrogates", `{"k":"\ud83d\ude00"}`, false},
		{"deeper than MaxDepth", deep(MaxDepth + 1), false},
		{"overflowing number", `{"n":1e400}`, false},
		{"malformed", `{"k":`, false},
		{"invalid UTF-8", "{\"k\":\"\xff\"}", true},
		{"invalid UTF-8 in malformed JSON", "{\"k\":\"\xff", true},
		{"unpaired high surrogate", `{"k":"\ud800"}`, true},
		{"unpaired low surrogate", `{"k":"a\udc00"}`, true},
		{"unpaired surrogate in a key", `{"\ud800":1}`, true},
		{"a key twice", `{"k":1,"k":2}`, true},
		{"a key twice in a nested value", `{"input":{"a":1,"a":2}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckText([]byte(tc.in))
			if (err != nil) != tc.bad || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("CheckText(%q) = %v, want bad %v", tc.in, err, tc.bad)
			}
		})
	}
}

func deep(n int) string {
	b := make([]byte, 0, 2*n)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(b)
}
