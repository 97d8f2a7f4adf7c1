package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/httpapi"
)

// Agent messaging tools (seed 003).
const (
	ToolListAgents       = "list_agents"
	ToolSendAgentMessage = "send_agent_message"
	ToolPublishMessage   = "publish_message"
)

// SendAgentMessageInput is the input of send_agent_message.
type SendAgentMessageInput struct {
	Agent    string          `json:"agent" jsonschema:"the recipient as TYPE/KEY, for example counter/page-1 (see list_agents for the types)"`
	TenantID string          `json:"tenant_id,omitempty" jsonschema:"tenant whose agent to reach; with auth on it defaults to the token's tenant and must equal it"`
	Message  json.RawMessage `json:"message" jsonschema:"JSON value sent to the agent"`
	Timeout  string          `json:"timeout,omitempty" jsonschema:"how long to wait for the reply, a Go duration such as 2s (default: the node's 30s)"`
}

// PublishMessageInput is the input of publish_message.
type PublishMessageInput struct {
	Topic    string          `json:"topic" jsonschema:"TYPE or TYPE/SOURCE: subscriptions match the type; the source is the recipient key of subscriptions that name none"`
	TenantID string          `json:"tenant_id,omitempty" jsonschema:"tenant whose subscriptions to match; with auth on it defaults to the token's tenant and must equal it"`
	Message  json.RawMessage `json:"message" jsonschema:"JSON value delivered to every subscribed agent"`
}

// registerAgentTools adds list_agents, send_agent_message and publish_message.
func registerAgentTools(s *mcp.Server, svc *service) {
	add(s, svc, tool(ToolListAgents, "List the agent types with the workers that own them (operators also see the "+
		"workers' active agents and health).", true, false),
		func(ctx context.Context, c *client.Client, _ EmptyInput) (any, string, error) {
			l, err := c.ListAgents(ctx)
			if err != nil {
				return nil, "", err
			}
			names := make([]string, 0, len(l.Agents))
			for _, a := range l.Agents {
				names = append(names, fmt.Sprintf("%s (%d owner(s))", a.Type, len(a.Owners)))
			}
			return l, fmt.Sprintf("%d agent type(s): %s", len(l.Agents), strings.Join(names, ", ")), nil
		})
	addExact(s, svc, tool(ToolSendAgentMessage, "Send a message to one agent and wait for its reply. The answer's outcome "+
		"is delivered (response holds the reply), timeout, undeliverable or error (reason says why).", false, false), sendAgentMessage)
	addExact(s, svc, tool(ToolPublishMessage, "Publish a message to a topic: every subscribed agent of the tenant gets it "+
		"once. Returns the number of deliveries.", false, false),
		func(ctx context.Context, c *client.Client, in PublishMessageInput) (any, string, error) {
			if err := need("topic", in.Topic); err != nil {
				return nil, "", err
			}
			p, err := c.PublishAgent(ctx, in.Topic, httpapi.AgentPublishRequest{TenantID: in.TenantID, Message: in.Message})
			if err != nil {
				return nil, "", err
			}
			return p, fmt.Sprintf("published to %s: %d deliveries", in.Topic, p.Deliveries), nil
		})
}

// sendAgentMessage is the body of send_agent_message. Every outcome is a result; only a
// refused request (bad input, 403) or an unreachable node is a tool error.
func sendAgentMessage(ctx context.Context, c *client.Client, in SendAgentMessageInput) (any, string, error) {
	if err := need("agent", in.Agent); err != nil {
		return nil, "", err
	}
	typ, key, ok := strings.Cut(in.Agent, "/")
	if !ok || typ == "" || key == "" {
		return nil, "", fmt.Errorf("%w: agent %q: want TYPE/KEY", ErrBadArgument, in.Agent)
	}
	o, err := c.SendAgent(ctx, typ, key, httpapi.AgentSendRequest{TenantID: in.TenantID, Message: in.Message, Timeout: in.Timeout})
	if err != nil {
		return nil, "", err
	}
	if o.Outcome == httpapi.OutcomeDelivered {
		return o, fmt.Sprintf("%s: delivered: %s", in.Agent, o.Response), nil
	}
	return o, fmt.Sprintf("%s: %s: %s", in.Agent, o.Outcome, o.Reason), nil
}
