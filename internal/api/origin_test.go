package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/dairuntime/dair/internal/auth"
)

// TestServer_guardOrigin: with auth none, what a web page could send is refused (another
// origin, a host name other than localhost: DNS rebinding); clients without Origin, the
// page's own origin, localhost and IP hosts pass; with tokens on nothing is refused for it.
func TestServer_guardOrigin(t *testing.T) {
	open := newFixture(t, false, nil)
	open.putPipeline(threeStep)
	withAuth := newFixture(t, true, nil)
	withAuth.token = mintToken(t, "acme", auth.RoleAdmin)
	self := strings.TrimPrefix(open.srv.URL, "http://")
	for _, tc := range []struct {
		name         string
		f            *fixture
		host, origin string
		want         int
	}{
		{"no origin", open, "", "", http.StatusOK},
		{"same origin", open, "", "http://" + self, http.StatusOK},
		{"localhost", open, "localhost:8080", "", http.StatusOK},
		{"ipv6 loopback", open, "[::1]:8080", "", http.StatusOK},
		{"another origin", open, "", "http://attacker.example", http.StatusForbidden},
		{"origin null", open, "", "null", http.StatusForbidden},
		{"a host name", open, "rebind.attacker.example:8080", "", http.StatusForbidden},
		{"a host name and its own origin", open, "rebind.attacker.example", "http://rebind.attacker.example", http.StatusForbidden},
		{"tokens on: another origin", withAuth, "", "http://attacker.example", http.StatusOK},
		{"tokens on: a host name", withAuth, "dair.internal:8080", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tc.f.srv.URL+"/v1/tenants", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.f.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.f.token)
			}
			resp, err := tc.f.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			closeBody(t, resp)
			if resp.StatusCode != tc.want {
				t.Fatalf("GET /v1/tenants = %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	// A form post from another origin does not submit.
	code, body := open.do(http.MethodPost, "/v1/runs", `{"pipeline":"three","tenant_id":"acme"}`, "Origin", "http://attacker.example", "Content-Type", "text/plain")
	if code != http.StatusForbidden || !strings.Contains(string(body), "another origin") {
		t.Fatalf("cross-origin submit = %d %s, want 403", code, body)
	}
}
