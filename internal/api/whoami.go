package api

import (
	"net/http"
	"slices"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
)

// whoami handles GET /v1/whoami: the verified caller's identity and roles, so a client (the
// dashboard) can show only what the token may do. Any valid token may ask.
func (s *server) whoami(w http.ResponseWriter, r *http.Request) {
	c := auth.FromContext(r.Context())
	out := httpapi.Whoami{Auth: "none", Roles: []string{}}
	if s.authOn() {
		out.Auth = "jwt"
	}
	if c != nil {
		out.Subject, out.TenantID, out.OrgID = c.Subject, c.TenantID, c.OrgID
		out.Roles = append(out.Roles, slices.Clone(c.Roles)...)
		if !c.ExpiresAt.IsZero() {
			t := c.ExpiresAt.UTC()
			out.ExpiresAt = &t
		}
	}
	s.writeJSON(w, http.StatusOK, out)
}
