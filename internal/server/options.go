package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/cluster"
	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/logging"
	"github.com/dairuntime/dair/internal/netaddr"
)

// Sentinel errors of package server.
var (
	// ErrInvalidOptions is wrapped by the errors Options.Validate, OpenStore and Run return when
	// the options are unusable (bad flag values, an unknown store scheme, a shared file store).
	// The dair binary maps it to exit code 2.
	ErrInvalidOptions = errors.New("server: invalid options")
	// ErrBadPipeline is wrapped by the error Run returns when a file of PipelinesDir cannot be
	// read or is not a valid pipeline. The dair binary maps it to exit code 2.
	ErrBadPipeline = errors.New("server: bad pipeline file")
	// ErrDuplicateNodeID is wrapped by the error Run returns when a live cluster member of
	// another process already uses the node's NodeID.
	ErrDuplicateNodeID = errors.New("server: node id in use")
)

// Auth modes.
const (
	AuthNone = "none"
	AuthJWT  = "jwt"
)

// Host modes: how scale-out creates runtime hosts.
const (
	HostFixture = "fixture"
	HostProcess = "process"
	HostAttach  = "attach"
)

// Options configures Run. The zero value of each field means its default.
type Options struct {
	// NodeID names the node. Default: the host name.
	NodeID string
	// StoreURL is bolt://PATH or redis://HOST:PORT/DB. Default bolt://DataDir/dair.db.
	StoreURL string
	// DataDir holds the embedded store when StoreURL is empty, and the logs of process hosts
	// (DataDir/hosts/host-<instance>.log). Default ./.dair.
	DataDir string
	// HTTPAddr is the API listen address. Default 127.0.0.1:8080; port 0 picks a free port.
	HTTPAddr string
	// PipelinesDir, when set, is scanned at start: every *.yaml, *.yml and *.json file in it is
	// validated and stored as a pipeline. Default: none.
	PipelinesDir string
	// Roles the node plays (control-plane, runtime). Default both.
	Roles []string
	// Auth is none or jwt. Default none.
	Auth string
	// JWTSecretFile holds the HS256 secret; JWTPublicKeyFile a PEM RS256/ES256 public key. One
	// of them is required when Auth is jwt.
	JWTSecretFile, JWTPublicKeyFile string
	// JWTAudience and JWTIssuer, when set, must match the aud and iss claims of every token
	// (tokens without them are refused). Empty: any or no aud and iss are accepted.
	JWTAudience, JWTIssuer string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// LogFormat is json or console. Default console.
	LogFormat string
	// LogOutput receives the logs. Default os.Stderr.
	LogOutput io.Writer
	// HostMode is how scale-out creates runtime hosts: fixture (in-process), process (one
	// `dair node --roles runtime` child per instance; needs a redis store, cluster mode and the
	// control-plane role) or attach (externally managed runtime nodes join the cluster; needs
	// cluster mode). Default fixture. kubernetes is rejected as not implemented in this build.
	HostMode string
	// HostBinary is the dair executable spawned in process host mode. Default: this executable.
	HostBinary string
	// HostStartDelay delays every process host spawn (tests only: it widens the window in
	// which a scale-out request is Provisioning). Default 0.
	HostStartDelay time.Duration
	// Instance, when set, is a runtime instance the node creates at start (role runtime), with
	// InstanceSettings: the JSON of a messages.TenantSettings (protobuf JSON names; default: the
	// shared defaults). Process hosts are started this way. InstanceScaleOutRequest names the
	// scale-out request it fulfils (published in its descriptor metadata). Optional.
	Instance, InstanceSettings, InstanceScaleOutRequest string
	// BindAddr is the membership address HOST:PORT. Default: none (single node).
	BindAddr string
	// Join lists membership seeds HOST:PORT. Joining requires a shared (Redis) store.
	Join []string
	// ActorPort is the actor remote port; 0 chooses one.
	ActorPort int
	// ClusterProfile is the failure-detector profile: lan (memberlist's LAN defaults) or local
	// (tuned for one host or a fast LAN: probe 250 ms; the engine's heartbeat and recovery
	// timings follow). Default lan.
	ClusterProfile string
	// LivenessTTL is the node's liveness lease in the store (actors.Config.LivenessTTL): a
	// member that has not renewed it for this long is declared lost whatever the profile.
	// 0 means the engine's default (1s).
	LivenessTTL time.Duration
	// FaultInjection (tests only) wraps the membership transport in a cluster.FaultTransport
	// and serves POST /debug/partition and POST /debug/heal to loopback callers, so a test can
	// cut the node off from the cluster and heal it. Never enable it in production. Default
	// false.
	FaultInjection bool
	// GossipKeyFile holds a memberlist encryption key (16, 24 or 32 bytes, raw or base64).
	// Required when BindAddr or a Join address is not loopback; optional otherwise.
	GossipKeyFile string
	// TLSCert, TLSKey and TLSCA are PEM files for mutual TLS on node-to-node actor traffic
	// (see cluster.LoadTLS): all three or none. Cluster mode only. Default: plaintext.
	TLSCert, TLSKey, TLSCA string
	// MetricsAuth puts GET /metrics behind the bearer token (operator role). Needs Auth jwt.
	// Default false.
	MetricsAuth bool
	// MaxBodyBytes caps request bodies. Default 1 MiB.
	MaxBodyBytes int64
	// MaxSteps bounds the steps of a pipeline put over HTTP or loaded from PipelinesDir
	// (`--max-steps`). Default dag.DefaultMaxSteps (1,000).
	MaxSteps int
	// SSEHeartbeat is the comment interval of event streams. Default 15s.
	SSEHeartbeat time.Duration
	// ShutdownTimeout bounds the graceful HTTP shutdown and the node stop. Default 10s.
	ShutdownTimeout time.Duration
	// OnReady, when set, is called once the API serves and /readyz answers 200, with the
	// bound address. It must not block.
	OnReady func(addr net.Addr)

	// Transport configures the runtime transports (transports.go).
	Transport TransportOptions
	// Agents configures agent messaging (agents.go). Default: no built-in agent type.
	Agents AgentOptions
}

// DefaultOptions returns the options of a cluster node (`dair node`) with defaults filled in.
func DefaultOptions() Options {
	return Options{
		DataDir: ".dair", HTTPAddr: "127.0.0.1:8080", Roles: []string{actors.RoleControlPlane, actors.RoleRuntime},
		Auth: AuthNone, LogLevel: logging.LevelInfo, LogFormat: logging.FormatConsole, HostMode: HostFixture,
		MaxBodyBytes: 1 << 20, SSEHeartbeat: 15 * time.Second, ShutdownTimeout: 10 * time.Second,
	}
}

// DevOptions returns the options of `dair dev`: every role and the embedded store under
// ./.dair. Like every node, with auth none it serves on loopback only.
func DevOptions() Options { return DefaultOptions() }

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.DataDir == "" {
		o.DataDir = d.DataDir
	}
	if o.StoreURL == "" {
		o.StoreURL = SchemeBolt + "://" + filepath.Join(o.DataDir, "dair.db")
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = d.HTTPAddr
	}
	if len(o.Roles) == 0 {
		o.Roles = d.Roles
	}
	if o.Auth == "" {
		o.Auth = d.Auth
	}
	if o.HostMode == "" {
		o.HostMode = d.HostMode
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = d.MaxBodyBytes
	}
	if o.SSEHeartbeat <= 0 {
		o.SSEHeartbeat = d.SSEHeartbeat
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = d.ShutdownTimeout
	}
	if o.ClusterProfile == "" {
		o.ClusterProfile = "lan"
	}
	return o
}

// limits returns the pipeline limits of the node.
func (o Options) limits() dag.Limits { return dag.Limits{MaxSteps: o.MaxSteps} }

// clustered reports whether the options ask for cluster membership.
func (o Options) clustered() bool { return o.BindAddr != "" || len(o.Join) > 0 }

// minLivenessTTL is the shortest liveness lease a node accepts: it renews it every quarter,
// and a store round trip on a loaded machine takes milliseconds.
const minLivenessTTL = 100 * time.Millisecond

// Validate reports the first unusable option, wrapping ErrInvalidOptions. Zero fields are
// checked as their defaults. It does no I/O.
func (o Options) Validate() error {
	o = o.withDefaults()
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...)
	}
	scheme, _, err := splitStoreURL(o.StoreURL)
	if err != nil {
		return err
	}
	if scheme != SchemeBolt && scheme != SchemeRedis {
		return bad("store url %q: unknown scheme %q (want bolt://PATH or redis://HOST:PORT/DB)", o.StoreURL, scheme)
	}
	for _, r := range o.Roles {
		if r != actors.RoleControlPlane && r != actors.RoleRuntime {
			return bad("unknown role %q (want %s or %s)", r, actors.RoleControlPlane, actors.RoleRuntime)
		}
	}
	switch o.Auth {
	case AuthNone:
		if o.JWTAudience != "" || o.JWTIssuer != "" {
			return bad("--jwt-audience and --jwt-issuer need --auth jwt")
		}
	case AuthJWT:
		if o.JWTSecretFile == "" && o.JWTPublicKeyFile == "" {
			return bad("--auth jwt needs --jwt-secret-file or --jwt-public-key-file")
		}
	default:
		return bad("unknown auth mode %q (want none or jwt)", o.Auth)
	}
	if err := (logging.Config{Level: o.LogLevel, Format: o.LogFormat}).Validate(); err != nil {
		return bad("%v", err)
	}
	if err := o.validateHosts(scheme); err != nil {
		return bad("%v", err)
	}
	if err := o.validateTransports(scheme); err != nil {
		return bad("%v", err)
	}
	host, port, err := net.SplitHostPort(o.HTTPAddr)
	if err != nil {
		return bad("http address %q: %v", o.HTTPAddr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return bad("http address %q: bad port %q (want 0 to 65535)", o.HTTPAddr, port)
	}
	if fi, err := os.Stat(o.DataDir); err == nil && !fi.IsDir() && scheme == SchemeBolt {
		return bad("--data %q is a file, not a directory", o.DataDir)
	}
	if o.Auth == AuthNone && !netaddr.IsLoopback(host) {
		return bad("http address %q is not loopback; with --auth none the API serves on loopback only (use 127.0.0.1 or --auth jwt)", o.HTTPAddr)
	}
	if o.MetricsAuth && o.Auth != AuthJWT {
		return bad("--metrics-auth needs --auth jwt")
	}
	if o.BindAddr != "" {
		if err := checkHostPort(o.BindAddr); err != nil {
			return bad("bind address: %v", err)
		}
	}
	for _, j := range o.Join {
		if err := checkHostPort(j); err != nil {
			return bad("join address: %v", err)
		}
	}
	if len(o.Join) > 0 && scheme == SchemeBolt {
		return bad("a file store cannot be shared; use --store redis://HOST:PORT/DB with --join")
	}
	if o.MaxSteps < 0 {
		return bad("max steps %d is negative", o.MaxSteps)
	}
	if o.ActorPort < 0 || o.ActorPort > 65535 {
		return bad("actor port %d out of range", o.ActorPort)
	}
	if p := cluster.Profile(o.ClusterProfile); p != cluster.ProfileLAN && p != cluster.ProfileLocal {
		return bad("unknown cluster profile %q (want %s or %s)", o.ClusterProfile, cluster.ProfileLAN, cluster.ProfileLocal)
	}
	if o.LivenessTTL < 0 || (o.LivenessTTL > 0 && o.LivenessTTL < minLivenessTTL) {
		return bad("liveness ttl %s: want at least %s (0: the default)", o.LivenessTTL, minLivenessTTL)
	}
	if err := o.validateSecurity(); err != nil {
		return bad("%v", err)
	}
	if err := o.Agents.validate(); err != nil {
		return bad("%v", err)
	}
	return nil
}

// validateSecurity checks the membership and actor transport options: a gossip key for
// membership that leaves the loopback interface, and all or none of the TLS files in cluster
// mode. It returns an unwrapped error; Validate wraps it.
func (o Options) validateSecurity() error {
	if o.GossipKeyFile == "" {
		addrs := append([]string{o.BindAddr}, o.Join...)
		for _, a := range addrs {
			if a == "" {
				continue
			}
			if host, _, err := net.SplitHostPort(a); err == nil && !netaddr.IsLoopback(host) {
				return fmt.Errorf("membership address %q is not loopback; give --gossip-key-file to encrypt and authenticate gossip", a)
			}
		}
	}
	n := 0
	for _, f := range []string{o.TLSCert, o.TLSKey, o.TLSCA} {
		if f != "" {
			n++
		}
	}
	switch {
	case n != 0 && n != 3:
		return errors.New("--tls-cert, --tls-key and --tls-ca go together")
	case n == 3 && !o.clustered():
		return errors.New("--tls-cert, --tls-key and --tls-ca secure node-to-node traffic and need cluster mode (--bind)")
	}
	return nil
}

// checkHostPort validates a HOST:PORT address with a non-empty host and a numeric port.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("%q: missing host", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q: bad port %q", addr, port)
	}
	return nil
}
