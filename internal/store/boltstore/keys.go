package boltstore

import (
	"encoding/binary"
	"strings"
	"time"
)

// sep separates the parts of a composite key; ids never contain it.
const sep = "\x00"

// key joins parts with sep.
func key(parts ...string) []byte { return []byte(strings.Join(parts, sep)) }

// prefix returns parts joined with sep and a trailing sep, for prefix scans.
func prefix(parts ...string) []byte { return []byte(strings.Join(parts, sep) + sep) }

// orderedTime encodes signed nanoseconds so byte order equals numeric order.
func orderedTime(ns int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(ns)^(1<<63))
	return b
}

// decodeTime reverses orderedTime on the first 8 bytes of b.
func decodeTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[:8]) ^ (1 << 63)) }

// u64 encodes v big-endian.
func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// deadline returns now+ttl in nanoseconds.
func deadline(now int64, ttl time.Duration) int64 { return now + int64(ttl) }

// concat returns a fresh slice holding a then b.
func concat(a, b []byte) []byte {
	out := make([]byte, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}
