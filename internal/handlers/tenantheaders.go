package handlers

import (
	"net/http"

	"github.com/dairuntime/dair/messages"
)

// setTenantHeaders sets the tenant metadata headers (x-tenant-id, x-org-id, x-user-id) of s on
// h: dair sends them on every outbound call it makes on a run's behalf. A `with.headers` value
// for the same name is replaced: the tenant context comes from the run, not from its input.
func setTenantHeaders(h http.Header, s *messages.ExecutionContextSnapshot) {
	for _, kv := range messages.TenantMetadata(s) {
		h.Set(kv[0], kv[1])
	}
}
