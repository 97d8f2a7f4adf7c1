package demo

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/dairuntime/dair/testkit/leak"
)

// TestMain checks that Run leaves no goroutine behind: node, servers and store all stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leak.Protoactor()...) }
