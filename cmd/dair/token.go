package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/tenancy"
)

func newTokenCmd(a *app) *cobra.Command {
	var (
		c          auth.Claims
		roles      []string
		secretFile string
		ttl        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "token",
		Short: "mint an HS256 JWT for development",
		Args:  exactArgs(),
		RunE: func(*cobra.Command, []string) error {
			if c.TenantID == "" || secretFile == "" || len(roles) == 0 {
				return usagef("token needs --tenant, --roles and --secret-file")
			}
			if err := tenancy.ValidateTenantID(c.TenantID); err != nil {
				return usagef("--tenant: %v", err)
			}
			if ttl <= 0 {
				return usagef("--ttl must be positive")
			}
			secret, err := auth.LoadSecret(secretFile)
			if err != nil {
				return err
			}
			for _, r := range roles {
				c.Roles = append(c.Roles, strings.TrimSpace(r))
			}
			c.ExpiresAt = time.Now().Add(ttl)
			tok, err := auth.MintHS256(secret, c)
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(map[string]any{"token": tok, "expires_at": c.ExpiresAt.UTC().Format(time.RFC3339)})
			}
			_, err = fmt.Fprintln(a.stdout, tok)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&c.TenantID, "tenant", "", "tenant id (claim tenant_id)")
	fs.StringSliceVar(&roles, "roles", nil, "roles: tenant, operator, admin")
	fs.StringVar(&secretFile, "secret-file", "", "HS256 secret file")
	fs.DurationVar(&ttl, "ttl", 24*time.Hour, "validity")
	fs.StringVar(&c.OrgID, "org", "", "organisation (claim org_id; default the tenant)")
	fs.StringVar(&c.Subject, "sub", "", "subject (claim sub; default the tenant)")
	fs.StringSliceVar(&c.Audience, "audience", nil, "audience (claim aud; for nodes started with --jwt-audience)")
	fs.StringVar(&c.Issuer, "issuer", "", "issuer (claim iss; for nodes started with --jwt-issuer)")
	return cmd
}
