package cluster

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// delegate implements memberlist's Delegate, EventDelegate and ConflictDelegate. memberlist
// calls these with its own locks held, so they only copy data and signal the owner goroutine.
//
// The delegate keeps its own copy of the alive node table: memberlist.Members and LocalNode
// return pointers into memberlist's state that it later mutates without our lock (a data race),
// while event callbacks run under memberlist's node lock, so copying there is safe.
type delegate struct {
	p *Provider

	// mu guards meta, nodes and left.
	mu    sync.Mutex
	meta  []byte                     // our encoded node meta
	nodes map[string]memberlist.Node // alive or suspect nodes by name, deep copies
	left  map[string]bool            // names that announced a graceful leave in their meta
}

// setMeta replaces our node meta (memberlist.UpdateNode must be called to broadcast it).
func (d *delegate) setMeta(meta []byte) {
	d.mu.Lock()
	d.meta = meta
	d.mu.Unlock()
}

// leftGracefully reports whether the named node announced a graceful leave before vanishing.
func (d *delegate) leftGracefully(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.left[name]
}

// snapshot returns copies of the known alive nodes sorted by name. The caller owns them.
func (d *delegate) snapshot() []*memberlist.Node {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*memberlist.Node, 0, len(d.nodes))
	for _, n := range d.nodes {
		c := n
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *memberlist.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// node returns a copy of the named node.
func (d *delegate) node(name string) (*memberlist.Node, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.nodes[name]
	return &n, ok
}

// store records a deep copy of n.
func (d *delegate) store(n *memberlist.Node) {
	c := *n
	c.Addr = slices.Clone(n.Addr)
	c.Meta = slices.Clone(n.Meta)
	d.mu.Lock()
	if d.nodes == nil {
		d.nodes = map[string]memberlist.Node{}
	}
	d.nodes[n.Name] = c
	if metaLeaving(c.Meta) {
		if d.left == nil {
			d.left = map[string]bool{}
		}
		d.left[n.Name] = true
	} else {
		delete(d.left, n.Name)
	}
	d.mu.Unlock()
	d.p.markDirty()
}

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
)

// NodeMeta returns the encoded node meta (checked against the limit at StartMember).
func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.meta) > limit {
		return nil
	}
	return slices.Clone(d.meta)
}

// NotifyMsg receives user messages; the only one is the declared-dead notice.
func (d *delegate) NotifyMsg(b []byte) {
	n, err := decodeNotice(b)
	if err != nil {
		d.p.log.Warn("cluster: bad user message", zap.Error(err))
		return
	}
	select {
	case d.p.notices <- n:
	default:
		// Notices are resent on every reconnect tick; dropping one under load is harmless.
	}
}

// GetBroadcasts returns nothing: dair broadcasts nothing through memberlist.
func (d *delegate) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState returns no extra push/pull state.
func (d *delegate) LocalState(bool) []byte { return nil }

// MergeRemoteState ignores remote push/pull state.
func (d *delegate) MergeRemoteState([]byte, bool) {}

// NotifyJoin records the node and signals a rebuild.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.store(n) }

// NotifyLeave forgets the node and signals a rebuild.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	d.mu.Lock()
	delete(d.nodes, n.Name)
	d.mu.Unlock()
	d.p.markDirty()
}

// NotifyUpdate records the node and signals a rebuild.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.store(n) }

// NotifyConflict logs two nodes claiming the same name (an actor system id reused).
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	d.p.log.Error("cluster: node name conflict", zap.String("name", existing.Name),
		zap.String("existing", existing.Address()), zap.String("other", other.Address()))
}

// noticeTag prefixes a declared-dead notice user message.
const noticeTag byte = 'D'

// notice tells a node that the sender saw it leave and still sees it alive: the sender's side
// of a healed partition declared it dead. Side and MinID describe the sender's alive view.
type notice struct {
	From  string `json:"f"`
	Side  int    `json:"s"`
	MinID string `json:"m"`
	// To is the member id the notice is meant for. A process restarted under a new member id
	// keeps its memberlist address, so notices for its old incarnation reach the new one,
	// which must ignore them. Empty (older senders): meant for whoever receives it.
	To string `json:"t,omitempty"`
}

func encodeNotice(n notice) ([]byte, error) {
	b, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode notice: %w", err)
	}
	return append([]byte{noticeTag}, b...), nil
}

func decodeNotice(b []byte) (notice, error) {
	if len(b) == 0 || b[0] != noticeTag {
		return notice{}, fmt.Errorf("cluster: unknown user message (%d bytes)", len(b))
	}
	var n notice
	if err := json.Unmarshal(b[1:], &n); err != nil {
		return notice{}, fmt.Errorf("cluster: decode notice: %w", err)
	}
	if n.From == "" {
		return notice{}, fmt.Errorf("cluster: notice without sender")
	}
	return n, nil
}
