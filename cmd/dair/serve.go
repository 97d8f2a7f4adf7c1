package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dairuntime/dair/internal/dag"
	"github.com/dairuntime/dair/internal/server"
)

// addServingFlags registers the flags shared by the serving commands.
func addServingFlags(fs *pflag.FlagSet, o *server.Options, defaultAuth string) {
	fs.StringVar(&o.Auth, "auth", defaultAuth, "authentication: none or jwt")
	fs.StringVar(&o.JWTSecretFile, "jwt-secret-file", "", "HS256 secret file (with --auth jwt)")
	fs.StringVar(&o.JWTPublicKeyFile, "jwt-public-key-file", "", "RS256/ES256 PEM public key file (with --auth jwt)")
	fs.StringVar(&o.JWTAudience, "jwt-audience", "", "require this audience in every token's aud claim (with --auth jwt)")
	fs.StringVar(&o.JWTIssuer, "jwt-issuer", "", "require this issuer as every token's iss claim (with --auth jwt)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", "console", "log format: json or console")
	fs.StringVar(&o.HostMode, "host-mode", server.HostFixture, "how scale-out creates runtime hosts: fixture, process (child \"dair node\" processes; needs --store redis:// and --bind) or attach")
	fs.StringVar(&o.PipelinesDir, "pipelines", "", "directory of pipeline files (*.yaml, *.yml, *.json) loaded at start")
	fs.StringVar(&o.NodeID, "node-id", "", "node id (default: the host name)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "bound of the graceful shutdown")
	fs.BoolVar(&o.MetricsAuth, "metrics-auth", false, "require a token with the operator role for GET /metrics (with --auth jwt)")
	fs.IntVar(&o.MaxSteps, "max-steps", dag.DefaultMaxSteps, "most steps a pipeline may have (PUT /v1/pipelines and --pipelines files)")
	addAgentFlags(fs, &o.Agents)
}

func newDevCmd(a *app) *cobra.Command {
	o := server.DevOptions()
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "run one node with every role and the embedded store",
		Long: "dev runs one node with every role and the embedded store under --data. It is ready when GET /readyz\n" +
			"answers 200. With --auth none (the default) it serves on a loopback address only.",
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.HostMode == server.HostProcess {
				return usagef(`dev runs one node on the embedded store, so it cannot start process hosts: ` +
					`--host-mode process needs a cluster ("dair node --store redis://HOST:PORT/DB --bind HOST:PORT --host-mode process")`)
			}
			o.LogOutput = a.stderr
			return server.Run(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.DataDir, "data", o.DataDir, "data directory of the embedded store")
	fs.StringVar(&o.HTTPAddr, "http", o.HTTPAddr, "HTTP API listen address")
	addServingFlags(fs, &o, server.AuthNone)
	fs.Lookup("host-mode").Usage = devHostModeUsage
	addTransportFlags(fs, &o)
	return cmd
}

// devHostModeUsage is dev's --host-mode help: dev cannot start process hosts (they need a
// shared store and membership), so it does not offer them.
const devHostModeUsage = "how scale-out creates runtime hosts: fixture (in this process) or attach " +
	`(registered external endpoints); child-process hosts need "dair node --host-mode process"`

func newNodeCmd(a *app) *cobra.Command {
	o := server.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "node",
		Short: "run one cluster node",
		Long: "node runs one cluster node on a shared store. --store is redis://HOST:PORT/DB (or bolt://PATH for a\n" +
			"single node); --bind is the membership address and --join lists seeds. With --auth none it serves HTTP on\n" +
			"loopback only; membership off loopback needs --gossip-key-file; --tls-cert/--tls-key/--tls-ca encrypt and\n" +
			"authenticate node-to-node actor traffic (mutual TLS).",
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.StoreURL == "" {
				return usagef("node needs --store redis://HOST:PORT/DB or bolt://PATH")
			}
			o.LogOutput = a.stderr
			return server.Run(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.StoreURL, "store", "", "store URL: redis://HOST:PORT/DB or bolt://PATH")
	fs.StringVar(&o.BindAddr, "bind", "", "membership bind address HOST:PORT")
	fs.StringSliceVar(&o.Join, "join", nil, "membership seeds HOST:PORT[,HOST:PORT...]")
	fs.StringSliceVar(&o.Roles, "roles", o.Roles, "roles: control-plane,runtime")
	fs.StringVar(&o.HTTPAddr, "http", o.HTTPAddr, "HTTP API listen address")
	fs.IntVar(&o.ActorPort, "actor-port", 0, "actor remote port (0: chosen)")
	fs.StringVar(&o.ClusterProfile, "cluster-profile", "lan", "failure detection: lan (memberlist defaults) or local (probe 250ms)")
	fs.DurationVar(&o.LivenessTTL, "liveness-ttl", 0, "liveness lease in the store: a member that has not renewed it for this long is declared lost (0: 1s)")
	fs.StringVar(&o.GossipKeyFile, "gossip-key-file", "", "memberlist encryption key file (16/24/32 bytes, raw or base64); required off loopback")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "PEM certificate of this node for mutual TLS between nodes (with --tls-key and --tls-ca)")
	fs.StringVar(&o.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&o.TLSCA, "tls-ca", "", "PEM CA certificate(s) that sign every node's certificate")
	fs.StringVar(&o.DataDir, "data", o.DataDir, "data directory (process host logs under DIR/hosts)")
	fs.StringVar(&o.Instance, "instance", "", "runtime instance id to create at start (role runtime; how process hosts start)")
	fs.StringVar(&o.InstanceSettings, "instance-settings", "", "tenant settings JSON of --instance (default: shared defaults)")
	fs.StringVar(&o.InstanceScaleOutRequest, "instance-scale-out-request", "", "scale-out request id --instance fulfils")
	fs.DurationVar(&o.HostStartDelay, "host-start-delay", 0, "TEST ONLY: delay every process host spawn")
	fs.Lookup("host-start-delay").Hidden = true
	fs.BoolVar(&o.FaultInjection, "fault-injection", false,
		"TEST ONLY: wrap the membership transport for fault injection and serve POST /debug/partition and /debug/heal to loopback callers")
	fs.Lookup("fault-injection").Hidden = true
	addServingFlags(fs, &o, server.AuthNone)
	addTransportFlags(fs, &o)
	return cmd
}
