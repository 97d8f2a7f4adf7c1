package chaos

import (
	"fmt"
	"strings"
)

// Fault is a kind of fault the harness injects.
type Fault int

// The fault kinds, in the order AllFaults lists them.
const (
	// FaultKill is kill -9 of a node, restarted (same id and addresses) after the hold.
	FaultKill Fault = iota + 1
	// FaultPause is SIGSTOP of a node, SIGCONT after the hold.
	FaultPause
	// FaultRedisRestart is kill -9 of the private redis-server, restarted on its AOF after the
	// hold.
	FaultRedisRestart
	// FaultPartition cuts a node's membership transport off, healed after the hold.
	FaultPartition
)

// AllFaults lists every fault kind.
var AllFaults = []Fault{FaultKill, FaultPause, FaultRedisRestart, FaultPartition}

var faultNames = map[Fault]string{
	FaultKill:         "kill",
	FaultPause:        "pause",
	FaultRedisRestart: "redis-restart",
	FaultPartition:    "partition",
}

// String returns the fault's flag name ("kill", "pause", "redis-restart", "partition").
func (f Fault) String() string {
	if s, ok := faultNames[f]; ok {
		return s
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// MarshalText encodes the fault as its name.
func (f Fault) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText decodes a fault name.
func (f *Fault) UnmarshalText(b []byte) error {
	v, ok := faultByName(string(b))
	if !ok {
		return fmt.Errorf("%w: unknown fault %q", ErrBadConfig, b)
	}
	*f = v
	return nil
}

// OnNode reports whether the fault targets a node (every kind but redis-restart).
func (f Fault) OnNode() bool { return f != FaultRedisRestart }

// ParseFaults parses a comma-separated list of fault names, or "none" (an empty, non-nil list:
// a baseline run without faults). Duplicates are dropped; an unknown name or an empty list is
// an error wrapping ErrBadConfig.
func ParseFaults(s string) ([]Fault, error) {
	if strings.TrimSpace(s) == "none" {
		return []Fault{}, nil
	}
	var out []Fault
	seen := map[Fault]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		f, ok := faultByName(name)
		if !ok {
			return nil, fmt.Errorf("%w: unknown fault %q (want kill, pause, redis-restart or partition)", ErrBadConfig, name)
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no fault named in %q", ErrBadConfig, s)
	}
	return out, nil
}

func faultByName(name string) (Fault, bool) {
	for f, n := range faultNames {
		if n == name {
			return f, true
		}
	}
	return 0, false
}
