package client

import (
	"context"
	"net/http"

	"github.com/dairuntime/dair/httpapi"
)

// ListAgents returns the agent types with their owners (GET /v1/agents); operators also get
// the workers and the answering router's pending sends.
func (c *Client) ListAgents(ctx context.Context) (*httpapi.AgentList, error) {
	var out httpapi.AgentList
	if err := c.do(ctx, http.MethodGet, "/v1/agents", nil, "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SendAgent sends a message to agent typ/key (POST /v1/agents/{type}/{key}/messages) and
// returns the outcome. Every outcome (delivered, timeout, undeliverable, error) is a result,
// not an error: the error is non-nil only when the node refused the request (bad input, 403)
// or could not be reached. The call blocks until the outcome, so ctx should outlive
// req.Timeout.
func (c *Client) SendAgent(ctx context.Context, typ, key string, req httpapi.AgentSendRequest) (*httpapi.AgentSendResponse, error) {
	var out httpapi.AgentSendResponse
	if err := c.doJSON(ctx, http.MethodPost, "/v1/agents/"+esc(typ)+"/"+esc(key)+"/messages", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PublishAgent publishes a message to topic, "TYPE" or "TYPE/SOURCE" (POST
// /v1/topics/{topic}/messages, the topic escaped as one path segment), and returns the number
// of deliveries.
func (c *Client) PublishAgent(ctx context.Context, topic string, req httpapi.AgentPublishRequest) (*httpapi.AgentPublishResponse, error) {
	var out httpapi.AgentPublishResponse
	if err := c.doJSON(ctx, http.MethodPost, "/v1/topics/"+esc(topic)+"/messages", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
