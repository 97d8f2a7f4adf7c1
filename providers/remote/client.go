package remote

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dairuntime/dair/internal/ids"
	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
)

// Transport carries runtime commands to an endpoint: the part of a remote provider that knows
// HTTP, gRPC or Redis. Both methods are goroutine-safe.
type Transport interface {
	// Endpoint returns the endpoint that reaches d, or an error: an *AttemptError of class
	// ClassEndpointInvalid for an unusable one, ErrNoEndpoint when d names none.
	Endpoint(d *messages.CapacityDescriptor) (string, error)
	// Send delivers cmd to endpoint and returns the answer. It blocks until the answer arrives
	// or ctx ends; a failure is an *AttemptError (or an error Classify understands). The
	// caller owns the returned result.
	Send(ctx context.Context, endpoint string, cmd *messages.RuntimeCommand) (*messages.RuntimeCommandResult, error)
}

// ErrNoEndpoint is returned by Transport.Endpoint when the descriptor names no endpoint.
var ErrNoEndpoint = errors.New("remote: descriptor has no endpoint")

// ClientConfig configures a Client.
type ClientConfig struct {
	// Name is the provider name ("http", "grpc", "redis-command-queue"). Required.
	Name string
	// Transport carries the commands. Required.
	Transport Transport
	// Caller hardens every call. Required.
	Caller *Caller
	// ScaleOut, when set, creates capacity (the host manager's provider); the Client then
	// proves each new instance ready through the transport itself (a status call). Nil:
	// scale-out fails with reason "no-scaler".
	ScaleOut providers.ScaleOuter
	// Lookup reads an instance's registry descriptor (readiness after scale-out). Required
	// with ScaleOut.
	Lookup func(ctx context.Context, id string) (*messages.CapacityDescriptor, error)
	// ReadyTimeout bounds the wait for a new instance to answer a status call through the
	// transport. Default 30s.
	ReadyTimeout time.Duration
	// ReadyPoll is the interval of readiness polls. Default 50ms.
	ReadyPoll time.Duration
}

// Client implements the dispatch, status, control and scale-out capabilities of a remote
// provider over a Transport, with the Caller's hardening. All methods are goroutine-safe and
// never return nil.
type Client struct {
	cfg ClientConfig
}

var (
	_ providers.Dispatcher   = (*Client)(nil)
	_ providers.StatusReader = (*Client)(nil)
	_ providers.Controller   = (*Client)(nil)
	_ providers.ScaleOuter   = (*Client)(nil)
)

// NewClient returns a Client; a config without Name, Transport or Caller panics (a wiring bug).
func NewClient(cfg ClientConfig) *Client {
	if cfg.Name == "" || cfg.Transport == nil || cfg.Caller == nil {
		panic("remote: client config: Name, Transport and Caller are required")
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.ReadyPoll <= 0 {
		cfg.ReadyPoll = 50 * time.Millisecond
	}
	return &Client{cfg: cfg}
}

// Name returns the provider name.
func (c *Client) Name() string { return c.cfg.Name }

// WithScaleOut returns a Client sharing c's transport and circuits whose scale-out goes
// through s (readiness read with lookup and proven through the transport).
func (c *Client) WithScaleOut(s providers.ScaleOuter, lookup func(ctx context.Context, id string) (*messages.CapacityDescriptor, error)) *Client {
	cfg := c.cfg
	cfg.ScaleOut, cfg.Lookup = s, lookup
	return &Client{cfg: cfg}
}

// Caller returns the client's Caller (its circuits).
func (c *Client) Caller() *Caller { return c.cfg.Caller }

// Dispatch delivers req to the instance of d. It blocks for at most the Caller's attempts and
// backoff (or until ctx ends). A transport failure is a "<prefix>-..." reason; the instance's
// own refusal (queue full, tenant not visible) is its answer, unchanged.
func (c *Client) Dispatch(ctx context.Context, d *messages.CapacityDescriptor, req *messages.DispatchRequest) *messages.ProviderResult {
	id := instanceID(d, req.GetRuntimeInstanceId())
	if req == nil {
		return providers.Failure(c.cfg.Name, id, providers.OpDispatch, providers.ReasonInvalidRequest, false)
	}
	ans, fail := c.call(ctx, d, id, providers.OpDispatch, OpDispatch, &messages.RuntimeCommand{Command: &messages.RuntimeCommand_Dispatch{Dispatch: req}})
	if fail != nil {
		return fail
	}
	return c.complete(ans.Result, id, providers.OpDispatch)
}

// RunStatus reads a local run's status from the instance of d.
func (c *Client) RunStatus(ctx context.Context, d *messages.CapacityDescriptor, localRunID string) *messages.RunStatus {
	id := instanceID(d, "")
	cmd := &messages.RuntimeCommand{Command: &messages.RuntimeCommand_RunStatus{RunStatus: &messages.RunStatusRequest{RuntimeInstanceId: id, LocalRunId: localRunID}}}
	ans, fail := c.call(ctx, d, id, providers.OpRunStatus, OpCommand, cmd)
	if fail != nil {
		return &messages.RunStatus{LocalRunId: localRunID, Status: providers.RunStatusUnknown, Result: fail}
	}
	st := ans.GetRunStatus()
	if st == nil {
		st = &messages.RunStatus{LocalRunId: localRunID, Status: providers.RunStatusUnknown}
	}
	st.Result = c.complete(ans.Result, id, providers.OpRunStatus)
	return st
}

// QueueStatus reads the queue state (and capacity descriptor) of the instance of d.
func (c *Client) QueueStatus(ctx context.Context, d *messages.CapacityDescriptor) *messages.QueueStatus {
	id := instanceID(d, "")
	cmd := &messages.RuntimeCommand{Command: &messages.RuntimeCommand_Status{Status: &messages.QueueStatusRequest{RuntimeInstanceId: id}}}
	ans, fail := c.call(ctx, d, id, providers.OpQueueStatus, OpCommand, cmd)
	if fail != nil {
		return &messages.QueueStatus{Result: fail}
	}
	qs := ans.GetStatus()
	if qs == nil {
		qs = &messages.QueueStatus{}
	}
	qs.Result = c.complete(ans.Result, id, providers.OpQueueStatus)
	return qs
}

// Control sends an operational command to the instance of d.
func (c *Client) Control(ctx context.Context, d *messages.CapacityDescriptor, req *messages.ControlRequest) *messages.ProviderResult {
	id := instanceID(d, req.GetRuntimeInstanceId())
	if req.GetOp() == "" {
		return providers.Failure(c.cfg.Name, id, providers.OpControl, providers.ReasonInvalidRequest, false)
	}
	ans, fail := c.call(ctx, d, id, providers.OpControl, OpCommand, &messages.RuntimeCommand{Command: &messages.RuntimeCommand_Control{Control: req}})
	if fail != nil {
		return fail
	}
	return c.complete(ans.Result, id, providers.OpControl)
}

// Heartbeat asks the instance of d for a heartbeat through the transport and returns its
// descriptor, or a failed result.
func (c *Client) Heartbeat(ctx context.Context, d *messages.CapacityDescriptor) (*messages.HeartbeatResponse, *messages.ProviderResult) {
	id := instanceID(d, "")
	cmd := &messages.RuntimeCommand{Command: &messages.RuntimeCommand_Heartbeat{Heartbeat: &messages.HeartbeatRequest{RuntimeInstanceId: id,
		SentAt: time.Now().UnixNano()}}}
	ans, fail := c.call(ctx, d, id, OpHeartbeat, OpCommand, cmd)
	if fail != nil {
		return nil, fail
	}
	return ans.GetHeartbeat(), c.complete(ans.Result, id, OpHeartbeat)
}

// call sends cmd to the instance of d under the Caller's hardening. It returns the answer, or
// the failed result of op.
func (c *Client) call(ctx context.Context, d *messages.CapacityDescriptor, id, op, kind string, cmd *messages.RuntimeCommand) (*messages.RuntimeCommandResult, *messages.ProviderResult) {
	if id == "" {
		return nil, providers.Failure(c.cfg.Name, id, op, providers.ReasonInvalidRequest, false)
	}
	endpoint, err := c.cfg.Transport.Endpoint(d)
	if err != nil {
		code := CodeEndpointInvalid
		if errors.Is(err, ErrNoEndpoint) {
			code = CodeEndpointMissing
		}
		return nil, providers.Failure(c.cfg.Name, id, op, c.cfg.Caller.Reason(code), false)
	}
	cmd.CommandId, cmd.RuntimeInstanceId = ids.New("cmd"), id
	cmd.Deadline = time.Now().Add(c.cfg.Caller.budget()).UnixNano()
	if dl, ok := ctx.Deadline(); ok && dl.UnixNano() < cmd.Deadline {
		cmd.Deadline = dl.UnixNano()
	}
	var ans *messages.RuntimeCommandResult
	out := c.cfg.Caller.Call(ctx, endpoint, kind, func(ctx context.Context) error {
		r, err := c.cfg.Transport.Send(ctx, endpoint, cmd)
		if err != nil {
			return err
		}
		if r.GetResult() == nil {
			return Fail(ClassInvalidResponse, fmt.Errorf("answer without a result"))
		}
		ans = r
		return nil
	})
	if !out.OK() {
		return nil, providers.Failure(c.cfg.Name, id, op, out.Reason, out.Retryable)
	}
	return ans, nil
}

// complete fills the provider, instance and op of an instance's answer when left empty.
func (c *Client) complete(res *messages.ProviderResult, id, op string) *messages.ProviderResult {
	if res.Provider == "" {
		res.Provider = c.cfg.Name
	}
	if res.RuntimeInstanceId == "" {
		res.RuntimeInstanceId = id
	}
	if res.Op == "" {
		res.Op = op
	}
	return res
}

// ScaleOut creates capacity through the configured delegate (the host manager), then waits
// until each new instance is registered and answers a status call through this transport:
// readiness is proven by the transport itself. It blocks for at most the delegate's wait plus
// ReadyTimeout.
func (c *Client) ScaleOut(ctx context.Context, req *messages.ScaleOutRequest) providers.ScaleOutResult {
	if c.cfg.ScaleOut == nil || c.cfg.Lookup == nil {
		res := providers.Failure(c.cfg.Name, "", providers.OpScaleOut, providers.ReasonNoScaler, false)
		res.TenantId, res.CorrelationId = req.GetSettings().GetTenantId(), req.GetCorrelationId()
		return providers.ScaleOutResult{Result: res}
	}
	out := c.cfg.ScaleOut.ScaleOut(ctx, req)
	if !out.Result.GetOk() {
		return out
	}
	for _, id := range out.InstanceIDs {
		if reason := c.awaitTransport(ctx, id); reason != "" {
			res := providers.Failure(c.cfg.Name, id, providers.OpScaleOut, reason, true)
			res.TenantId, res.CorrelationId = req.GetSettings().GetTenantId(), req.GetCorrelationId()
			return providers.ScaleOutResult{Result: res}
		}
	}
	out.Result.Provider = c.cfg.Name
	return out
}

// awaitTransport polls until instance id is registered with this provider and answers a queue
// status call through the transport; it returns "" then, else the last failure reason.
func (c *Client) awaitTransport(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	tk := time.NewTicker(c.cfg.ReadyPoll)
	defer tk.Stop()
	last := providers.ReasonInstanceNotReady
	for {
		if d, err := c.cfg.Lookup(ctx, id); err == nil && d.GetProviderName() == c.cfg.Name {
			qs := c.QueueStatus(ctx, d)
			if qs.GetResult().GetOk() {
				return ""
			}
			last = providers.ReasonInstanceNotReady + ": " + qs.GetResult().GetReason()
		}
		select {
		case <-ctx.Done():
			return last
		case <-tk.C:
		}
	}
}

// instanceID returns the descriptor's runtime instance id, else fallback.
func instanceID(d *messages.CapacityDescriptor, fallback string) string {
	if id := d.GetRuntimeInstanceId(); id != "" {
		return id
	}
	return fallback
}
