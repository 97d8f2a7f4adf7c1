package api

import (
	"net/http"
	"time"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/store"
)

// usage handles GET /v1/tenants/{id}/usage?from=&to= (RFC 3339, each optional; events with
// from <= at < to). A tenant reads its own usage only (403 otherwise); operators and admins
// read any tenant's. Totals count run and step events and sum the step figures.
func (s *server) usage(w http.ResponseWriter, r *http.Request) {
	id, err := tenantPath(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := requireTenant(r, id); err != nil {
		s.fail(w, r, err)
		return
	}
	from, err := queryTime(r, "from")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	to, err := queryTime(r, "to")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if from != nil && to != nil && to.Before(*from) {
		s.fail(w, r, badRequest("api: to (%s) is before from (%s)", to.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano)))
		return
	}
	f := store.UsageFilter{TenantID: id}
	if from != nil {
		f.From = *from
	}
	if to != nil {
		f.To = *to
	}
	events, err := s.node.Store().ListUsage(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := httpapi.UsageReport{TenantID: id, From: from, To: to, Events: make([]httpapi.UsageEvent, 0, len(events))}
	for _, ev := range events {
		v := usageEventFromMessage(ev)
		addUsage(&out.Totals, v)
		out.Events = append(out.Events, v)
	}
	s.writeJSON(w, http.StatusOK, out)
}

// queryTime parses an optional RFC 3339 query parameter; absent means nil.
func queryTime(r *http.Request, name string) (*time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, badRequest("api: %s must be an RFC 3339 time such as 2026-12-02T15:04:05Z, got %q", name, v)
	}
	t = t.UTC()
	return &t, nil
}
