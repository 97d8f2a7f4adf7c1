package netaddr

import "testing"

func TestFreeAddr_neverTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		a, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("%s returned twice", a)
		}
		seen[a] = true
	}
}
