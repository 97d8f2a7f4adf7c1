package messages

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The packed forms are built one element at a time: the router appends each delivery to its
// batch for a worker as it comes, the worker each outcome to its response for a router. The
// elements are written by hand in the standard encoding (the fields in number order, zero values
// left out, as proto.Marshal writes them), without reflection and without an AgentDelivery or
// AgentDeliveryResult per element. A message the hand encoder does not cover (unknown fields kept
// from a decode, a string that is not UTF-8) is encoded by proto.Marshal, which decides: it
// refuses a string that is not UTF-8.

// AppendDelivery appends delivery (session, env) to b as one element of AgentSendRequest.packed
// (env may be nil) and returns the extended buffer. On error, b is returned as it was.
func AppendDelivery(b []byte, session uint64, env *MessageEnvelope) ([]byte, error) {
	if env != nil && !plainEnvelope(env) {
		return appendProto(b, &AgentDelivery{Session: session, Envelope: env})
	}
	if env == nil {
		return appendSessioned(b, session, -1, nil), nil
	}
	return appendSessioned(b, session, envelopeSize(env), func(b []byte) []byte { return appendEnvelope(b, env) }), nil
}

// AppendResult appends result (session, o) to b as one element of AgentSendResponse.packed (o
// may be nil) and returns the extended buffer. On error, b is returned as it was.
func AppendResult(b []byte, session uint64, o *DeliveryOutcome) ([]byte, error) {
	if o != nil && (len(o.unknownFields) > 0 || !validUTF8(o.ContentType, o.Reason, o.WorkerId)) {
		return appendProto(b, &AgentDeliveryResult{Session: session, Outcome: o})
	}
	if o == nil {
		return appendSessioned(b, session, -1, nil), nil
	}
	return appendSessioned(b, session, outcomeSize(o), func(b []byte) []byte {
		b = appendVarintField(b, 1, uint64(o.Status)) // an enum is its int32, sign-extended
		b = appendBytesField(b, 2, o.Response)
		b = appendStringField(b, 3, o.ContentType)
		b = appendStringField(b, 4, o.Reason)
		return appendStringField(b, 5, o.WorkerId)
	}), nil
}

// appendSessioned appends one element of a packed form (unpackSessioned reads it): a message of
// session (field 1) and, unless body is nil, a body of size bytes (field 2) that body appends.
func appendSessioned(b []byte, session uint64, size int, body func([]byte) []byte) []byte {
	n := varintFieldSize(session)
	if body != nil {
		n += 1 + protowire.SizeBytes(size)
	}
	b = appendLen(b, 2, n)
	b = appendVarintField(b, 1, session)
	if body != nil {
		b = appendLen(b, 2, size)
		b = body(b)
	}
	return b
}

// appendProto appends m to b as field 2 with proto.Marshal.
func appendProto(b []byte, m proto.Message) ([]byte, error) {
	out := appendLen(b, 2, proto.Size(m))
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(out, m)
	if err != nil {
		return b, err
	}
	return out, nil
}

// plainEnvelope reports whether the hand encoder covers e: no unknown fields, every string UTF-8.
func plainEnvelope(e *MessageEnvelope) bool {
	if len(e.unknownFields) > 0 || !validUTF8(e.Id, e.ContentType) {
		return false
	}
	for _, id := range [2]*AgentId{e.Sender, e.Recipient} {
		if id != nil && (len(id.unknownFields) > 0 || !validUTF8(id.Type, id.Key)) {
			return false
		}
	}
	if t := e.Topic; t != nil && (len(t.unknownFields) > 0 || !validUTF8(t.Type, t.Source)) {
		return false
	}
	if s := e.Snapshot; s != nil {
		if len(s.unknownFields) > 0 || !validUTF8(s.TenantId, s.TenantGroupId, s.OrgId, s.UserId, s.CorrelationId, s.RequestedBy, s.Source) ||
			!validUTF8(s.Roles...) {
			return false
		}
	}
	return true
}

func validUTF8(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

func envelopeSize(e *MessageEnvelope) int {
	n := stringFieldSize(e.Id) + stringFieldSize(e.ContentType) + bytesFieldSize(e.Payload)
	if e.Deadline != 0 {
		n += varintFieldSize(uint64(e.Deadline))
	}
	if e.Sender != nil {
		n += 1 + protowire.SizeBytes(twoStringsSize(e.Sender.Type, e.Sender.Key))
	}
	if e.Recipient != nil {
		n += 1 + protowire.SizeBytes(twoStringsSize(e.Recipient.Type, e.Recipient.Key))
	}
	if e.Topic != nil {
		n += 1 + protowire.SizeBytes(twoStringsSize(e.Topic.Type, e.Topic.Source))
	}
	if e.Snapshot != nil {
		n += 1 + protowire.SizeBytes(snapshotSize(e.Snapshot))
	}
	return n
}

func appendEnvelope(b []byte, e *MessageEnvelope) []byte {
	b = appendStringField(b, 1, e.Id)
	if e.Sender != nil {
		b = appendTwoStrings(b, 2, e.Sender.Type, e.Sender.Key)
	}
	if e.Recipient != nil {
		b = appendTwoStrings(b, 3, e.Recipient.Type, e.Recipient.Key)
	}
	if e.Topic != nil {
		b = appendTwoStrings(b, 4, e.Topic.Type, e.Topic.Source)
	}
	b = appendBytesField(b, 5, e.Payload)
	b = appendStringField(b, 6, e.ContentType)
	if s := e.Snapshot; s != nil {
		b = appendLen(b, 7, snapshotSize(s))
		b = appendStringField(b, 1, s.TenantId)
		b = appendStringField(b, 2, s.TenantGroupId)
		b = appendStringField(b, 3, s.OrgId)
		b = appendStringField(b, 4, s.UserId)
		b = appendStringField(b, 5, s.CorrelationId)
		b = appendStringField(b, 6, s.RequestedBy)
		b = appendStringField(b, 7, s.Source)
		for _, r := range s.Roles { // a repeated field writes its empty elements too
			b = appendLen(b, 8, len(r))
			b = append(b, r...)
		}
	}
	return appendVarintField(b, 8, uint64(e.Deadline))
}

func snapshotSize(s *ExecutionContextSnapshot) int {
	n := stringFieldSize(s.TenantId) + stringFieldSize(s.TenantGroupId) + stringFieldSize(s.OrgId) + stringFieldSize(s.UserId) +
		stringFieldSize(s.CorrelationId) + stringFieldSize(s.RequestedBy) + stringFieldSize(s.Source)
	for _, r := range s.Roles {
		n += 1 + protowire.SizeBytes(len(r))
	}
	return n
}

func outcomeSize(o *DeliveryOutcome) int {
	return varintFieldSize(uint64(o.Status)) + bytesFieldSize(o.Response) + stringFieldSize(o.ContentType) +
		stringFieldSize(o.Reason) + stringFieldSize(o.WorkerId)
}

// The helpers below write fields 1 to 15 (a one-byte tag), leaving out zero values as proto3
// does for fields that are not repeated.

func twoStringsSize(one, two string) int { return stringFieldSize(one) + stringFieldSize(two) }

// appendTwoStrings appends field num: a message of two string fields, 1 and 2 (AgentId, TopicId).
func appendTwoStrings(b []byte, num protowire.Number, one, two string) []byte {
	b = appendLen(b, num, twoStringsSize(one, two))
	b = appendStringField(b, 1, one)
	return appendStringField(b, 2, two)
}

func stringFieldSize(s string) int {
	if s == "" {
		return 0
	}
	return 1 + protowire.SizeBytes(len(s))
}

func bytesFieldSize(v []byte) int {
	if len(v) == 0 {
		return 0
	}
	return 1 + protowire.SizeBytes(len(v))
}

func varintFieldSize(x uint64) int {
	if x == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(x)
}

// appendLen appends the tag of length-delimited field num and the length n.
func appendLen(b []byte, num protowire.Number, n int) []byte {
	return protowire.AppendVarint(append(b, byte(num)<<3|byte(protowire.BytesType)), uint64(n))
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return append(appendLen(b, num, len(s)), s...)
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return append(appendLen(b, num, len(v)), v...)
}

func appendVarintField(b []byte, num protowire.Number, x uint64) []byte {
	if x == 0 {
		return b
	}
	return protowire.AppendVarint(append(b, byte(num)<<3|byte(protowire.VarintType)), x)
}
