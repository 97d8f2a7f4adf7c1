package auth_test

import (
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/auth"
)

func ExampleMintHS256() {
	secret := []byte("example-secret")
	tok, err := auth.MintHS256(secret, auth.Claims{TenantID: "acme", Subject: "alice",
		Roles: []string{auth.RoleTenant}, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := auth.NewHS256(secret)
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := v.Verify(tok)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.TenantID, c.OrgID, c.Subject, c.CanAccessTenant("acme"), c.CanAccessTenant("other"))
	// Output: acme acme alice true false
}
