package api

import (
	"net/http"
	"slices"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/auth"
)

// listMembers handles GET /v1/cluster/members (operator): the node's current membership view.
// A node without cluster membership answers 404 not_found.
func (s *server) listMembers(w http.ResponseWriter, r *http.Request) {
	if err := requireRole(r, auth.RoleOperator); err != nil {
		s.fail(w, r, err)
		return
	}
	m := s.cfg.Cluster
	if m == nil {
		s.writeError(w, http.StatusNotFound, httpapi.CodeNotFound, "api: this node is not a cluster member")
		return
	}
	ms := m.Members()
	out := httpapi.MemberList{Self: m.Self().ID, Members: make([]httpapi.ClusterMember, 0, len(ms))}
	for _, x := range ms {
		out.Members = append(out.Members, httpapi.ClusterMember{ID: x.ID, NodeID: x.NodeID, Address: x.Address,
			Roles: slices.Clone(x.Roles)})
	}
	s.writeJSON(w, http.StatusOK, out)
}
