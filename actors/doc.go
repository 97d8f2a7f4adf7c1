// Package actors is a dair node: the supervision tree of protoactor-go actors that admits,
// dispatches and runs DAG executions durably, and the Node API around it (Start, Submit,
// Await, ControlRun, tenants, instances, Stop).
//
// The actors are thin shells. They own actor state, receive messages, and hand work to the
// control-plane services of internal/controlplane (dispatcher, scaler, recoverer, reconciler,
// tenant lifecycle), to internal/localqueue (an instance's local queue) and to the execution
// engine, which decide and do the store I/O. Long or blocking work never runs in Receive: it
// runs on the node's worker group (internal/workgroup) and comes back as a message.
//
// # Supervision tree
//
//	guardian ── OneForOne, 10 restarts a minute
//	└── node-<node id>             nodeActor; children: OneForOne, 10 a minute
//	    ├── host                   runtimeHost (role runtime); instances: OneForOne, 10 a minute,
//	    │   │                      then stopped (recovery moves their runs once their entry expires)
//	    │   └── <instance id>      instance: local queue, workers, heartbeat; executions:
//	    │       │                  OneForOne, 5 in 30 s, then stopped and the run failed
//	    │       │                  ("execution-crashed", fenced by the execution's epoch)
//	    │       └── <execution>    execution, one per ExecutionId; step tasks are goroutines
//	    └── controlplane           controlPlane (role control-plane); children: OneForOne, 10 a minute
//	        ├── pump               Dispatcher.Cycle per tick or wake, one at a time
//	        ├── scaleout           scaleOutSupervisor; requests: OneForOne, 3 a minute, then
//	        │   │                  stopped (the 2 s reload picks the durable request up again)
//	        │   └── scaleout-<id>  scaleOutRequest: Scaler.Process, then stops
//	        ├── tenants            tenantSupervisor: idle and weekly sweeps; scopes: OneForOne,
//	        │   │                  10 a minute (a restarted scope reloads its state)
//	        │   └── tenant-<key>   tenantScope: one controlplane.Scope
//	        ├── recovery           recoveryCoordinator: Recoverer.Round per RecoveryInterval
//	        └── health             healthReconciler: Reconciler.Reconcile per heartbeat
//
// # Messages
//
// Control plane (all in-process):
//
//	Submit, Recoverer, Scaler  → pump          pumpWake (Send); pumpTick from the group's ticker
//	pump's cycle goroutine     → pump          pumpCycleDone{full}: the next cycle at once when full
//	Scaler                     → scaleout      scaleOutCreated{id}; scaleOutReload from a ticker
//	scaleOutRequest goroutine  → itself        scaleOutDone{err}, then the actor stops
//	Lifecycle (scopeRef)       → tenants       scopeEnvelope{key, op, at}, forwarded to tenant-<key>,
//	                                           answered with *messages.TenantState (not ScopeTouch)
//	tickers and goroutines     → tenants       idleSweepTick, weeklySweepTick → sweepDone
//	                           → recovery      recoveryTick → recoveryDone
//	                           → health        healthTick → healthDone{flagged}
//
// Runtime (protobuf messages from package messages travel between nodes):
//
//	providers (local, actor)   → host          createInstance → its done channel (local);
//	                                           *messages.CreateInstanceRequest → *messages.ProviderResult
//	providers                  → instance      *messages.DispatchRequest, *messages.ControlRequest
//	                                           → *messages.ProviderResult; *messages.RunStatusRequest →
//	                                           *messages.RunStatus; *messages.QueueStatusRequest →
//	                                           *messages.QueueStatus
//	ticker                     → instance      heartbeatTick: publish capacity and refresh holds
//	instance                   → execution     pauseRun, resumeRun, cancelRun{reason}, injectPanic (tests)
//	execution                  → instance      runFinished{localRunID, executionID, outcome}; an
//	                                           execution that stops without it (its supervisor gave
//	                                           up) shows as Terminated → execGone
//	injectExecutionPanic (tests) → instance      injectExecPanic → bool
//
// # Goroutines and shutdown
//
// The node owns one worker group: the committer and publisher loops, the pump's
// cycles, recovery rounds, reconciler passes, sweeps, scale-out processing and its lease
// renewal, instance rehydration and cleanup, the cluster watch and its probes, the liveness
// lease's renewal and the peer checks (liveness.go), the agent runtime's mailbox goroutines,
// and every actor's ticker run on it and receive its stop context. Node.Stop stops intake
// (Submit answers ErrStopped), stops the supervision tree, cancels the group and waits for it
// (at most 10 s; the writer loops flush what they hold), then shuts down the actor system it
// created.
// Config.OnDeclaredDead runs outside the group, since it may stop the node; a pump cycle's
// parallel dispatches are joined by the cycle itself.
//
// # Usage
//
//	n, err := actors.Start(ctx, actors.Config{Store: st})
//	if err != nil { ... }
//	defer n.Stop(context.Background())
//	if _, err := n.PutPipeline(ctx, yamlSource); err != nil { ... }
//	run, err := n.Submit(ctx, actors.SubmitRequest{Pipeline: "three", Snapshot: snap})
//	done, err := n.Await(ctx, run.SharedRunId)
package actors
