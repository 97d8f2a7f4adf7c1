package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dairuntime/dair/actors"
	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/jsonvalid"
	"github.com/dairuntime/dair/messages"
)

// Agent messaging (seed 003) over HTTP. The tenant of a send or publish is derived like a run
// submission's (submitSnapshot): with auth on it is the token's, and a body tenant_id naming
// another tenant is a 403, so a tenant token reaches only its own tenant's agents.

// maxAgentTimeout bounds the timeout of one send over HTTP.
const maxAgentTimeout = 10 * time.Minute

// topicsPrefix and messagesSuffix frame the {topic} of POST /v1/topics/{topic}/messages.
const (
	topicsPrefix   = "/v1/topics/"
	messagesSuffix = "/messages"
)

// registerAgentRoutes adds the agent endpoints to the API's routes.
func (s *server) registerAgentRoutes(v1 func(pattern string, h http.HandlerFunc)) {
	v1("GET /v1/agents", s.listAgents)
	v1("POST /v1/agents/{type}/{key}/messages", s.sendAgent)
	// {topic} may be "TYPE/SOURCE" with the '/' escaped (%2F) or not: the route takes the rest
	// of the path and publishTopic cuts the "/messages" suffix.
	v1("POST /v1/topics/{topic...}", s.publishAgent)
}

// listAgents handles GET /v1/agents: the answering node's router's view of the agent
// directory. Every caller sees the types and their owners; operators also see the workers
// (addresses, active agents, health) and the router's pending sessions.
func (s *server) listAgents(w http.ResponseWriter, r *http.Request) {
	if err := requireRole(r, auth.RoleTenant); err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.node.AgentDirectory(r.Context())
	if err != nil {
		s.fail(w, r, agentError(err))
		return
	}
	nodeOf := make(map[string]string, len(d.Workers))
	for _, wk := range d.Workers {
		nodeOf[wk.ID] = wk.NodeID
	}
	out := httpapi.AgentList{Agents: make([]httpapi.AgentType, 0, len(d.Types))}
	for _, t := range d.Types {
		v := httpapi.AgentType{Type: t.Name, Owners: append([]string{}, t.Owners...), OwnerNodes: make([]string, 0, len(t.Owners))}
		for _, o := range t.Owners {
			v.OwnerNodes = append(v.OwnerNodes, nodeOf[o])
		}
		out.Agents = append(out.Agents, v)
	}
	if auth.FromContext(r.Context()).HasRole(auth.RoleOperator) {
		pending := d.PendingSessions
		out.PendingSessions = &pending
		for _, wk := range d.Workers {
			out.Workers = append(out.Workers, httpapi.AgentWorker{WorkerID: wk.ID, NodeID: wk.NodeID, Address: wk.Address,
				Self: wk.Self, Types: append([]string{}, wk.Types...), Subscriptions: wk.Subscriptions, ActiveAgents: wk.ActiveAgents,
				Failures: wk.Failures, Unhealthy: wk.Unhealthy, Evicted: wk.Evicted, Leaving: wk.Leaving})
		}
	}
	s.writeJSON(w, http.StatusOK, out)
}

// sendAgent handles POST /v1/agents/{type}/{key}/messages: it waits for the outcome and
// answers 200 with it, whatever it is.
func (s *server) sendAgent(w http.ResponseWriter, r *http.Request) {
	id := &messages.AgentId{Type: r.PathValue("type"), Key: r.PathValue("key")}
	if err := agents.ValidateAgentID(id); err != nil {
		s.fail(w, r, badRequest("api: %s", plain(err)))
		return
	}
	var req httpapi.AgentSendRequest
	if err := decodeJSON(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	payload, err := agentMessage(req.Message)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	timeout, err := agentTimeout(req.Timeout)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	snap, err := s.agentSnapshot(r, req.TenantID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	env := &messages.MessageEnvelope{Recipient: id, Payload: payload, ContentType: "application/json", Snapshot: snap}
	if timeout > 0 {
		env.Deadline = time.Now().Add(timeout).UnixNano()
	}
	o, err := s.node.SendAgentEnvelope(r.Context(), env)
	if err != nil {
		s.fail(w, r, agentError(err))
		return
	}
	s.writeJSON(w, http.StatusOK, outcomeView(o, env.Id))
}

// publishAgent handles POST /v1/topics/{topic}/messages: it answers 202 with the number of
// deliveries the workers enqueued.
func (s *server) publishAgent(w http.ResponseWriter, r *http.Request) {
	raw, ok := strings.CutSuffix(r.PathValue("topic"), messagesSuffix)
	if !ok {
		s.writeError(w, http.StatusNotFound, httpapi.CodeNotFound, fmt.Sprintf("api: no route for %s %s", r.Method, r.URL.Path))
		return
	}
	topic, err := agents.ParseTopic(raw)
	if err != nil {
		s.fail(w, r, badRequest("api: topic %q: %s (want TYPE or TYPE/SOURCE)", raw, plain(err)))
		return
	}
	var req httpapi.AgentPublishRequest
	if err := decodeJSON(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	payload, err := agentMessage(req.Message)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	snap, err := s.agentSnapshot(r, req.TenantID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := s.node.PublishAgent(r.Context(), topic, payload, snap)
	if err != nil {
		s.fail(w, r, agentError(err))
		return
	}
	s.writeJSON(w, http.StatusAccepted, httpapi.AgentPublishResponse{Deliveries: n, TopicType: topic.Type, TopicSource: topic.Source})
}

// agentSnapshot returns the snapshot of a send or publish (submitSnapshot): its tenant must be
// a valid tenant id (a 400, as for a run) and not suspended (a 423: a suspended tenant's agents
// take no messages from the API, as its pipelines take no runs).
func (s *server) agentSnapshot(r *http.Request, bodyTenant string) (*messages.ExecutionContextSnapshot, error) {
	snap, err := s.submitSnapshot(r, bodyTenant, "")
	if err != nil {
		return nil, err
	}
	if err := agents.ValidateTenant(snap.TenantId); err != nil {
		return nil, badRequest("api: %s", plain(err))
	}
	if err := s.requireActiveTenant(r, snap.TenantId); err != nil {
		return nil, err
	}
	return snap, nil
}

// outcomeView converts a delivery outcome to its wire form. A delivered reply that is JSON is
// kept as is; any other reply becomes a JSON string.
func outcomeView(o *messages.DeliveryOutcome, messageID string) httpapi.AgentSendResponse {
	v := httpapi.AgentSendResponse{Outcome: agents.StatusName(o.GetStatus()), ContentType: o.GetContentType(),
		Reason: o.GetReason(), ReasonCode: agents.ReasonCode(o.GetReason()), WorkerID: o.GetWorkerId(), MessageID: messageID}
	if o.GetStatus() == messages.DeliveryOutcome_DELIVERED && len(o.GetResponse()) > 0 {
		v.Response = replyJSON(o.GetResponse())
	}
	return v
}

// replyJSON returns an agent's reply as JSON: the reply itself when it is valid JSON (UTF-8,
// finite numbers), a JSON string of it otherwise (invalid UTF-8 becomes U+FFFD).
func replyJSON(b []byte) json.RawMessage {
	if jsonvalid.Valid(b) {
		return json.RawMessage(b)
	}
	s, err := json.Marshal(string(b))
	if err != nil { // cannot happen: strings always marshal
		return nil
	}
	return s
}

// agentMessage returns the payload of a request's message: its JSON, compacted. A missing
// message, or one that jsonvalid refuses (invalid UTF-8, a number beyond float64, too deep),
// is a 400, as for a run's input: the reply to it could not be answered as valid JSON.
func agentMessage(m json.RawMessage) ([]byte, error) {
	if len(m) == 0 {
		return nil, badRequest("api: message is required (any JSON value)")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, m); err != nil {
		return nil, badRequest("api: message: %v", err)
	}
	if err := jsonvalid.Check(b.Bytes()); err != nil {
		return nil, badRequest("api: message: %v", err)
	}
	return b.Bytes(), nil
}

// agentTimeout parses a send's timeout: empty means the node's RPC timeout (0).
func agentTimeout(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > maxAgentTimeout {
		return 0, badRequest("api: timeout %q: want a positive Go duration up to %v", s, maxAgentTimeout)
	}
	return d, nil
}

// agentError maps the agent facade's errors: invalid input is a 400, a stopping agent runtime a
// 503; the rest goes to fail as is.
func agentError(err error) error {
	switch {
	case errors.Is(err, agents.ErrInvalidAgentID), errors.Is(err, agents.ErrInvalidTopic), errors.Is(err, agents.ErrInvalidTenant),
		errors.Is(err, agents.ErrNoTenant):
		return badRequest("api: %s", plain(err))
	case errors.Is(err, actors.ErrAgentsStopped):
		return &httpError{status: http.StatusServiceUnavailable, code: httpapi.CodeAgentsUnavailable, msg: "api: " + err.Error()}
	}
	return err
}
