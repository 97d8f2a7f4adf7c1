// Package ids makes unique, roughly time-ordered identifiers for runs, executions, local runs,
// scale-out requests and claim tokens.
//
// # Usage
//
//	id := ids.New("run") // "run-0193c1f2a8b4-9f2c4e1a7b3d5e60"
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync/atomic"
	"time"
)

var counter atomic.Uint64

// New returns "<prefix>-<12 hex ms time><16 hex random>". It is goroutine-safe and never blocks.
func New(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; fall back to a process counter to stay unique.
		binary.BigEndian.PutUint64(b[:], counter.Add(1)^uint64(time.Now().UnixNano()))
	}
	ms := uint64(time.Now().UnixMilli())
	var t [6]byte
	t[0], t[1], t[2], t[3], t[4], t[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	out := make([]byte, 0, len(prefix)+1+12+1+16)
	out = append(out, prefix...)
	out = append(out, '-')
	out = hex.AppendEncode(out, t[:])
	out = append(out, '-')
	out = hex.AppendEncode(out, b[:])
	return string(out)
}
