// Package hostmanager is dair's runtime host manager: it creates the hosts that scale-out
// places new runtime instances on, in one of four modes, and supervises the ones it spawns.
//
//   - fixture: the instance is created in-process, on the node's own runtime host.
//   - process: one child process per instance, `dair node --roles runtime --instance ID
//     --instance-settings JSON ...` joining the control plane's cluster (--join) on the same
//     Redis store, with its output appended to DataDir/hosts/host-<id>.log. The child creates
//     its instance at start and the instance registers itself; CreateInstance returns once the
//     child has started and readiness is observed in the registry (by the scale-out provider),
//     never by probing a transport.
//   - attach: nothing is created. A runtime node started elsewhere with
//     `dair node --roles runtime --instance ID` joins the cluster and registers its instance
//     itself; Attach records such an endpoint as managed elsewhere (listed by Hosts, never
//     stopped). Scale-out in attach mode places instances on runtime members through the
//     cluster's "actor" provider.
//   - kubernetes: reserved; New returns ErrNotImplemented.
//
// # Supervision
//
// One goroutine per child waits for its exit. An exit the manager did not request (Stop,
// replacing a reused instance id, or reaping a host whose instance left the registry) is logged
// at error level, counted in dair_host_exits_total{cause="unexpected"} (an event independent of
// the ledger) and passed to Config.OnExit. Recovery then follows the cluster's normal path: the
// child's member leaves, the control plane declares it dead and requeues its runs under bumped
// epochs, and admission requests replacement capacity because the scope's instance count
// dropped. Stop sends SIGTERM to every child and SIGKILL after StopTimeout. On Linux children
// also get SIGTERM from the kernel when the control plane dies (parent-death signal), so they
// never outlive it.
//
// Provider wraps the local provider's scale-out for a Manager and makes it idempotent per
// scale-out request: a request retried after its control plane was killed mid-Provisioning
// reuses the instance an earlier attempt created instead of creating a second one.
//
// # Usage
//
//	mgr, err := hostmanager.New(hostmanager.Config{
//		Mode:     hostmanager.ModeProcess,
//		StoreURL: "redis://127.0.0.1:6379/0",
//		Seeds:    func() []string { return []string{membership.Self().MemberlistAddr} },
//		DataDir:  ".dair",
//	})
//	if err != nil { ... }
//	defer mgr.Stop(ctx)
//	prov := hostmanager.NewProvider(local.Config{Name: hostmanager.ProviderName, System: sys,
//		Resolver: actors.RemotePID, Host: mgr, Instances: st.ListInstances})
//	node, err := actors.Start(ctx, actors.Config{..., Providers: []providers.Provider{prov},
//		ScaleOutProvider: hostmanager.ProviderName})
package hostmanager
