package agents

import (
	"fmt"
	"strings"

	"github.com/dairuntime/dair/messages"
)

// The string forms of agent ids and topics that the surfaces (HTTP paths, the CLI, MCP, the
// agent.send and agent.publish step handlers) accept. Both split at the first '/', so a key or
// a topic source may contain '/', an agent type never does, and a topic type containing '/'
// can only be published through the Go library.

// ParseAgentRef reads "TYPE/KEY" as an agent id and validates it (ErrInvalidAgentID).
func ParseAgentRef(s string) (*messages.AgentId, error) {
	typ, key, ok := strings.Cut(s, "/")
	if !ok {
		return nil, fmt.Errorf("%w: %q: want TYPE/KEY", ErrInvalidAgentID, s)
	}
	id := &messages.AgentId{Type: typ, Key: key}
	if err := ValidateAgentID(id); err != nil {
		return nil, err
	}
	return id, nil
}

// FormatAgentRef returns the "TYPE/KEY" form of id.
func FormatAgentRef(id *messages.AgentId) string { return id.GetType() + "/" + id.GetKey() }

// ParseTopic reads "TYPE" or "TYPE/SOURCE" as a topic and validates it (ErrInvalidTopic). The
// type is what subscriptions match (exactly or by prefix); the source becomes the recipient
// key of a subscription that names none.
func ParseTopic(s string) (*messages.TopicId, error) {
	typ, src, _ := strings.Cut(s, "/")
	t := &messages.TopicId{Type: typ, Source: src}
	if err := ValidateTopic(t); err != nil {
		return nil, err
	}
	return t, nil
}

// FormatTopic returns the "TYPE" or "TYPE/SOURCE" form of t.
func FormatTopic(t *messages.TopicId) string {
	if t.GetSource() == "" {
		return t.GetType()
	}
	return t.GetType() + "/" + t.GetSource()
}
