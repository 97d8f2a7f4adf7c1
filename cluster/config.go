package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// Sentinel errors of the cluster package.
var (
	// ErrInvalidConfig is returned by Config.Validate and Start when a field is out of range.
	ErrInvalidConfig = errors.New("cluster: invalid config")
	// ErrMetaTooLarge is returned by Start when the node meta (node id, host, port, roles, kinds)
	// does not fit memberlist's 512-byte limit.
	ErrMetaTooLarge = errors.New("cluster: node meta too large")
	// ErrClientNotSupported is returned by Provider.StartClient: dair nodes are always members.
	ErrClientNotSupported = errors.New("cluster: client mode not supported")
	// ErrShutdown is returned by Provider.StartMember after Shutdown.
	ErrShutdown = errors.New("cluster: shut down")
	// ErrRemoteStart is returned by Start when protoactor's remote server cannot listen.
	ErrRemoteStart = errors.New("cluster: start remote")
	// ErrPartitioned is returned by FaultTransport dials while partitioned.
	ErrPartitioned = errors.New("cluster: transport partitioned")
)

// Profile selects memberlist's failure-detector timings.
type Profile string

const (
	// ProfileLAN is memberlist.DefaultLANConfig: probe every 1 s, timeout 500 ms, suspicion ×4.
	// A killed node is reported as left after about 5–6 s.
	ProfileLAN Profile = "lan"
	// ProfileLocal is tuned for one host or a quiet LAN: probe every 250 ms, timeout 100 ms,
	// suspicion ×3, gossip every 50 ms, push/pull every 5 s, TCP timeout 1 s. A killed node is
	// reported as left after about 1–1.5 s (see the package documentation for measurements).
	ProfileLocal Profile = "local"
)

// String returns the profile name.
func (p Profile) String() string { return string(p) }

// Config configures Start. The zero value of every field means its documented default.
type Config struct {
	// NodeID is the logical node id, stable across restarts (unlike the actor system id). Required.
	NodeID string
	// BindAddr is memberlist's host:port. Default "127.0.0.1:0"; port 0 picks a free port.
	// Ignored for binding when Transport is set.
	BindAddr string
	// Join lists seed memberlist addresses (host:port). Start does not wait for them: the node
	// joins in the background and retries while it is alone.
	Join []string
	// Profile selects failure-detector timings. Default ProfileLAN.
	Profile Profile
	// Roles are advertised in the node meta ("control-plane", "runtime").
	Roles []string
	// ActorHost is the protoactor remote listen host. Default: the host of BindAddr.
	ActorHost string
	// ActorPort is the protoactor remote listen port. Default 0: pick a free port.
	ActorPort int
	// Keyring holds optional memberlist encryption keys of 16, 24 or 32 bytes; the first is
	// the primary (used to encrypt), all are tried to decrypt.
	Keyring [][]byte
	// RemoteTLS, when set, is used both as the gRPC server TLS config and as the client TLS
	// config of protoactor's remote. Set ClientAuth to tls.RequireAndVerifyClientCert and a
	// client certificate so only trusted nodes can connect: a node that receives an unknown
	// message type crashes, so the remote port must only be reachable by trusted nodes.
	RemoteTLS *tls.Config
	// Session identifies this process across its incarnations (a restart under a new member
	// id keeps it), and Started is when the process started; both are advertised so that two
	// processes claiming one NodeID can tell which came first (see Member.YieldsTo and
	// Membership.Duplicate). Default empty: duplicates are not detected.
	Session string
	Started time.Time
	// Transport optionally replaces memberlist's network transport (for fault injection,
	// see FaultTransport). Membership shuts it down.
	Transport memberlist.Transport
	// Logger receives membership logs; memberlist's own log lines go to it at debug level.
	// Default zap.NewNop().
	Logger *zap.Logger

	// noServe (tests only) skips starting protoactor's gRPC server and only sets the actor
	// system's address. Several in-process remotes race on grpc's global logger under -race
	// (protoactor's Remote.Start writes it while earlier servers read it), so membership-only
	// tests run without serving.
	noServe bool
}

// DefaultConfig returns a Config for a single local node with the given logical id.
func DefaultConfig(nodeID string) Config {
	return Config{
		NodeID:   nodeID,
		BindAddr: "127.0.0.1:0",
		Profile:  ProfileLAN,
		Logger:   zap.NewNop(),
	}
}

// withDefaults returns a copy of c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.BindAddr == "" {
		c.BindAddr = "127.0.0.1:0"
	}
	if c.Profile == "" {
		c.Profile = ProfileLAN
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.ActorHost == "" {
		host, _, err := net.SplitHostPort(c.BindAddr)
		if err == nil {
			c.ActorHost = host
		}
	}
	return c
}

// Validate reports the first invalid field of c (after applying defaults), wrapping
// ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.NodeID == "" {
		return fmt.Errorf("%w: empty NodeID", ErrInvalidConfig)
	}
	if _, _, err := splitHostPort(c.BindAddr); err != nil {
		return fmt.Errorf("%w: BindAddr: %w", ErrInvalidConfig, err)
	}
	switch c.Profile {
	case ProfileLAN, ProfileLocal:
	default:
		return fmt.Errorf("%w: unknown Profile %q", ErrInvalidConfig, c.Profile)
	}
	if c.ActorPort < 0 || c.ActorPort > 65535 {
		return fmt.Errorf("%w: ActorPort %d out of range", ErrInvalidConfig, c.ActorPort)
	}
	for i, k := range c.Keyring {
		switch len(k) {
		case 16, 24, 32:
		default:
			return fmt.Errorf("%w: Keyring[%d] has %d bytes, want 16, 24 or 32", ErrInvalidConfig, i, len(k))
		}
	}
	for _, s := range c.Join {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("%w: Join %q: %w", ErrInvalidConfig, s, err)
		}
	}
	return nil
}

// splitHostPort parses an IP host:port.
func splitHostPort(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("split %q: %w", addr, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("host %q is not an IP address", host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", portStr)
	}
	return host, port, nil
}

// timings are the derived intervals of a profile that memberlist does not own.
type timings struct {
	refresh   time.Duration // periodic full rebuild of the member set
	reconnect time.Duration // join retries towards seeds and departed addresses
	reconnTTL time.Duration // how long a departed address is retried
	leave     time.Duration // graceful leave broadcast timeout
	// leaveGrace is how long a member must stay absent from memberlist before MemberLeft.
	leaveGrace time.Duration
}

func (p Profile) timings() timings {
	if p == ProfileLocal {
		return timings{refresh: 100 * time.Millisecond, reconnect: 500 * time.Millisecond,
			reconnTTL: 2 * time.Minute, leave: time.Second, leaveGrace: 500 * time.Millisecond}
	}
	return timings{refresh: 500 * time.Millisecond, reconnect: 5 * time.Second,
		reconnTTL: 10 * time.Minute, leave: 5 * time.Second, leaveGrace: 2 * time.Second}
}

// memberlistConfig builds memberlist's config for profile p.
func (p Profile) memberlistConfig() *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	if p == ProfileLocal {
		mc.ProbeInterval = 250 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.SuspicionMult = 3
		mc.SuspicionMaxTimeoutMult = 4
		mc.GossipInterval = 50 * time.Millisecond
		mc.GossipNodes = 3
		mc.RetransmitMult = 3
		mc.PushPullInterval = 5 * time.Second
		mc.TCPTimeout = time.Second
		mc.IndirectChecks = 2
	}
	// Keep gossiping to dead nodes long enough for a healed partition to refute and
	// reconnect (see reconnect in provider.go).
	mc.GossipToTheDeadTime = 30 * time.Second
	return mc
}
