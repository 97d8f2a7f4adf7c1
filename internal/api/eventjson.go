package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/dairuntime/dair/messages"
)

// appendEvent appends ledger entry e as one Server-Sent Event (id, event and data lines, then
// the blank line) to dst. The data line is byte for byte what encoding/json makes of
// ledgerEntryFromMessage(e) (TestAppendEvent holds it to that), built without reflection: an
// event stream encodes every entry of every run it follows.
func appendEvent(dst []byte, e *messages.LedgerEntry) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, e.GetSeq(), 10)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, e.GetKind()...)
	dst = append(dst, "\ndata: "...)
	dst = appendEntryJSON(dst, e)
	return append(dst, "\n\n"...)
}

// appendEntryJSON appends the JSON of httpapi.LedgerEntry for e (its field order and
// omitempty rules).
func appendEntryJSON(dst []byte, e *messages.LedgerEntry) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendInt(dst, e.GetSeq(), 10)
	dst = append(dst, `,"at":"`...)
	dst = unixTime(e.GetAt()).AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","kind":`...)
	dst = appendJSONString(dst, e.GetKind())
	dst = append(dst, `,"shared_run_id":`...)
	dst = appendJSONString(dst, e.GetSharedRunId())
	dst = appendStringField(dst, `,"tenant_id":`, e.GetTenantId())
	dst = appendStringField(dst, `,"execution_id":`, e.GetExecutionId())
	dst = appendStringField(dst, `,"runtime_instance_id":`, e.GetRuntimeInstanceId())
	dst = appendStringField(dst, `,"step_id":`, e.GetStepId())
	if a := e.GetAttempt(); a != 0 {
		dst = append(dst, `,"attempt":`...)
		dst = strconv.AppendInt(dst, int64(a), 10)
	}
	if ep := e.GetEpoch(); ep != 0 {
		dst = append(dst, `,"epoch":`...)
		dst = strconv.AppendInt(dst, ep, 10)
	}
	dst = appendStringField(dst, `,"reason":`, e.GetReason())
	if data := e.GetData(); len(data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = appendRawJSON(dst, data)
	}
	return append(dst, '}')
}

// appendStringField appends key and s as a JSON string, unless s is empty (omitempty).
func appendStringField(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendJSONString(append(dst, key...), s)
}

// appendRawJSON appends data as encoding/json writes a json.RawMessage made by rawJSON: valid
// JSON compacted with <, > and & escaped; anything else as a JSON string of its bytes.
func appendRawJSON(dst []byte, data []byte) []byte {
	if !json.Valid(data) {
		return appendJSONString(dst, string(data))
	}
	if !needsRewrite(data) { // compact and HTML-safe already
		return append(dst, data...)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return appendJSONString(dst, string(data))
	}
	start := len(dst)
	dst = append(dst, buf.Bytes()...)
	if bytes.ContainsAny(dst[start:], "<>&\u2028\u2029") {
		buf.Reset()
		json.HTMLEscape(&buf, dst[start:])
		dst = append(dst[:start], buf.Bytes()...)
	}
	return dst
}

// rewriteBytes marks the bytes that may make encoding/json change valid JSON: whitespace it
// compacts, <, > and & it escapes, and 0xE2, the first byte of U+2028 and U+2029.
var rewriteBytes = [256]bool{' ': true, '\t': true, '\r': true, '\n': true, '<': true, '>': true, '&': true, 0xE2: true}

// needsRewrite reports whether valid JSON data may differ from what encoding/json writes of it
// (a byte loop: bytes.IndexAny with non-ASCII characters decodes every rune).
func needsRewrite(data []byte) bool {
	for _, c := range data {
		if rewriteBytes[c] {
			return true
		}
	}
	return false
}

// plainBytes marks the bytes encoding/json writes as they are in a string: printable ASCII
// except ", \\ and the HTML characters <, > and &.
var plainBytes = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// plainJSON reports whether encoding/json writes s unchanged between its quotes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainBytes[s[i]] {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json encodes a string (HTML-safe: <, > and & as
// \u003c, \u003e, \u0026; U+2028 and U+2029 escaped; invalid UTF-8 as U+FFFD).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	if plainJSON(s) { // ids, kinds, most reasons: nothing to escape
		dst = append(dst, s...)
		return append(dst, '"')
	}
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
