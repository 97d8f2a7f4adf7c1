package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// leeway is the clock skew Verify tolerates on exp, nbf and iat.
const leeway = 5 * time.Second

// checks are the claim checks of a verifier beyond signature and expiry; the zero value checks
// no audience and no issuer.
type checks struct {
	audience string
	issuer   string
}

// Option configures a Verifier built by NewHS256, NewPublicKey or LoadVerifier.
type Option func(*checks)

// WithAudience makes Verify require aud to contain audience (a token without aud is refused).
// An empty audience checks nothing: tokens with any or no aud are accepted.
func WithAudience(audience string) Option { return func(c *checks) { c.audience = audience } }

// WithIssuer makes Verify require iss to equal issuer (a token without iss is refused). An
// empty issuer checks nothing.
func WithIssuer(issuer string) Option { return func(c *checks) { c.issuer = issuer } }

func newChecks(opts []Option) checks {
	var c checks
	for _, o := range opts {
		o(&c)
	}
	return c
}

// parserOptions returns the jwt parser options of v: algorithm, required exp, leeway, iat not
// in the future, and the audience and issuer when set.
func (v *jwtVerifier) parserOptions() []jwt.ParserOption {
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{v.alg}), jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(v.now), jwt.WithLeeway(leeway), jwt.WithIssuedAt()}
	if v.checks.audience != "" {
		opts = append(opts, jwt.WithAudience(v.checks.audience))
	}
	if v.checks.issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.checks.issuer))
	}
	return opts
}

// timeClaims are the NumericDate claims whose JSON form checkTimeClaims checks.
var timeClaims = []string{"exp", "iat", "nbf"}

// checkTimeClaims refuses a token whose exp, iat or nbf is present but not an integer JSON
// number: the jwt library accepts numeric strings ("1700000000") and fractions, which no
// well-behaved issuer produces. The token's signature has been verified.
func checkTimeClaims(token string) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fmt.Errorf("%w: malformed token", ErrInvalidToken)
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return fmt.Errorf("%w: decode claims: %v", ErrInvalidToken, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil {
		return fmt.Errorf("%w: decode claims: %v", ErrInvalidToken, err)
	}
	for _, name := range timeClaims {
		v, ok := raw[name]
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		if len(v) == 0 || !isDigits(v) {
			return fmt.Errorf("%w: claim %s must be an integer number of seconds, got %s", ErrInvalidToken, name, clip(v))
		}
	}
	return nil
}

// isDigits reports whether b is an optional minus sign followed by digits only.
func isDigits(b []byte) bool {
	if b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// clip shortens a claim value for an error message.
func clip(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}
