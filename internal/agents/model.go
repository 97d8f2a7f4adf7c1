package agents

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dairuntime/dair/internal/tenancy"
	"github.com/dairuntime/dair/messages"
)

// Outcome reason codes. An outcome's Reason is "<code>: <detail>"; ReasonCode extracts the code.
// The codes are stable: surfaces and tests match on them.
const (
	// ReasonNoLiveOwner: no live worker owns the recipient's agent type.
	ReasonNoLiveOwner = "no-live-owner"
	// ReasonWorkerEvicted: the owning worker was evicted (failed probes, left the cluster) while
	// the message was pending.
	ReasonWorkerEvicted = "worker-evicted"
	// ReasonTenantRefused: the sender's tenant may not reach that agent.
	ReasonTenantRefused = "tenant-refused"
	// ReasonMissingTenant: the envelope has no snapshot tenant.
	ReasonMissingTenant = "missing-tenant"
	// ReasonTypeNotRegistered: the worker the message reached does not own the type (any more).
	ReasonTypeNotRegistered = "type-not-registered"
	// ReasonDeadlineExceeded: the deadline passed before the reply.
	ReasonDeadlineExceeded = "deadline-exceeded"
	// ReasonStopping: the runtime is stopping and takes no new work, or failed pending work.
	ReasonStopping = "stopping"
	// ReasonNoRecipientKey: a subscription without a key matched a topic without a source.
	ReasonNoRecipientKey = "no-recipient-key"
	// ReasonAgentPanicked: the handler panicked (status ERROR; the agent restarts).
	ReasonAgentPanicked = "agent-panicked"
)

// Limits on names.
const (
	maxTypeLen = 64
	maxKeyLen  = 256
)

// Key identifies one agent activation: agents are tenant-scoped, so the tenant is part of it.
// It is comparable and used as a map key.
type Key struct {
	Tenant, Type, Key string
}

// KeyOf returns the Key of id under tenant.
func KeyOf(tenant string, id *messages.AgentId) Key {
	return Key{Tenant: tenant, Type: id.GetType(), Key: id.GetKey()}
}

// String returns "tenant/type/key".
func (k Key) String() string { return k.Tenant + "/" + k.Type + "/" + k.Key }

// ValidateType checks an agent type name: 1 to 64 characters of a-z, 0-9, '.', '_' and '-',
// starting with a letter.
func ValidateType(name string) error {
	if name == "" || len(name) > maxTypeLen {
		return fmt.Errorf("%w: type %q must have 1 to %d characters", ErrInvalidAgentID, name, maxTypeLen)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || i > 0 && (r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		if !ok {
			return fmt.Errorf("%w: type %q: want a-z first, then a-z, 0-9, '.', '_', '-'", ErrInvalidAgentID, name)
		}
	}
	return nil
}

// ValidateAgentID checks id: a valid type and a key of 1 to 256 bytes of UTF-8 without control
// characters.
func ValidateAgentID(id *messages.AgentId) error {
	if id == nil {
		return fmt.Errorf("%w: no agent id", ErrInvalidAgentID)
	}
	if err := ValidateType(id.Type); err != nil {
		return err
	}
	return validateKey(id.Key)
}

func validateKey(key string) error {
	if p := textProblem("key", key); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidAgentID, p)
	}
	return nil
}

// textProblem says what keeps s, the name of what, from being 1 to 256 bytes of UTF-8 without
// control characters, or returns "".
func textProblem(what, s string) string {
	if s == "" || len(s) > maxKeyLen || !utf8.ValidString(s) {
		return fmt.Sprintf("%s must be 1 to %d bytes of UTF-8", what, maxKeyLen)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Sprintf("%s %q has a control character", what, s)
	}
	return ""
}

// ValidateTopic checks a topic: a type of 1 to 256 bytes of UTF-8 without control characters
// nor white space; the source, which may be empty, follows the rule of an agent key.
func ValidateTopic(t *messages.TopicId) error {
	if t == nil {
		return fmt.Errorf("%w: no topic", ErrInvalidTopic)
	}
	if p := textProblem("type", t.Type); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidTopic, p)
	}
	if strings.ContainsFunc(t.Type, unicode.IsSpace) {
		return fmt.Errorf("%w: type %q has white space", ErrInvalidTopic, t.Type)
	}
	if t.Source != "" {
		if p := textProblem("source", t.Source); p != "" {
			return fmt.Errorf("%w: %s", ErrInvalidTopic, p)
		}
	}
	return nil
}

// ValidateTenant checks the tenant of a message or subscription: a tenant id as
// tenancy.ValidateTenantID defines it (a run's tenant follows the same rule).
func ValidateTenant(tenant string) error {
	if tenant == "" {
		return ErrNoTenant
	}
	if err := tenancy.ValidateTenantID(tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTenant, err)
	}
	return nil
}

// ValidateSubscription checks s: a valid tenant, exactly one of topic and topic prefix, a valid agent
// type and, when set, a valid agent key.
func ValidateSubscription(s *messages.Subscription) error {
	switch {
	case s == nil:
		return fmt.Errorf("%w: nil", ErrInvalidSubscription)
	case s.TenantId == "":
		return fmt.Errorf("%w: no tenant", ErrInvalidSubscription)
	case (s.Topic == "") == (s.TopicPrefix == ""):
		return fmt.Errorf("%w: want exactly one of topic and topic prefix", ErrInvalidSubscription)
	}
	if err := ValidateTenant(s.TenantId); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSubscription, err)
	}
	if err := ValidateType(s.AgentType); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSubscription, err)
	}
	if s.AgentKey != "" {
		if err := validateKey(s.AgentKey); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidSubscription, err)
		}
	}
	return nil
}

// TenantOf returns the envelope's snapshot tenant, or ErrNoTenant or ErrInvalidTenant.
func TenantOf(env *messages.MessageEnvelope) (string, error) {
	t := env.GetSnapshot().GetTenantId()
	if err := ValidateTenant(t); err != nil {
		return "", err
	}
	return t, nil
}

// TenantAllowed reports whether an agent type restricted to tenants (empty: every tenant)
// accepts messages of tenant.
func TenantAllowed(tenants []string, tenant string) bool {
	return len(tenants) == 0 || slices.Contains(tenants, tenant)
}

// Reason formats an outcome reason "<code>: <detail>".
func Reason(code, format string, args ...any) string {
	return code + ": " + fmt.Sprintf(format, args...)
}

// ReasonCode returns the code of an outcome reason ("no-live-owner" of
// "no-live-owner: ..."), or "" when the reason has none.
func ReasonCode(reason string) string {
	code, _, ok := strings.Cut(reason, ": ")
	if !ok || strings.ContainsAny(code, " \t") {
		return ""
	}
	return code
}

// Delivered returns a DELIVERED outcome with the agent's response.
func Delivered(resp []byte, contentType, worker string) *messages.DeliveryOutcome {
	return &messages.DeliveryOutcome{Status: messages.DeliveryOutcome_DELIVERED, Response: resp,
		ContentType: contentType, WorkerId: worker}
}

// TimedOut returns a TIMEOUT outcome.
func TimedOut(reason, worker string) *messages.DeliveryOutcome {
	return &messages.DeliveryOutcome{Status: messages.DeliveryOutcome_TIMEOUT, Reason: reason, WorkerId: worker}
}

// Undeliverable returns an UNDELIVERABLE outcome.
func Undeliverable(reason, worker string) *messages.DeliveryOutcome {
	return &messages.DeliveryOutcome{Status: messages.DeliveryOutcome_UNDELIVERABLE, Reason: reason, WorkerId: worker}
}

// Failed returns an ERROR outcome carrying the handler's error message.
func Failed(msg, worker string) *messages.DeliveryOutcome {
	return &messages.DeliveryOutcome{Status: messages.DeliveryOutcome_ERROR, Reason: msg, WorkerId: worker}
}

// StatusName returns the lowercase outcome name the surfaces use: "delivered", "timeout",
// "undeliverable", "error" (or "unspecified").
func StatusName(s messages.DeliveryOutcome_Status) string {
	switch s {
	case messages.DeliveryOutcome_DELIVERED:
		return "delivered"
	case messages.DeliveryOutcome_TIMEOUT:
		return "timeout"
	case messages.DeliveryOutcome_UNDELIVERABLE:
		return "undeliverable"
	case messages.DeliveryOutcome_ERROR:
		return "error"
	default:
		return "unspecified"
	}
}
