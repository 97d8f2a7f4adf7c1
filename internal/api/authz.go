package api

import (
	"net/http"
	"strings"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/messages"
)

// anonymous is the caller of every request when auth is none: an admin without a tenant. It is
// shared by all requests and never modified (handlers only read claims).
var anonymous = &auth.Claims{Subject: "anonymous", Roles: []string{auth.RoleAdmin}}

// authenticate verifies the bearer token (when auth is on) and stores the caller's claims in
// the request context. With auth none the caller is an admin without a tenant of its own.
func (s *server) authenticate(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Auth == nil {
			next(w, r.WithContext(auth.NewContext(r.Context(), anonymous)))
			return
		}
		h := r.Header.Get("Authorization")
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dair"`)
			s.writeError(w, http.StatusUnauthorized, httpapi.CodeUnauthenticated, "api: missing bearer token")
			return
		}
		c, err := s.cfg.Auth.Verify(strings.TrimSpace(tok))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dair", error="invalid_token"`)
			s.writeError(w, http.StatusUnauthorized, httpapi.CodeUnauthenticated, publicMessage(err.Error()))
			return
		}
		next(w, r.WithContext(auth.NewContext(r.Context(), c)))
	})
}

// authOn reports whether tokens are verified.
func (s *server) authOn() bool { return s.cfg.Auth != nil }

// requireRole returns a 403 error unless the caller has role (counting inclusion).
func requireRole(r *http.Request, role string) error {
	if !auth.FromContext(r.Context()).HasRole(role) {
		return forbidden("api: the %s role is required", role)
	}
	return nil
}

// requireTenant returns a 403 error unless the caller may act on tenantID.
func requireTenant(r *http.Request, tenantID string) error {
	c := auth.FromContext(r.Context())
	if !c.HasRole(auth.RoleTenant) {
		return forbidden("api: the %s role is required", auth.RoleTenant)
	}
	if !c.CanAccessTenant(tenantID) {
		return forbidden("api: not allowed for tenant %q", tenantID)
	}
	return nil
}

// submitSnapshot builds the verified tenant context of a submission. The request names its
// tenant as tenant_id in the body or the query (both: they must agree, else a 400). With auth
// on the context comes from the token only; a named tenant different from the token's is a
// 403. With auth none the named tenant (default "default") is used.
func (s *server) submitSnapshot(r *http.Request, bodyTenant, correlationID string) (*messages.ExecutionContextSnapshot, error) {
	c := auth.FromContext(r.Context())
	if q := r.URL.Query().Get("tenant_id"); q != "" {
		if bodyTenant != "" && bodyTenant != q {
			return nil, badRequest("api: tenant_id %q in the query differs from tenant_id %q in the body", q, bodyTenant)
		}
		bodyTenant = q
	}
	if !s.authOn() {
		t := bodyTenant
		if t == "" {
			t = DefaultTenant
		}
		return &messages.ExecutionContextSnapshot{TenantId: t, UserId: c.Subject, RequestedBy: c.Subject,
			Roles: append([]string(nil), c.Roles...), Source: "http", CorrelationId: correlationID}, nil
	}
	if !c.HasRole(auth.RoleTenant) {
		return nil, forbidden("api: the %s role is required", auth.RoleTenant)
	}
	if bodyTenant != "" && bodyTenant != c.TenantID {
		return nil, forbidden("api: tenant_id %q differs from the token's tenant", bodyTenant)
	}
	return &messages.ExecutionContextSnapshot{TenantId: c.TenantID, OrgId: c.OrgID, UserId: c.Subject,
		Roles: append([]string(nil), c.Roles...), RequestedBy: c.Subject, Source: "http", CorrelationId: correlationID}, nil
}
