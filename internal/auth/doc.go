// Package auth verifies and mints the JSON Web Tokens that authenticate callers of the dair HTTP
// API and MCP server, and holds the role rules that decide what a verified caller may do.
//
// A token carries the claims tenant_id, org_id, sub, roles and exp; all are required. Tokens are
// signed with HS256 (a shared secret) or, for verification by public key, RS256 or ES256. The
// "none" algorithm and any algorithm other than the verifier's are rejected.
//
// Roles are ordered: admin includes operator, operator includes tenant. A tenant acts only on its
// own tenant; operators and admins act on any tenant.
//
// # Usage
//
//	secret, err := auth.LoadSecret("jwt.secret")
//	if err != nil {
//		return err
//	}
//	tok, err := auth.MintHS256(secret, auth.Claims{TenantID: "acme", Subject: "alice",
//		Roles: []string{auth.RoleTenant}, ExpiresAt: time.Now().Add(time.Hour)})
//	if err != nil {
//		return err
//	}
//	v, err := auth.NewHS256(secret)
//	if err != nil {
//		return err
//	}
//	claims, err := v.Verify(tok) // claims.TenantID == "acme"
package auth
