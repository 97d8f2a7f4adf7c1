package jsonvalid_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dairuntime/dair/internal/jsonvalid"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		in   string
		msg  string // "" => valid
	}{
		{"object", `{"name":"x","n":[1,-2.5e10,0.1,1e308,1e-400],"ok":true,"nil":null}`, ""},
		{"scalar", `"text"`, ""},
		{"escapes", `{"a":"\"\\\/\b\f\n\r\t\u00e9","pair":"\ud83d\ude00"}`, ""},
		{"utf8 text", `{"é":"日本"}`, ""},
		{"invalid utf8 in a string", "{\"name\":\"\xff\"}", "not valid UTF-8 (at byte 9)"},
		{"invalid utf8 in a key", "{\"\xc3\x28\":1}", "not valid UTF-8 (at byte 2)"},
		{"overflow", `{"name":1e400}`, "number 1e400 overflows a 64-bit float (at byte 8)"},
		{"negative overflow", `[-1.5e999]`, "number -1.5e999 overflows a 64-bit float (at byte 1)"},
		{"numbers inside strings are text", `{"a":"1e400"}`, ""},
		{"lone high surrogate", `{"a":"\ud800"}`, "string holds an unpaired UTF-16 surrogate escape (at byte 6)"},
		{"lone low surrogate", `{"a":"x\udc00"}`, "string holds an unpaired UTF-16 surrogate escape (at byte 7)"},
		{"high then non-low", `["\ud800\u0041"]`, "string holds an unpaired UTF-16 surrogate escape (at byte 2)"},
		{"malformed", `{"a":`, "not valid JSON"},
		{"empty", ``, "not valid JSON"},
		{"nesting at the limit", strings.Repeat("[", jsonvalid.MaxDepth) + strings.Repeat("]", jsonvalid.MaxDepth), ""},
		{"brackets inside strings are text", `["` + strings.Repeat("[{", 200) + `"]`, ""},
		{"a key twice", `{"pipeline":"a","pipeline":"b"}`, `key "pipeline" appears twice in one object (at pipeline)`},
		{"a key twice, one escaped", `{"a":1,"\u0061":2}`, `key "a" appears twice in one object (at a)`},
		{"a key twice in a nested object", `{"input":{"x":{"a":1},"y":[{"a":1,"b":2,"a":3}]}}`, `key "a" appears twice in one object (at input.y[0].a)`},
		{"the same key in sibling objects", `[{"a":1},{"a":2},{"b":{"a":{"a":1}}}]`, ""},
		{"keys that look alike in values", `{"a":"a","b":{"a":"b"},"c":["a","a"]}`, ""},
		{"nesting too deep", `{"a":` + strings.Repeat("[", jsonvalid.MaxDepth) + strings.Repeat("]", jsonvalid.MaxDepth) + `}`,
			"arrays and objects nest deeper than 128 levels (at byte " + fmt.Sprint(5+jsonvalid.MaxDepth-1) + ")"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := jsonvalid.Check([]byte(tt.in))
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", tt.in, err)
				}
				return
			}
			if err == nil || err.Error() != tt.msg || !errors.Is(err, jsonvalid.ErrInvalid) {
				t.Fatalf("Check(%q) = %v, want %q matching ErrInvalid", tt.in, err, tt.msg)
			}
			if jsonvalid.Valid([]byte(tt.in)) {
				t.Fatalf("Valid(%q) = true", tt.in)
			}
		})
	}
}

func TestCheck_longNumberIsTruncated(t *testing.T) {
	err := jsonvalid.Check([]byte("9" + strings.Repeat("9", 400)))
	if err == nil || !strings.Contains(err.Error(), "...") {
		t.Fatalf("Check = %v", err)
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `"\ud800"`, `1e400`, "\"\xff\"", `[1,2,{"b":null}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := jsonvalid.Check(b); err != nil && !errors.Is(err, jsonvalid.ErrInvalid) {
			t.Fatalf("Check error %v does not match ErrInvalid", err)
		}
	})
}

func ExampleCheck() {
	fmt.Println(jsonvalid.Check([]byte(`{"name":1e400}`)))
	fmt.Println(jsonvalid.Check([]byte(`{"name":"ok"}`)))
	// Output:
	// number 1e400 overflows a 64-bit float (at byte 8)
	// <nil>
}
