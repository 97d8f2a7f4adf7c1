package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dairuntime/dair/internal/tenancy"
)

// tokenClaims is the JWT body. Pointers tell an absent claim from an empty one.
type tokenClaims struct {
	TenantID *string  `json:"tenant_id"`
	OrgID    *string  `json:"org_id"`
	Roles    []string `json:"roles"`
	jwt.RegisteredClaims
}

// jwtVerifier verifies tokens signed with one key and one algorithm.
type jwtVerifier struct {
	alg    string
	key    any
	now    func() time.Time
	checks checks
}

var _ Verifier = (*jwtVerifier)(nil)

// NewHS256 returns a Verifier of HS256 tokens signed with secret, with the claim checks of
// opts. It returns ErrBadKey for an empty secret. The verifier keeps its own copy of secret.
func NewHS256(secret []byte, opts ...Option) (Verifier, error) {
	if len(secret) == 0 {
		return nil, fmt.Errorf("%w: empty hs256 secret", ErrBadKey)
	}
	return &jwtVerifier{alg: jwt.SigningMethodHS256.Alg(), key: bytes.Clone(secret), now: time.Now, checks: newChecks(opts)}, nil
}

// NewPublicKey returns a Verifier for a PEM public key (PKIX "PUBLIC KEY", PKCS#1
// "RSA PUBLIC KEY" or an X.509 "CERTIFICATE"): RS256 for an RSA key, ES256 for a P-256 ECDSA key.
// Other keys give ErrBadKey. opts add claim checks.
func NewPublicKey(pemBytes []byte, opts ...Option) (Verifier, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("%w: no pem block", ErrBadKey)
	}
	var pub any
	var err error
	switch block.Type {
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		cert, err = x509.ParseCertificate(block.Bytes)
		if err == nil {
			pub = cert.PublicKey
		}
	default:
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: parse %s: %v", ErrBadKey, block.Type, err)
	}
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return &jwtVerifier{alg: jwt.SigningMethodRS256.Alg(), key: k, now: time.Now, checks: newChecks(opts)}, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: ecdsa key is not p-256 (es256)", ErrBadKey)
		}
		return &jwtVerifier{alg: jwt.SigningMethodES256.Alg(), key: k, now: time.Now, checks: newChecks(opts)}, nil
	default:
		return nil, fmt.Errorf("%w: unsupported public key type %T", ErrBadKey, pub)
	}
}

// LoadSecret reads an HS256 secret file; surrounding whitespace (a trailing newline) is
// removed. An empty secret gives ErrBadKey.
func LoadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: read secret file: %v", ErrBadKey, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: secret file %s is empty", ErrBadKey, path)
	}
	return b, nil
}

// LoadVerifier builds a Verifier from exactly one of an HS256 secret file (see LoadSecret) and
// a PEM public key file (see NewPublicKey), with the claim checks of opts. Neither or both
// give ErrBadKey.
func LoadVerifier(secretFile, publicKeyFile string, opts ...Option) (Verifier, error) {
	switch {
	case secretFile != "" && publicKeyFile != "":
		return nil, fmt.Errorf("%w: give a secret file or a public key file, not both", ErrBadKey)
	case secretFile != "":
		secret, err := LoadSecret(secretFile)
		if err != nil {
			return nil, err
		}
		return NewHS256(secret, opts...)
	case publicKeyFile != "":
		b, err := os.ReadFile(publicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: read public key file: %v", ErrBadKey, err)
		}
		return NewPublicKey(b, opts...)
	default:
		return nil, fmt.Errorf("%w: jwt auth needs a secret file or a public key file", ErrBadKey)
	}
}

// errCritical refuses a token whose header has crit: dair knows no critical parameter.
var errCritical = errors.New("the header names critical parameters (crit), which dair does not support")

// claimKind names the JSON value of a claim of kind k.
func claimKind(k reflect.Kind) string {
	switch k {
	case reflect.Slice:
		return "an array of strings"
	case reflect.String, reflect.Pointer:
		return "a string"
	case reflect.Struct:
		return "a number"
	}
	return "another value"
}

// Verify implements Verifier. Beyond the signature and algorithm it refuses a token that has
// expired, is not yet valid (nbf) or was issued in the future (iat), each with a 5 s leeway;
// whose exp, iat or nbf is not an integer JSON number; and, when the verifier checks them,
// whose aud does not contain the audience or whose iss differs from the issuer.
func (v *jwtVerifier) Verify(token string) (*Claims, error) {
	var tc tokenClaims
	_, err := jwt.ParseWithClaims(token, &tc, func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok { // RFC 7515 4.1.11: unknown critical parameters refuse the token
			return nil, errCritical
		}
		return v.key, nil
	}, v.parserOptions()...)
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		return nil, fmt.Errorf("%w: claim %q: want %s, got %s", ErrInvalidToken, te.Field, claimKind(te.Type.Kind()), te.Value)
	case errors.Is(err, jwt.ErrTokenExpired):
		if terr := checkTimeClaims(token); terr != nil {
			return nil, terr // exp 1e30 overflows into the past: say what is wrong with it
		}
		return nil, fmt.Errorf("%w: %v", ErrTokenExpired, err)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && tc.ExpiresAt == nil:
		return nil, fmt.Errorf("%w: exp", ErrMissingClaim)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if err := checkTimeClaims(token); err != nil {
		return nil, err
	}
	c := &Claims{Subject: tc.Subject, Roles: tc.Roles, Audience: tc.Audience, Issuer: tc.Issuer}
	if tc.TenantID != nil {
		c.TenantID = *tc.TenantID
	}
	if tc.OrgID != nil {
		c.OrgID = *tc.OrgID
	}
	if tc.ExpiresAt != nil {
		c.ExpiresAt = tc.ExpiresAt.UTC()
	}
	if err := checkClaims(c); err != nil {
		return nil, err
	}
	return c, nil
}

// checkClaims returns ErrMissingClaim for the first empty required claim.
func checkClaims(c *Claims) error {
	switch {
	case c.TenantID == "":
		return fmt.Errorf("%w: tenant_id", ErrMissingClaim)
	case tenancy.ValidateTenantID(c.TenantID) != nil:
		return fmt.Errorf("%w: tenant_id %q is not a tenant id (%s)", ErrInvalidToken, c.TenantID, tenancy.TenantIDRule)
	case c.OrgID == "":
		return fmt.Errorf("%w: org_id", ErrMissingClaim)
	case c.Subject == "":
		return fmt.Errorf("%w: sub", ErrMissingClaim)
	case len(c.Roles) == 0:
		return fmt.Errorf("%w: roles", ErrMissingClaim)
	case c.ExpiresAt.IsZero():
		return fmt.Errorf("%w: exp", ErrMissingClaim)
	}
	return nil
}

// MintHS256 signs c as an HS256 token (for `dair token` and tests). An empty OrgID defaults to
// TenantID and an empty Subject to TenantID; TenantID, Roles and ExpiresAt are required
// (ErrMissingClaim) and each role must be tenant, operator or admin (ErrUnknownRole).
func MintHS256(secret []byte, c Claims) (string, error) {
	if len(secret) == 0 {
		return "", fmt.Errorf("%w: empty hs256 secret", ErrBadKey)
	}
	if c.OrgID == "" {
		c.OrgID = c.TenantID
	}
	if c.Subject == "" {
		c.Subject = c.TenantID
	}
	if err := checkClaims(&c); err != nil {
		return "", err
	}
	for _, r := range c.Roles {
		if _, ok := roleRank[r]; !ok {
			return "", fmt.Errorf("%w: %q", ErrUnknownRole, r)
		}
	}
	return mint(jwt.SigningMethodHS256, secret, c, time.Now())
}

// mint signs c with method and key; now sets iat.
func mint(method jwt.SigningMethod, key any, c Claims, now time.Time) (string, error) {
	tenant, org := c.TenantID, c.OrgID
	tc := tokenClaims{TenantID: &tenant, OrgID: &org, Roles: c.Roles, RegisteredClaims: jwt.RegisteredClaims{
		Subject: c.Subject, ExpiresAt: jwt.NewNumericDate(c.ExpiresAt), IssuedAt: jwt.NewNumericDate(now),
		Audience: c.Audience, Issuer: c.Issuer,
	}}
	s, err := jwt.NewWithClaims(method, tc).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("auth: sign token: %w", err)
	}
	return s, nil
}
