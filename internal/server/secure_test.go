package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/testkit"
)

// getStatus GETs url with an optional bearer token and returns the status.
func getStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, errors.Join(err, resp.Body.Close()))
	return resp.StatusCode
}

// secureOptions are options with JWT auth (audience "dair", issuer "idp"), /metrics behind the
// token, and the secret they use.
func secureOptions(t *testing.T) (Options, []byte) {
	t.Helper()
	secret := []byte("secure-test-secret-0123456789")
	file := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(file, secret, 0o600))
	o := DevOptions()
	o.DataDir, o.Auth, o.JWTSecretFile, o.JWTAudience, o.JWTIssuer, o.MetricsAuth = t.TempDir(), AuthJWT, file, "dair", "idp", true
	return o, secret
}

func mint(t *testing.T, secret []byte, aud []string, iss string) string {
	t.Helper()
	tok, err := auth.MintHS256(secret, auth.Claims{TenantID: "ops", Roles: []string{auth.RoleOperator},
		ExpiresAt: time.Now().Add(time.Hour), Audience: aud, Issuer: iss})
	require.NoError(t, err)
	return tok
}

// checkSecured checks /metrics and an API call of a node started with secureOptions.
func checkSecured(t *testing.T, addr string, secret []byte) {
	t.Helper()
	good := mint(t, secret, []string{"dair"}, "idp")
	require.Equal(t, http.StatusUnauthorized, getStatus(t, addr+"/metrics", ""))
	require.Equal(t, http.StatusOK, getStatus(t, addr+"/metrics", good))
	require.Equal(t, http.StatusOK, getStatus(t, addr+"/v1/runs", good))
	require.Equal(t, http.StatusUnauthorized, getStatus(t, addr+"/v1/runs", mint(t, secret, nil, "")), "token without aud/iss")
	require.Equal(t, http.StatusUnauthorized, getStatus(t, addr+"/v1/runs", mint(t, secret, []string{"other"}, "idp")), "wrong aud")
	require.Equal(t, http.StatusOK, getStatus(t, addr+"/healthz", ""))
}

func TestRun_Serve_secureSingleNode(t *testing.T) {
	o, secret := secureOptions(t)
	s := startRun(t, o)
	checkSecured(t, s.addr, secret)
}

func TestRun_Serve_secureClusterNode(t *testing.T) {
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	o, secret := secureOptions(t)
	ca := testkit.NewTestCA(t, "ca")
	nc := ca.Issue(t, "n1")
	o.StoreURL, o.BindAddr, o.NodeID, o.ClusterProfile = r.URL(), "127.0.0.1:0", "n1", "local"
	o.TLSCert, o.TLSKey, o.TLSCA = nc.CertFile, nc.KeyFile, nc.CAFile
	s := startRun(t, o)
	checkSecured(t, s.addr, secret)
}

func TestRun_Start_badTLSFiles(t *testing.T) {
	testkit.RequireRedis(t)
	r := testkit.StartRedis(t, testkit.RedisOptions{})
	o := DevOptions()
	o.DataDir, o.HTTPAddr, o.LogOutput = t.TempDir(), "127.0.0.1:0", io.Discard
	o.StoreURL, o.BindAddr, o.NodeID = r.URL(), "127.0.0.1:0", "n1"
	missing := filepath.Join(t.TempDir(), "missing.pem")
	o.TLSCert, o.TLSKey, o.TLSCA = missing, missing, missing
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Run(ctx, o)
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.ErrorContains(t, err, "tls certificate")
}
