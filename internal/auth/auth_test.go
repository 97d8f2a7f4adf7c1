package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var testSecret = []byte("test-secret-0123456789abcdef")

func validClaims() Claims {
	return Claims{TenantID: "acme", OrgID: "org1", Subject: "alice", Roles: []string{RoleTenant},
		ExpiresAt: time.Now().Add(time.Hour)}
}

func signMap(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func TestVerifier_Verify_hs256(t *testing.T) {
	v, err := NewHS256(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	good, err := MintHS256(testSecret, validClaims())
	if err != nil {
		t.Fatal(err)
	}
	other, err := MintHS256([]byte("another-secret"), validClaims())
	if err != nil {
		t.Fatal(err)
	}
	expiredClaims := validClaims()
	expiredClaims.ExpiresAt = time.Now().Add(-time.Hour)
	expired, err := mint(jwt.SigningMethodHS256, testSecret, expiredClaims, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	full := jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "s", "roles": []string{"tenant"}, "exp": exp}
	without := func(k string) jwt.MapClaims {
		m := jwt.MapClaims{}
		for kk, vv := range full {
			if kk != k {
				m[kk] = vv
			}
		}
		return m
	}
	none := signMap(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, full)
	critTok := jwt.NewWithClaims(jwt.SigningMethodHS256, full)
	critTok.Header["crit"] = []string{"exp"}
	crit, err := critTok.SignedString(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	rolesText := jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "s", "roles": "admin", "exp": exp}
	hs512 := signMap(t, jwt.SigningMethodHS512, testSecret, full)

	tests := []struct {
		name  string
		token string
		want  error
	}{
		{"valid", good, nil},
		{"bad signature", other, ErrInvalidToken},
		{"expired", expired, ErrTokenExpired},
		{"alg none", none, ErrInvalidToken},
		{"unexpected alg", hs512, ErrInvalidToken},
		{"garbage", "not.a.token", ErrInvalidToken},
		{"empty", "", ErrInvalidToken},
		{"missing tenant_id", signMap(t, jwt.SigningMethodHS256, testSecret, without("tenant_id")), ErrMissingClaim},
		{"tenant_id that is no tenant id", signMap(t, jwt.SigningMethodHS256, testSecret,
			jwt.MapClaims{"tenant_id": "../../etc", "org_id": "o", "sub": "s", "roles": []string{"tenant"}, "exp": exp}), ErrInvalidToken},
		{"missing org_id", signMap(t, jwt.SigningMethodHS256, testSecret, without("org_id")), ErrMissingClaim},
		{"missing sub", signMap(t, jwt.SigningMethodHS256, testSecret, without("sub")), ErrMissingClaim},
		{"missing roles", signMap(t, jwt.SigningMethodHS256, testSecret, without("roles")), ErrMissingClaim},
		{"missing exp", signMap(t, jwt.SigningMethodHS256, testSecret, without("exp")), ErrMissingClaim},
		{"critical header parameters", crit, ErrInvalidToken},
		{"exp that overflows", signMap(t, jwt.SigningMethodHS256, testSecret,
			jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "s", "roles": []string{"tenant"}, "exp": 1e30}), ErrInvalidToken},
		{"roles not an array", signMap(t, jwt.SigningMethodHS256, testSecret, rolesText), ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(tt.token)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("Verify err = %v, want %v", err, tt.want)
				}
				if strings.Contains(err.Error(), "Go struct") || strings.Contains(err.Error(), "tokenClaims") {
					t.Fatalf("Verify err = %v names Go types", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if c.TenantID != "acme" || c.OrgID != "org1" || c.Subject != "alice" || len(c.Roles) != 1 || c.ExpiresAt.IsZero() {
				t.Fatalf("claims = %+v", c)
			}
		})
	}
}

func writePEM(t *testing.T, typ string, der []byte) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestVerifier_Verify_publicKey(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := writePEM(t, "PUBLIC KEY", rsaDER)
	ecPEM := writePEM(t, "PUBLIC KEY", ecDER)
	rsaTok, err := mint(jwt.SigningMethodRS256, rsaKey, validClaims(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ecTok, err := mint(jwt.SigningMethodES256, ecKey, validClaims(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Key confusion: an HS256 token whose secret is the RSA public key PEM.
	confused, err := mint(jwt.SigningMethodHS256, rsaPEM, validClaims(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		pem   []byte
		token string
		want  error
	}{
		{"rs256 valid", rsaPEM, rsaTok, nil},
		{"rs256 pkcs1 valid", writePEM(t, "RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)), rsaTok, nil},
		{"es256 valid", ecPEM, ecTok, nil},
		{"es256 token on rsa key", rsaPEM, ecTok, ErrInvalidToken},
		{"hs256 key confusion", rsaPEM, confused, ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewPublicKey(tt.pem)
			if err != nil {
				t.Fatalf("NewPublicKey: %v", err)
			}
			_, err = v.Verify(tt.token)
			if tt.want == nil && err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Verify err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestNewPublicKey_bad(t *testing.T) {
	tests := []struct {
		name string
		pem  []byte
	}{
		{"empty", nil},
		{"not pem", []byte("hello")},
		{"garbage block", writePEM(t, "PUBLIC KEY", []byte{1, 2, 3})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewPublicKey(tt.pem); !errors.Is(err, ErrBadKey) {
				t.Fatalf("err = %v, want ErrBadKey", err)
			}
		})
	}
}

func TestLoadVerifier_files(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, append(testSecret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		secret, pub   string
		wantErr       bool
		verifiesToken bool
	}{
		{"secret", secretFile, "", false, true},
		{"neither", "", "", true, false},
		{"both", secretFile, secretFile, true, false},
		{"missing file", filepath.Join(dir, "nope"), "", true, false},
		{"empty secret", emptyFile, "", true, false},
		{"bad public key", "", secretFile, true, false},
	}
	tok, err := MintHS256(testSecret, validClaims())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := LoadVerifier(tt.secret, tt.pub)
			if tt.wantErr {
				if !errors.Is(err, ErrBadKey) {
					t.Fatalf("err = %v, want ErrBadKey", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(tok); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

func TestMintHS256_errors(t *testing.T) {
	tests := []struct {
		name   string
		secret []byte
		mod    func(*Claims)
		want   error
	}{
		{"empty secret", nil, func(*Claims) {}, ErrBadKey},
		{"no tenant", testSecret, func(c *Claims) { c.TenantID, c.OrgID, c.Subject = "", "", "" }, ErrMissingClaim},
		{"no roles", testSecret, func(c *Claims) { c.Roles = nil }, ErrMissingClaim},
		{"no exp", testSecret, func(c *Claims) { c.ExpiresAt = time.Time{} }, ErrMissingClaim},
		{"unknown role", testSecret, func(c *Claims) { c.Roles = []string{"root"} }, ErrUnknownRole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validClaims()
			tt.mod(&c)
			if _, err := MintHS256(tt.secret, c); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestClaims_HasRole_matrix(t *testing.T) {
	tests := []struct {
		roles                   []string
		tenant, operator, admin bool
	}{
		{[]string{RoleTenant}, true, false, false},
		{[]string{RoleOperator}, true, true, false},
		{[]string{RoleAdmin}, true, true, true},
		{[]string{"viewer"}, false, false, false},
		{nil, false, false, false},
	}
	for _, tt := range tests {
		t.Run(fmtRoles(tt.roles), func(t *testing.T) {
			c := &Claims{TenantID: "a", Roles: tt.roles}
			if c.HasRole(RoleTenant) != tt.tenant || c.HasRole(RoleOperator) != tt.operator || c.HasRole(RoleAdmin) != tt.admin {
				t.Fatalf("HasRole mismatch for %v", tt.roles)
			}
			if c.CanAccessTenant("a") != tt.tenant {
				t.Fatalf("CanAccessTenant(own) = %v", c.CanAccessTenant("a"))
			}
			if c.CanAccessTenant("b") != tt.operator {
				t.Fatalf("CanAccessTenant(other) = %v", c.CanAccessTenant("b"))
			}
		})
	}
	var nilClaims *Claims
	if nilClaims.HasRole(RoleTenant) || nilClaims.CanAccessTenant("a") {
		t.Fatal("nil claims must have no role")
	}
}

func fmtRoles(r []string) string {
	if len(r) == 0 {
		return "none"
	}
	return r[0]
}
