package main

import (
	"github.com/spf13/pflag"

	"github.com/dairuntime/dair/internal/server"
)

// addTransportFlags registers the runtime transport flags of the serving commands
// (server.TransportOptions).
func addTransportFlags(fs *pflag.FlagSet, o *server.Options) {
	t := &o.Transport
	fs.StringVar(&t.HostTransport, "host-transport", "actor",
		"what runtime hosts serve: actor, http, grpc or redis-command-queue (process hosts with --host-mode process; this node's --instance/--runtime-pool instances)")
	fs.StringVar(&t.Listen, "runtime-listen", "127.0.0.1:0", "listen address of this runtime host's http or grpc transport (non-loopback needs --runtime-tls-cert)")
	fs.IntVar(&t.Pool, "runtime-pool", 0, "pooled host: create the shared instances runtime-<transport>-1..N, each its own dispatch target")
	fs.StringVar(&t.TLSCert, "runtime-tls-cert", "", "PEM certificate of the runtime transport (served by hosts, presented by control planes)")
	fs.StringVar(&t.TLSKey, "runtime-tls-key", "", "PEM key of --runtime-tls-cert")
	fs.StringVar(&t.TLSCA, "runtime-tls-ca", "", "PEM CA of the runtime transport (hosts require client certificates it signed; control planes verify hosts)")
	fs.DurationVar(&t.CallTimeout, "runtime-call-timeout", 0, "timeout of one attempt of an http, grpc or redis-command-queue provider call (default 5s)")
	fs.IntVar(&t.CallAttempts, "runtime-call-attempts", 0, "attempts of one http, grpc or redis-command-queue provider call, retryable failures only (default 3)")
}
