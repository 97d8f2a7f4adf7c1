package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/hashicorp/memberlist"
)

// Member is one alive cluster node as seen by this node.
type Member struct {
	// ID is the actor system id (memberlist node name). It changes on every restart.
	ID string
	// NodeID is the logical node id, stable across restarts.
	NodeID string
	// Host and Port are the protoactor remote endpoint.
	Host string
	Port int
	// Address is Host:Port, the address for actor.NewPID.
	Address string
	// Roles are the node's advertised roles.
	Roles []string
	// Kinds are the protoactor cluster kinds (none for dair nodes).
	Kinds []string
	// AgentTypes are the agent types the node's agent worker owns (see
	// Membership.SetAgentTypes).
	AgentTypes []string
	// MemberlistAddr is the node's memberlist host:port.
	MemberlistAddr string
	// Session identifies the process the member runs in (Config.Session); Started is when
	// that process started (Config.Started, millisecond precision). Both are empty for members
	// that do not advertise them.
	Session string
	Started time.Time
}

// HasRole reports whether m advertises role.
func (m Member) HasRole(role string) bool { return slices.Contains(m.Roles, role) }

// equal reports whether a and b describe the same member identically.
func (m Member) equal(o Member) bool {
	return m.ID == o.ID && m.NodeID == o.NodeID && m.Host == o.Host && m.Port == o.Port &&
		m.MemberlistAddr == o.MemberlistAddr && slices.Equal(m.Roles, o.Roles) &&
		slices.Equal(m.Kinds, o.Kinds) && slices.Equal(m.AgentTypes, o.AgentTypes) &&
		m.Session == o.Session && m.Started.Equal(o.Started)
}

// clone returns a deep copy of m.
func (m Member) clone() Member {
	m.Roles = slices.Clone(m.Roles)
	m.Kinds = slices.Clone(m.Kinds)
	m.AgentTypes = slices.Clone(m.AgentTypes)
	return m
}

// protoMember converts m to protoactor's cluster member.
func (m Member) protoMember() *pcluster.Member {
	return &pcluster.Member{Id: m.ID, Host: m.Host, Port: int32(m.Port), Kinds: slices.Clone(m.Kinds)}
}

// EventKind classifies a membership Event.
type EventKind int

const (
	// MemberJoined: a new member became alive.
	MemberJoined EventKind = iota + 1
	// MemberLeft: a member died or left. Its ID is never admitted again.
	MemberLeft
	// MemberUpdated: a member's meta (roles, address) changed.
	MemberUpdated
	// SelfDeclaredDead: the rest of the cluster declared this node dead (for example after a
	// partition healed). The process must stop its runtime work and restart its actor system
	// under a new id; protoactor blocks a departed member id forever.
	SelfDeclaredDead
)

// String returns the event kind's name.
func (k EventKind) String() string {
	switch k {
	case MemberJoined:
		return "member_joined"
	case MemberLeft:
		return "member_left"
	case MemberUpdated:
		return "member_updated"
	case SelfDeclaredDead:
		return "self_declared_dead"
	default:
		return "unknown(" + strconv.Itoa(int(k)) + ")"
	}
}

// Event is a membership change. For SelfDeclaredDead, Member is this node.
type Event struct {
	Kind   EventKind
	Member Member
}

// nodeMeta is the memberlist node meta (JSON, at most memberlist.MetaMaxSize bytes).
type nodeMeta struct {
	NodeID string   `json:"n"`
	Host   string   `json:"h"`
	Port   int      `json:"p"`
	Roles  []string `json:"r,omitempty"`
	Kinds  []string `json:"k,omitempty"`
	// AgentTypes are the node's agent types (Membership.SetAgentTypes).
	AgentTypes []string `json:"a,omitempty"`
	// Leaving is set just before a graceful Leave, so peers skip the leave grace period.
	Leaving bool `json:"l,omitempty"`
	// Session and Started (unix milliseconds) identify the member's process.
	Session string `json:"s,omitempty"`
	Started int64  `json:"t,omitempty"`
}

// metaLeaving reports whether encoded meta announces a graceful leave.
func metaLeaving(b []byte) bool {
	var meta nodeMeta
	return json.Unmarshal(b, &meta) == nil && meta.Leaving
}

// encodeMeta marshals meta and checks the size limit.
func encodeMeta(meta nodeMeta) ([]byte, error) {
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode meta: %w", err)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrMetaTooLarge, len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// memberFromNode decodes a memberlist node into a Member.
func memberFromNode(n *memberlist.Node) (Member, error) {
	var meta nodeMeta
	if err := json.Unmarshal(n.Meta, &meta); err != nil {
		return Member{}, fmt.Errorf("cluster: decode meta of %s: %w", n.Name, err)
	}
	if meta.Host == "" || meta.Port <= 0 {
		return Member{}, fmt.Errorf("cluster: meta of %s has no actor address", n.Name)
	}
	var started time.Time
	if meta.Started > 0 {
		started = time.UnixMilli(meta.Started).UTC()
	}
	return Member{
		ID:             n.Name,
		NodeID:         meta.NodeID,
		Host:           meta.Host,
		Port:           meta.Port,
		Address:        net.JoinHostPort(meta.Host, strconv.Itoa(meta.Port)),
		Roles:          meta.Roles,
		Kinds:          meta.Kinds,
		AgentTypes:     meta.AgentTypes,
		MemberlistAddr: n.Address(),
		Session:        meta.Session,
		Started:        started,
	}, nil
}

// YieldsTo reports whether m, a member with the same NodeID as o from another process, must
// give the node id up to o: o's process started first (or, at the same millisecond, has the
// smaller session). Members of one process (an incarnation restarted under a new member id)
// never yield to each other, nor does m yield to a member at m's own memberlist or actor
// address: m holds that address now, so o is a dead process (killed and restarted on the same
// address) that the cluster has not yet reported lost.
func (m Member) YieldsTo(o Member) bool {
	if m.NodeID != o.NodeID || m.ID == o.ID || m.Session == o.Session {
		return false
	}
	if (o.MemberlistAddr != "" && o.MemberlistAddr == m.MemberlistAddr) || (o.Address != "" && o.Address == m.Address) {
		return false
	}
	if !m.Started.Equal(o.Started) {
		return o.Started.Before(m.Started)
	}
	return o.Session < m.Session
}
