package auth

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestVerifier_Verify_claimChecks has one row per malformed or mismatched claim of issue 9.
func TestVerifier_Verify_claimChecks(t *testing.T) {
	now := time.Now()
	base := func(extra jwt.MapClaims) jwt.MapClaims {
		m := jwt.MapClaims{"tenant_id": "acme", "org_id": "o", "sub": "s", "roles": []string{"tenant"},
			"exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
				continue
			}
			m[k] = v
		}
		return m
	}
	plain, err := NewHS256(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := NewHS256(testSecret, WithAudience("dair-api"), WithIssuer("https://idp.example"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		v      Verifier
		claims jwt.MapClaims
		want   error // nil => accepted
	}{
		{"valid", plain, base(nil), nil},
		{"iat within the leeway", plain, base(jwt.MapClaims{"iat": now.Add(3 * time.Second).Unix()}), nil},
		{"iat in the future", plain, base(jwt.MapClaims{"iat": now.Add(time.Hour).Unix()}), ErrInvalidToken},
		{"string exp", plain, base(jwt.MapClaims{"exp": "9999999999"}), ErrInvalidToken},
		{"float exp", plain, base(jwt.MapClaims{"exp": float64(now.Add(time.Hour).Unix()) + 0.5}), ErrInvalidToken},
		{"word exp", plain, base(jwt.MapClaims{"exp": "tomorrow"}), ErrInvalidToken},
		{"string iat", plain, base(jwt.MapClaims{"iat": "1700000000"}), ErrInvalidToken},
		{"string nbf", plain, base(jwt.MapClaims{"nbf": "1700000000"}), ErrInvalidToken},
		{"bool nbf", plain, base(jwt.MapClaims{"nbf": true}), ErrInvalidToken},
		{"nbf in the future", plain, base(jwt.MapClaims{"nbf": now.Add(time.Hour).Unix()}), ErrInvalidToken},
		{"any aud and iss without checks", plain, base(jwt.MapClaims{"aud": "other", "iss": "someone"}), nil},
		{"matching aud and iss", strict, base(jwt.MapClaims{"aud": []string{"x", "dair-api"}, "iss": "https://idp.example"}), nil},
		{"wrong aud", strict, base(jwt.MapClaims{"aud": "other", "iss": "https://idp.example"}), ErrInvalidToken},
		{"missing aud", strict, base(jwt.MapClaims{"iss": "https://idp.example"}), ErrInvalidToken},
		{"wrong iss", strict, base(jwt.MapClaims{"aud": "dair-api", "iss": "https://evil.example"}), ErrInvalidToken},
		{"missing iss", strict, base(jwt.MapClaims{"aud": "dair-api"}), ErrInvalidToken},
		{"missing exp with checks", strict, base(jwt.MapClaims{"exp": nil, "aud": "dair-api", "iss": "https://idp.example"}), ErrMissingClaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.v.Verify(signMap(t, jwt.SigningMethodHS256, testSecret, tt.claims))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestMintHS256_audienceAndIssuer(t *testing.T) {
	c := validClaims()
	c.Audience, c.Issuer = []string{"dair-api"}, "dair"
	tok, err := MintHS256(testSecret, c)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewHS256(testSecret, WithAudience("dair-api"), WithIssuer("dair"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.Issuer != "dair" || len(got.Audience) != 1 || got.Audience[0] != "dair-api" {
		t.Fatalf("claims = %+v", got)
	}
}
