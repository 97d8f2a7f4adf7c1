package cluster

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// delegate implements memberlist's Delegate, EventDelegate and ConflictDelegate. memberlist
// calls these with its own locks held, so they only copy data and signal the owner goroutine.
type delegate struct {
	p    *Provider
	meta []byte // immutable after construction
}

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
)

// NodeMeta returns the encoded node meta (checked against the limit at StartMember).
func (d *delegate) NodeMeta(limit int) []byte {
	if len(d.meta) > limit {
		return nil
	}
	return d.meta
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

// NotifyJoin signals a rebuild.
func (d *delegate) NotifyJoin(*memberlist.Node) { d.p.markDirty() }

// NotifyLeave signals a rebuild.
func (d *delegate) NotifyLeave(*memberlist.Node) { d.p.markDirty() }

// NotifyUpdate signals a rebuild.
func (d *delegate) NotifyUpdate(*memberlist.Node) { d.p.markDirty() }

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
