package jsonvalid

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrInvalid is matched (errors.Is) by every *Error: Check returns it for a document that is
// not well-formed JSON, not valid UTF-8, holds an unpaired surrogate escape, a number that
// overflows a float64, or an object with the same key twice.
var ErrInvalid = errors.New("jsonvalid: invalid json")

// Error reports the first problem Check found.
type Error struct {
	// Offset is the byte offset of the problem, -1 when unknown (malformed JSON).
	Offset int
	// Msg describes the problem, without the package prefix.
	Msg string
}

// Error implements error. The message names the problem and its byte offset and is meant for
// API answers (it carries no package prefix).
func (e *Error) Error() string {
	if e.Offset < 0 {
		return e.Msg
	}
	return fmt.Sprintf("%s (at byte %d)", e.Msg, e.Offset)
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// MaxDepth is the deepest nesting of arrays and objects Check accepts. Deeper documents are
// legal JSON but break common decoders (Python's json stops near 1,000 levels, Go's at
// 10,000), so a stored value would be returned in answers that clients cannot parse.
const MaxDepth = 128

// Valid reports whether Check(b) returns nil.
func Valid(b []byte) bool { return Check(b) == nil }

// Check returns nil when b is one well-formed JSON value whose bytes are valid UTF-8, whose
// string escapes pair every UTF-16 surrogate, whose numbers are finite as float64s and whose
// arrays and objects nest at most MaxDepth deep, and whose objects name each key once (decoders
// differ on which of two values they keep, so such a document means different things to
// different readers); else a *Error matching ErrInvalid. It takes time linear in len(b) and does not retain b. It is
// goroutine-safe.
func Check(b []byte) error {
	if !utf8.Valid(b) {
		return &Error{Offset: invalidUTF8At(b), Msg: "not valid UTF-8"}
	}
	if !json.Valid(b) {
		return &Error{Offset: -1, Msg: "not valid JSON"}
	}
	depth := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '[' || c == '{':
			if depth++; depth > MaxDepth {
				return &Error{Offset: i, Msg: fmt.Sprintf("arrays and objects nest deeper than %d levels", MaxDepth)}
			}
		case c == ']' || c == '}':
			depth--
		case c == '"':
			end, err := checkString(b, i)
			if err != nil {
				return err
			}
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			end := i + 1
			for end < len(b) && isNumberByte(b[end]) {
				end++
			}
			if err := checkNumber(b[i:end], i); err != nil {
				return err
			}
			i = end - 1
		}
	}
	return checkKeys(b)
}

// CheckText returns nil when b's text is valid UTF-8 and, if b is well-formed JSON, its string
// escapes pair every UTF-16 surrogate and its objects name each key once; else a *Error
// matching ErrInvalid. It is Check without
// the checks of structure, depth and numbers, for a request body whose decoder reports those
// in its own terms: encoding/json would turn such bytes and escapes into U+FFFD silently, so
// two different keys could decode as one. Linear in len(b), goroutine-safe.
func CheckText(b []byte) error {
	if !utf8.Valid(b) {
		return &Error{Offset: invalidUTF8At(b), Msg: "not valid UTF-8"}
	}
	if !json.Valid(b) {
		return nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] == '"' {
			end, err := checkString(b, i)
			if err != nil {
				return err
			}
			i = end
		}
	}
	return checkKeys(b)
}

// checkKeys returns an *Error naming, with its path, the first key that an object of the
// well-formed document b holds twice (keys compared decoded: "a" and "\u0061" are one key).
func checkKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool // nil for an array
		path   string
		index  int
		expect bool // an object awaiting a key
	}
	var stack []*frame
	child := func(f *frame, key string) string {
		if f.keys == nil {
			return f.path + "[" + strconv.Itoa(f.index) + "]"
		}
		if f.path == "" {
			return key
		}
		return f.path + "." + key
	}
	var lastKey string
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end: b is well-formed
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.expect {
			if key, ok := tok.(string); ok {
				if top.keys[key] {
					return &Error{Offset: -1, Msg: fmt.Sprintf("key %q appears twice in one object (at %s)", truncate([]byte(key)), child(top, key))}
				}
				top.keys[key] = true
				top.expect, lastKey = false, key
				continue
			}
		}
		// A value: it ends the pending key of an object, or takes an array slot.
		var here string
		if top != nil {
			here = child(top, lastKey)
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, path: here, expect: true})
				continue
			case '[':
				stack = append(stack, &frame{path: here})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) > 0 {
			f := stack[len(stack)-1]
			if f.keys == nil {
				f.index++
			} else {
				f.expect = true
			}
		}
	}
}

// invalidUTF8At returns the offset of the first invalid UTF-8 sequence of b.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// checkNumber reports a number literal that overflows a float64 (underflow to 0 is fine).
func checkNumber(lit []byte, off int) error {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil && math.IsInf(f, 0) {
		return &Error{Offset: off, Msg: fmt.Sprintf("number %s overflows a 64-bit float", truncate(lit))}
	}
	return nil
}

// checkString scans the string starting at the quote b[start] of a well-formed document and
// returns the offset of its closing quote, or an error for an unpaired surrogate escape.
func checkString(b []byte, start int) (int, error) {
	for i := start + 1; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i, nil
		case '\\':
			if b[i+1] != 'u' {
				i++
				continue
			}
			r := hex4(b[i+2 : i+6])
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00 && i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u':
				if lo := hex4(b[i+8 : i+12]); lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11
					continue
				}
				return 0, &Error{Offset: i, Msg: "string holds an unpaired UTF-16 surrogate escape"}
			case utf16.IsSurrogate(r):
				return 0, &Error{Offset: i, Msg: "string holds an unpaired UTF-16 surrogate escape"}
			}
			i += 5
		}
	}
	return len(b), nil
}

// hex4 decodes four hex digits (json.Valid checked them).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// truncate shortens a long literal for a message.
func truncate(lit []byte) string {
	const max = 32
	if len(lit) <= max {
		return string(lit)
	}
	return string(lit[:max]) + "..."
}
