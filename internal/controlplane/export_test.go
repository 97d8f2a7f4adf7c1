package controlplane

import (
	"context"

	"github.com/dairuntime/dair/messages"
)

// RecoverLost is Recoverer.recoverLost for the package's tests: it recovers runs as a round
// that listed them (possibly a while ago) does.
func RecoverLost(ctx context.Context, r *Recoverer, runs []*messages.SharedRun) {
	r.recoverLost(ctx, runs, "runtime-instance-lost")
}
