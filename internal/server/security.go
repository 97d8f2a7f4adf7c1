package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/netaddr"
)

// nodeIDCheckWait bounds how long a joining node waits for its seeds before it checks that
// no live member of another process uses its node id. Seeds that answer are joined within
// milliseconds; the wait only runs out when none is up yet.
const nodeIDCheckWait = 2 * time.Second

// loadRemoteTLS returns the mutual-TLS config of the actor remote (nil without --tls-*). A
// node whose actor port leaves the loopback interface without TLS is logged as a warning:
// anyone who reaches that port can send it actor messages.
func loadRemoteTLS(opts Options, log *zap.Logger) (*tls.Config, error) {
	if opts.TLSCert == "" {
		if host, _, err := net.SplitHostPort(opts.BindAddr); err == nil && !netaddr.IsLoopback(host) {
			log.Warn("node-to-node actor traffic is not encrypted or authenticated; give --tls-cert, --tls-key and --tls-ca",
				zap.String("bind", opts.BindAddr))
		}
		return nil, nil
	}
	cfg, err := cluster.LoadTLS(opts.TLSCert, opts.TLSKey, opts.TLSCA)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	return cfg, nil
}

// newSession returns a random id for this process, advertised to the cluster so that a
// second process with the same node id is told apart from a restart of this one.
func newSession() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("server: session id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// checkNodeID waits (at most nodeIDCheckWait) until m has joined another member, then fails
// when a live member of an earlier process already uses nodeID. It runs before the node
// starts: two processes under one node id would fence each other's work.
func checkNodeID(ctx context.Context, m *cluster.Membership, nodeID string) error {
	deadline := time.NewTimer(nodeIDCheckWait)
	defer deadline.Stop()
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for len(m.Members()) < 2 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("server: check node id: %w", ctx.Err())
		case <-deadline.C:
			return nil // no seed answered yet; watchDuplicate keeps checking
		case <-tk.C:
		}
	}
	if d, ok := m.Duplicate(); ok && !endpointRefuses(d.Address) {
		return duplicateError(nodeID, d)
	}
	return nil
}

// endpointRefuses reports whether a TCP connection to addr is refused: no process listens
// there any more, so a member advertising it is a crashed process the cluster has not yet
// reported lost, not a live duplicate.
func endpointRefuses(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	if err := conn.Close(); err != nil {
		return false // accepted: something listens, whatever Close reports
	}
	return false
}

// watchDuplicate reports, once, a member of an earlier process that uses this node's id and
// joins after this node started. The channel is never closed; the goroutine ends when m
// shuts down (which closes the subscription).
func watchDuplicate(m *cluster.Membership) <-chan cluster.Member {
	out := make(chan cluster.Member, 1)
	events, _ := m.Subscribe(16)
	self := m.Self()
	if d, ok := m.Duplicate(); ok && !endpointRefuses(d.Address) { // joined before the subscription
		out <- d
		return out
	}
	go func() {
		for ev := range events {
			if (ev.Kind == cluster.MemberJoined || ev.Kind == cluster.MemberUpdated) && self.YieldsTo(ev.Member) &&
				!endpointRefuses(ev.Member.Address) {
				out <- ev.Member
				for range events { // drain until Shutdown closes the subscription
				}
				return
			}
		}
	}()
	return out
}

// childArgs returns the security flags process hosts inherit: they join this node's cluster,
// so they need its gossip key and TLS files, and keep its pipeline limit.
func (o Options) childArgs() []string {
	var args []string
	if o.GossipKeyFile != "" {
		args = append(args, "--gossip-key-file", o.GossipKeyFile)
	}
	if o.TLSCert != "" {
		args = append(args, "--tls-cert", o.TLSCert, "--tls-key", o.TLSKey, "--tls-ca", o.TLSCA)
	}
	if o.MaxSteps > 0 {
		args = append(args, "--max-steps", fmt.Sprint(o.MaxSteps))
	}
	return args
}

// duplicateError names the member that holds nodeID.
func duplicateError(nodeID string, d cluster.Member) error {
	return fmt.Errorf("%w: node id %q is already used by live member %s (membership address %s, up since %s); start this node with another --node-id",
		ErrDuplicateNodeID, nodeID, d.ID, d.MemberlistAddr, d.Started.Format(time.RFC3339))
}
