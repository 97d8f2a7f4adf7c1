package tenancy

import (
	"strings"
	"testing"
)

// validTenantID must agree with tenantIDPattern, the rule the error message names.
func TestValidTenantID_matchesThePattern(t *testing.T) {
	for _, id := range []string{
		"", "a", "0", "acme", "acme-1", "a_b", "a-", "_a", "-a", "A", "acMe", "a b", "a/b", "a.b", "é",
		"acme\n", strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 62),
	} {
		if got, want := validTenantID(id), tenantIDPattern.MatchString(id); got != want {
			t.Errorf("validTenantID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}
