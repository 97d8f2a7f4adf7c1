package auth

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Sentinel errors of package auth.
var (
	// ErrInvalidToken is returned by Verify when a token is malformed, badly signed, uses an
	// unexpected algorithm or is not yet valid.
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrTokenExpired is returned by Verify when the token's exp is in the past.
	ErrTokenExpired = errors.New("auth: token expired")
	// ErrMissingClaim is returned by Verify and MintHS256 when a required claim (tenant_id,
	// org_id, sub, roles, exp) is absent or empty.
	ErrMissingClaim = errors.New("auth: missing claim")
	// ErrBadKey is returned by NewHS256, NewPublicKey, LoadSecret and LoadVerifier when a key is
	// empty, unreadable or of an unsupported type.
	ErrBadKey = errors.New("auth: bad key")
	// ErrUnknownRole is returned by MintHS256 for a role other than tenant, operator or admin.
	ErrUnknownRole = errors.New("auth: unknown role")
)

// Roles a token may carry. They match messages.RoleTenant, RoleOperator and RoleAdmin.
const (
	RoleTenant   = "tenant"
	RoleOperator = "operator"
	RoleAdmin    = "admin"
)

// roleRank orders the roles: a higher rank includes the lower ones.
var roleRank = map[string]int{RoleTenant: 1, RoleOperator: 2, RoleAdmin: 3}

// Claims is the verified identity of a caller.
type Claims struct {
	// TenantID is the tenant the caller belongs to (claim tenant_id).
	TenantID string
	// OrgID is the caller's organisation (claim org_id).
	OrgID string
	// Subject is the user or service (claim sub).
	Subject string
	// Roles are the caller's roles (claim roles).
	Roles []string
	// ExpiresAt is when the token stops being valid (claim exp).
	ExpiresAt time.Time
	// Audience lists the token's intended recipients (claim aud); optional.
	Audience []string
	// Issuer names who issued the token (claim iss); optional.
	Issuer string
}

// Verifier checks a bearer token and returns its claims.
type Verifier interface {
	// Verify returns the token's claims, or an error matching ErrInvalidToken, ErrTokenExpired
	// or ErrMissingClaim. It does not block and is goroutine-safe; the caller owns the result.
	Verify(token string) (*Claims, error)
}

// HasRole reports whether the claims include role, counting inclusion: an admin has the
// operator and tenant roles, an operator has the tenant role. A nil Claims has no role.
func (c *Claims) HasRole(role string) bool {
	if c == nil {
		return false
	}
	want, ok := roleRank[role]
	if !ok {
		return slices.Contains(c.Roles, role)
	}
	for _, r := range c.Roles {
		if roleRank[r] >= want {
			return true
		}
	}
	return false
}

// CanAccessTenant reports whether the caller may see and act on tenantID's runs, executions
// and usage: operators and admins may for every tenant, a tenant only for its own.
func (c *Claims) CanAccessTenant(tenantID string) bool {
	if c == nil {
		return false
	}
	if c.HasRole(RoleOperator) {
		return true
	}
	return c.HasRole(RoleTenant) && c.TenantID == tenantID
}

type ctxKey struct{}

// NewContext returns a copy of ctx carrying c.
func NewContext(ctx context.Context, c *Claims) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the claims stored by NewContext, or nil.
func FromContext(ctx context.Context) *Claims {
	c, _ := ctx.Value(ctxKey{}).(*Claims)
	return c
}
