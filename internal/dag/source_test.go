package dag

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckSource: one row per rule a document must follow to be stored beyond Parse's.
func TestCheckSource(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      string // "" = accepted
	}{
		{"yaml", "key: k\nsteps:\n  - {id: a, uses: echo, retry: {max_attempts: 3}}\n  - {id: b, uses: echo, needs: [a]}\n", ""},
		{"json", `{"key":"k","steps":[{"id":"a","uses":"echo","with":{"v":{"x":1,"y":[{"x":1},{"x":2}]}}},{"id":"b","uses":"echo","needs":["a"]}]}`, ""},
		{"json repeats a key", `{"key":"k","steps":[{"id":"a","uses":"echo","uses":"sleep"}]}`, `key "uses" appears twice in one object (at steps[0].uses)`},
		{"json repeats a key deep", `{"key":"k","steps":[{"id":"a","uses":"echo","with":{"v":{"x":1,"x":2}}}]}`, `key "x" appears twice in one object (at steps[0].with.v.x)`},
		{"json repeats the top key", `{"key":"k","key":"j","steps":[]}`, `key "key" appears twice`},
		{"json invalid utf-8", "{\"key\":\"k\",\"steps\":[{\"id\":\"a\",\"uses\":\"echo\",\"with\":{\"v\":\"\xff\xfe\"}}]}", "not valid UTF-8"},
		{"json unpaired surrogate", `{"key":"k","steps":[{"id":"a","uses":"echo","with":{"v":"\ud800"}}]}`, "unpaired UTF-16 surrogate"},
		{"json paired surrogates", `{"key":"k","steps":[{"id":"a","uses":"echo","with":{"v":"\ud83d\ude00"}}]}`, ""},
		{"a null step", "key: k\nsteps: [null]\n", "steps[0]: a step is a mapping with id and uses, got null"},
		{"a null need", "key: k\nsteps:\n  - {id: a, uses: echo}\n  - {id: b, uses: echo, needs: [null]}\n", "needs[0]: a need is a step id, got null"},
		{"an empty need", "key: k\nsteps:\n  - {id: b, uses: echo, needs: ['']}\n", "got an empty string"},
		{"fractional attempts", "key: k\nsteps:\n  - {id: a, uses: echo, retry: {max_attempts: 2.5}}\n", "retry.max_attempts: want a whole number of attempts, got 2.5"},
		{"whole float attempts", "key: k\nsteps:\n  - {id: a, uses: echo, retry: {max_attempts: 2.0}}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSource([]byte(tc.src))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckSource = %v, want accepted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("CheckSource = %v, want %q (ErrInvalid)", err, tc.want)
			}
		})
	}
}
