package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// listInstances handles GET /v1/instances[?tenant_id=] (operator).
func (s *server) listInstances(w http.ResponseWriter, r *http.Request) {
	if err := requireRole(r, auth.RoleOperator); err != nil {
		s.fail(w, r, err)
		return
	}
	insts, err := s.node.ListInstances(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tenant := r.URL.Query().Get("tenant_id")
	if tenant != "" {
		if err := tenancy.ValidateTenantID(tenant); err != nil {
			s.fail(w, r, badRequest("api: %s", plain(err)))
			return
		}
	}
	out := httpapi.InstanceList{Instances: make([]httpapi.Instance, 0, len(insts))}
	for _, d := range insts {
		if tenant != "" && d.TenantId != tenant {
			continue
		}
		out.Instances = append(out.Instances, instanceFromMessage(d))
	}
	s.writeJSON(w, http.StatusOK, out)
}

// controlInstance handles POST /v1/instances/{id}/pause|resume|drain (operator) and answers
// the descriptor after the change.
func (s *server) controlInstance(op messages.ControlOp) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := requireRole(r, auth.RoleOperator); err != nil {
			s.fail(w, r, err)
			return
		}
		d, err := s.node.ControlInstance(r.Context(), r.PathValue("id"), op)
		if err != nil {
			s.fail(w, r, notFoundAs(err, "instance", r.PathValue("id")))
			return
		}
		s.writeJSON(w, http.StatusOK, instanceFromMessage(d))
	}
}

// drainQueue handles POST /v1/queue/drain (operator).
func (s *server) drainQueue(w http.ResponseWriter, r *http.Request) {
	if err := requireRole(r, auth.RoleOperator); err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := s.node.DrainQueue(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, httpapi.DrainResponse{Claimed: n})
}

// listTenants handles GET /v1/tenants (operator).
func (s *server) listTenants(w http.ResponseWriter, r *http.Request) {
	if err := requireRole(r, auth.RoleOperator); err != nil {
		s.fail(w, r, err)
		return
	}
	ts, err := s.node.ListTenants(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := httpapi.TenantList{Tenants: make([]httpapi.Tenant, 0, len(ts))}
	for _, t := range ts {
		out.Tenants = append(out.Tenants, tenantFromMessage(t))
	}
	s.writeJSON(w, http.StatusOK, out)
}

// tenantPath returns the {id} of a tenant route: a tenant id (a 400 naming the rule otherwise,
// so no store key is made of anything else).
func tenantPath(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := tenancy.ValidateTenantID(id); err != nil {
		if len(id) > 80 {
			id = id[:80] + "..."
		}
		return "", badRequest("api: invalid tenant_id %q in the path: want %s", id, tenancy.TenantIDRule)
	}
	return id, nil
}

// getTenant handles GET /v1/tenants/{id}: a tenant may read its own settings. A tenant that
// was never put answers 404 (it still submits, as shared: see CONTRACT.md).
func (s *server) getTenant(w http.ResponseWriter, r *http.Request) {
	id, err := tenantPath(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := requireTenant(r, id); err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := s.node.Store().GetTenant(r.Context(), id); err != nil {
		s.fail(w, r, notFoundAs(err, "tenant", id))
		return
	}
	t, err := s.node.GetTenant(r.Context(), id)
	if err != nil {
		s.fail(w, r, notFoundAs(err, "tenant", id))
		return
	}
	s.writeJSON(w, http.StatusOK, tenantFromMessage(t))
}

// putTenant handles PUT /v1/tenants/{id} (admin). A tenant_id in the body must equal the
// path's.
func (s *server) putTenant(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body httpapi.Tenant
	if err := decodeJSON(r, &body, false); err != nil { // the body before the role (docs/api.md)
		s.fail(w, r, err)
		return
	}
	if err := requireRole(r, auth.RoleAdmin); err != nil {
		s.fail(w, r, err)
		return
	}
	if body.TenantID != "" && body.TenantID != id {
		s.fail(w, r, badRequest("api: tenant_id %q in the body differs from %q in the path", body.TenantID, id))
		return
	}
	body.TenantID = id
	t, err := s.node.PutTenant(r.Context(), tenantToMessage(body))
	if errors.Is(err, actors.ErrBadInput) || errors.Is(err, tenancy.ErrInvalidSettings) {
		err = &requestError{code: httpapi.CodeInvalidSettings, msg: publicMessage(err.Error())}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, tenantFromMessage(t))
}

// suspendTenant handles POST /v1/tenants/{id}/suspend|resume (admin).
func (s *server) suspendTenant(suspended bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := requireRole(r, auth.RoleAdmin); err != nil {
			s.fail(w, r, err)
			return
		}
		id, err := tenantPath(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		t, err := s.node.SetSuspended(r.Context(), id, suspended)
		if err != nil {
			s.fail(w, r, notFoundAs(err, "tenant", id))
			return
		}
		s.writeJSON(w, http.StatusOK, tenantFromMessage(t))
	}
}

// putPipeline handles PUT /v1/pipelines/{key} (admin): the body is the YAML or JSON document
// and its key must equal the path's.
func (s *server) putPipeline(w http.ResponseWriter, r *http.Request) {
	// The body (a pure parse) before the role, as docs/api.md orders the checks.
	src, parsed, err := s.pipelineBody(r, "api: request body is empty")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := requireRole(r, auth.RoleAdmin); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := s.node.PutPipeline(r.Context(), src)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pv, err := s.node.Store().GetPipeline(r.Context(), p.Key, p.Hash)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := s.pipelineView(r, pv, true)
	out.Warnings = parsed.InputWarnings()
	s.writeJSON(w, http.StatusOK, out)
}

// pipelineBody reads the pipeline document of a request to /v1/pipelines/{key}[/check] and
// returns it with its parse: an empty body is a bad request (emptyMsg says so), and the
// document must be within the limits, parse, and carry the path's key. The limits are checked
// before the node validates: parsing is linear in the document.
func (s *server) pipelineBody(r *http.Request, emptyMsg string) ([]byte, *dag.Pipeline, error) {
	src, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, err
	}
	if len(src) == 0 {
		return nil, nil, badRequest("%s", emptyMsg)
	}
	key := r.PathValue("key")
	if err := s.cfg.Limits.CheckDocument(src); err != nil {
		return nil, nil, err
	}
	parsed, err := dag.Parse(src)
	if err != nil {
		return nil, nil, err
	}
	if parsed.Key != key {
		return nil, nil, badRequest("api: pipeline key %q in the body differs from %q in the path", parsed.Key, key)
	}
	if err := s.cfg.Limits.Check(parsed); err != nil {
		return nil, nil, err
	}
	return src, parsed, nil
}

// listPipelines handles GET /v1/pipelines.
func (s *server) listPipelines(w http.ResponseWriter, r *http.Request) {
	if err := requireRole(r, auth.RoleTenant); err != nil {
		s.fail(w, r, err)
		return
	}
	ps, err := s.node.ListPipelines(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := httpapi.PipelineList{Pipelines: make([]httpapi.Pipeline, 0, len(ps))}
	for _, p := range ps {
		out.Pipelines = append(out.Pipelines, s.pipelineView(r, p, false))
	}
	s.writeJSON(w, http.StatusOK, out)
}

// pipelineExists reports whether any version of pipeline key is stored.
func (s *server) pipelineExists(r *http.Request, key string) bool {
	_, err := s.node.Store().GetPipeline(r.Context(), key, "")
	return err == nil
}

// getPipeline handles GET /v1/pipelines/{key}[?hash=].
func (s *server) getPipeline(w http.ResponseWriter, r *http.Request) {
	if err := requireRole(r, auth.RoleTenant); err != nil {
		s.fail(w, r, err)
		return
	}
	key, hash := r.PathValue("key"), r.URL.Query().Get("hash")
	pv, err := s.node.Store().GetPipeline(r.Context(), key, hash)
	if err != nil {
		if hash != "" && errors.Is(err, store.ErrNotFound) && s.pipelineExists(r, key) {
			// Name the version: the pipeline may well exist at other hashes.
			err = &httpError{status: http.StatusNotFound, code: httpapi.CodeNotFound,
				msg: fmt.Sprintf("api: pipeline %q has no version with hash %q", key, hash)}
		}
		s.fail(w, r, notFoundAs(err, "pipeline", key))
		return
	}
	s.writeJSON(w, http.StatusOK, s.pipelineView(r, pv, true))
}
