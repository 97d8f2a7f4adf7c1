package tenancy

import (
	"strconv"
	"strings"
)

// InstanceID returns the runtime instance id "<prefix>-<n>".
func InstanceID(prefix string, n int) string {
	return prefix + "-" + strconv.Itoa(n)
}

// NextInstanceID returns the smallest n >= 1 such that InstanceID(prefix, n) is not among
// existingIDs, and that id. Ids of other prefixes or other shapes are ignored, so scopes never
// take ordinals from each other.
func NextInstanceID(prefix string, existingIDs []string) (id string, n int) {
	taken := make(map[int]bool, len(existingIDs))
	for _, e := range existingIDs {
		if k, ok := parseOrdinal(prefix, e); ok {
			taken[k] = true
		}
	}
	n = 1
	for taken[n] {
		n++
	}
	return InstanceID(prefix, n), n
}

// parseOrdinal returns n when id is exactly "<prefix>-<n>" with n a canonical positive decimal.
func parseOrdinal(prefix, id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, prefix+"-")
	if !ok || rest == "" || rest[0] == '0' {
		return 0, false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return 0, false
	}
	return n, true
}
