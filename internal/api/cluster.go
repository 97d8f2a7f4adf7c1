package api

import (
	"net/http"
	"slices"

	"github.com/dairuntime/dair/internal/auth"
)

// ClusterMember is one alive cluster member as seen by the answering node (GET
// /v1/cluster/members). ID is the member (actor system) id, which changes whenever the node
// restarts its actor system; NodeID is the stable logical node id; Address is the actor remote
// host:port.
type ClusterMember struct {
	ID      string   `json:"id"`
	NodeID  string   `json:"node_id"`
	Address string   `json:"address"`
	Roles   []string `json:"roles"`
}

// MemberList is the answer of GET /v1/cluster/members. Self is the answering node's member
// id.
type MemberList struct {
	Self    string          `json:"self"`
	Members []ClusterMember `json:"members"`
}

// listMembers handles GET /v1/cluster/members (operator): the node's current membership view.
// A node without cluster membership answers 404 not_found.
func (s *server) listMembers(w http.ResponseWriter, r *http.Request) {
	if err := requireRole(r, auth.RoleOperator); err != nil {
		s.fail(w, r, err)
		return
	}
	m := s.cfg.Cluster
	if m == nil {
		s.writeError(w, http.StatusNotFound, CodeNotFound, "api: this node is not a cluster member")
		return
	}
	ms := m.Members()
	out := MemberList{Self: m.Self().ID, Members: make([]ClusterMember, 0, len(ms))}
	for _, x := range ms {
		out.Members = append(out.Members, ClusterMember{ID: x.ID, NodeID: x.NodeID, Address: x.Address,
			Roles: slices.Clone(x.Roles)})
	}
	s.writeJSON(w, http.StatusOK, out)
}
