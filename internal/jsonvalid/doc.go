// Package jsonvalid checks that a JSON document is safe to store and hand back to strict
// parsers: well-formed, valid UTF-8 throughout, no unpaired UTF-16 surrogate escapes, and no
// number that overflows a float64 (such as 1e400, which encoding/json refuses to decode).
//
// It is pure and allocation-free on valid input: one pass over the bytes after json.Valid.
//
// # Usage
//
//	if err := jsonvalid.Check(input); err != nil {
//		return fmt.Errorf("input: %w", err) // errors.Is(err, jsonvalid.ErrInvalid)
//	}
package jsonvalid
