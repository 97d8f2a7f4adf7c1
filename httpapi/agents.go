package httpapi

import "encoding/json"

// CodeAgentsUnavailable is the error code (503) of a send or publish to a node whose agent
// runtime is stopping.
const CodeAgentsUnavailable = "agents_unavailable"

// Outcomes of an agent send (AgentSendResponse.Outcome).
const (
	// OutcomeDelivered: the agent handled the message; Response is its reply.
	OutcomeDelivered = "delivered"
	// OutcomeTimeout: the timeout passed before the reply came.
	OutcomeTimeout = "timeout"
	// OutcomeUndeliverable: no live worker owns the type, the owner was lost with the message
	// pending, the tenant may not reach that agent, or the runtime is stopping.
	OutcomeUndeliverable = "undeliverable"
	// OutcomeError: the agent's handler failed; Reason is its error message.
	OutcomeError = "error"
)

// AgentSendRequest is the body of POST /v1/agents/{type}/{key}/messages. Message is any JSON
// value (the agent receives its bytes, content type application/json). Timeout is a Go
// duration ("250ms", "2s"); empty means the node's agent RPC timeout (30s by default). With auth
// on, TenantID may be empty (the token's tenant is used) and must otherwise equal the token's
// tenant.
type AgentSendRequest struct {
	TenantID string          `json:"tenant_id,omitempty"`
	Message  json.RawMessage `json:"message"`
	Timeout  string          `json:"timeout,omitempty"`
}

// AgentSendResponse is the 200 answer of a send, whatever its outcome. Response is the
// agent's reply when delivered: the reply itself when it is JSON, otherwise a JSON string of
// it. Reason, for the other outcomes, reads "<reason_code>: <detail>"; ReasonCode is stable
// (for example "no-live-owner", "worker-evicted", "tenant-refused", "deadline-exceeded").
// WorkerID is the worker (cluster member id) that handled, or was to handle, the message.
type AgentSendResponse struct {
	Outcome     string          `json:"outcome"`
	Response    json.RawMessage `json:"response,omitempty"`
	ContentType string          `json:"content_type,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	ReasonCode  string          `json:"reason_code,omitempty"`
	WorkerID    string          `json:"worker_id,omitempty"`
	MessageID   string          `json:"message_id,omitempty"`
}

// AgentPublishRequest is the body of POST /v1/topics/{topic}/messages; TenantID and Message
// as in AgentSendRequest.
type AgentPublishRequest struct {
	TenantID string          `json:"tenant_id,omitempty"`
	Message  json.RawMessage `json:"message"`
}

// AgentPublishResponse is the 202 answer of a publish: the number of concrete deliveries the
// workers enqueued (one per subscribed agent of the tenant with a live owner). TopicType and
// TopicSource are how the path's {topic} was read ("TYPE" or "TYPE/SOURCE").
type AgentPublishResponse struct {
	Deliveries  int    `json:"deliveries"`
	TopicType   string `json:"topic_type"`
	TopicSource string `json:"topic_source,omitempty"`
}

// AgentType is one agent type of GET /v1/agents with its live owners: the workers (cluster
// member ids) its agents are placed on, and their node ids.
type AgentType struct {
	Type       string   `json:"type"`
	Owners     []string `json:"owners"`
	OwnerNodes []string `json:"owner_nodes"`
}

// AgentWorker is one worker of GET /v1/agents as the answering node's router sees it.
// ActiveAgents counts the agents activated on it (every tenant); Failures counts consecutive
// failed health probes.
type AgentWorker struct {
	WorkerID      string   `json:"worker_id"`
	NodeID        string   `json:"node_id"`
	Address       string   `json:"address"`
	Self          bool     `json:"self"`
	Types         []string `json:"types"`
	Subscriptions int      `json:"subscriptions"`
	ActiveAgents  int      `json:"active_agents"`
	Failures      int      `json:"failures"`
	Unhealthy     bool     `json:"unhealthy"`
	Evicted       bool     `json:"evicted"`
	Leaving       bool     `json:"leaving"`
}

// AgentList is the answer of GET /v1/agents: the agent types with their owners and, for
// operators, the workers (with their active agents) and the answering router's pending sends.
type AgentList struct {
	Agents  []AgentType   `json:"agents"`
	Workers []AgentWorker `json:"workers,omitempty"`
	// PendingSessions is answered to operators only (nil, and left out, for other callers).
	PendingSessions *int `json:"pending_sessions,omitempty"`
}
