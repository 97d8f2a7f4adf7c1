package messages

import (
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The packed forms of AgentSendRequest.deliveries and AgentSendResponse.results: their standard
// protobuf encoding, decoded here into a few arrays per request (every delivery's record,
// envelope and recipient side by side; one snapshot per distinct snapshot; strings and payloads
// pointing into the packed bytes) instead of several allocations per delivery. Anything the fast
// decoder does not expect (an unknown field, another wire type, a string that is not UTF-8) is
// left to proto.Unmarshal, which decides.

// errUnexpected makes a fast decoder hand the bytes to proto.Unmarshal.
var errUnexpected = errors.New("messages: unexpected field in packed form")

// PackDeliveries encodes ds as AgentSendRequest.packed (as AppendDelivery does each).
func PackDeliveries(ds []*AgentDelivery) ([]byte, error) {
	var b []byte
	for _, d := range ds {
		var err error
		if len(d.unknownFields) > 0 {
			b, err = appendProto(b, d)
		} else {
			b, err = AppendDelivery(b, d.Session, d.Envelope)
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// UnpackDeliveries decodes AgentSendRequest.packed. The deliveries share the memory of b, which
// the caller must not modify afterwards, and deliveries with the same snapshot share one
// (neither may be modified); the caller owns the returned slice.
func UnpackDeliveries(b []byte) ([]*AgentDelivery, error) {
	sessions, envs, err := UnpackDeliveryList(b)
	if err != nil {
		return nil, err
	}
	ds := make([]AgentDelivery, len(sessions))
	for i := range ds {
		ds[i].Session, ds[i].Envelope = sessions[i], envs[i]
	}
	return pointers(ds), nil
}

// UnpackDeliveryList is UnpackDeliveries without a message per delivery: delivery i is
// sessions[i] and envs[i] (nil for a delivery without envelope).
func UnpackDeliveryList(b []byte) (sessions []uint64, envs []*MessageEnvelope, err error) {
	var m AgentSendRequest
	return unpack(b, unpackDeliveries, &m, func() []*AgentDelivery { return m.Deliveries }, (*AgentDelivery).GetEnvelope)
}

// PackResults encodes rs as AgentSendResponse.packed (as AppendResult does each).
func PackResults(rs []*AgentDeliveryResult) ([]byte, error) {
	var b []byte
	for _, r := range rs {
		var err error
		if len(r.unknownFields) > 0 {
			b, err = appendProto(b, r)
		} else {
			b, err = AppendResult(b, r.Session, r.Outcome)
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// UnpackResults decodes AgentSendResponse.packed, as UnpackDeliveries does.
func UnpackResults(b []byte) ([]*AgentDeliveryResult, error) {
	sessions, outs, err := UnpackResultList(b)
	if err != nil {
		return nil, err
	}
	rs := make([]AgentDeliveryResult, len(sessions))
	for i := range rs {
		rs[i].Session, rs[i].Outcome = sessions[i], outs[i]
	}
	return pointers(rs), nil
}

// UnpackResultList is UnpackResults without a message per result: result i is sessions[i] and
// outcomes[i] (nil for a result without outcome).
func UnpackResultList(b []byte) (sessions []uint64, outcomes []*DeliveryOutcome, err error) {
	var m AgentSendResponse
	return unpack(b, unpackResults, &m, func() []*AgentDeliveryResult { return m.Results }, (*AgentDeliveryResult).GetOutcome)
}

// sessioned is an element of a packed form: a delivery or a result.
type sessioned interface{ GetSession() uint64 }

// unpack decodes the n elements of field 2 in b with fast, or else with proto.Unmarshal into m,
// whose elements list returns (body returns an element's body).
func unpack[E sessioned, B any](b []byte, fast func(b []byte, n int) ([]uint64, []*B, error), m proto.Message, list func() []E,
	body func(E) *B) ([]uint64, []*B, error) {
	if n, err := countField(b, 2); err == nil {
		if sessions, bodies, err := fast(b, n); err == nil {
			return sessions, bodies, nil
		}
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, nil, fmt.Errorf("messages: unpack %s: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	elems := list()
	sessions, bodies := make([]uint64, len(elems)), make([]*B, len(elems))
	for i, e := range elems {
		sessions[i], bodies[i] = e.GetSession(), body(e)
	}
	return sessions, bodies, nil
}

// countField counts the length-delimited occurrences of field num in b, which may hold no
// other field.
func countField(b []byte, num protowire.Number) (int, error) {
	n := 0
	for len(b) > 0 {
		_, rest, err := nextBytes(b, num)
		if err != nil {
			return 0, err
		}
		b = rest
		n++
	}
	return n, nil
}

// nextBytes reads one length-delimited field num off b and returns its value and the rest.
func nextBytes(b []byte, want protowire.Number) (v, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != want || typ != protowire.BytesType {
		return nil, nil, errUnexpected
	}
	v, m := protowire.ConsumeBytes(b[n:])
	if m < 0 {
		return nil, nil, errUnexpected
	}
	return v, b[n+m:], nil
}

// field is one field of a message being decoded: its number, its wire type and its value
// (v for length-delimited fields, x for varints).
type field struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	x   uint64
}

// fields calls fn for every field of the message encoded in b; fn's error stops it.
func fields(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errUnexpected
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			f.v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			f.x, n = protowire.ConsumeVarint(b)
		default:
			return errUnexpected
		}
		if n < 0 {
			return errUnexpected
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// str returns v as a string sharing v's memory, or errUnexpected when v is not UTF-8 (which
// proto.Unmarshal refuses).
func str(v []byte) (string, error) {
	if len(v) == 0 {
		return "", nil
	}
	if !utf8.Valid(v) {
		return "", errUnexpected
	}
	return unsafe.String(&v[0], len(v)), nil
}

func unpackDeliveries(b []byte, n int) ([]uint64, []*MessageEnvelope, error) {
	sessions, ptrs, envs, ids := make([]uint64, n), make([]*MessageEnvelope, n), make([]MessageEnvelope, n), make([]AgentId, n)
	snaps := snapshotCache{}
	err := unpackSessioned(b, n, func(i int) *uint64 { return &sessions[i] }, func(i int, v []byte) error {
		ptrs[i] = &envs[i]
		return unpackEnvelope(v, &envs[i], &ids[i], &snaps)
	})
	if err != nil {
		return nil, nil, err
	}
	return sessions, ptrs, nil
}

// unpackSessioned decodes the n elements of field 2 in b, each a message of a session (field 1,
// into *session(i)) and a body (field 2, at most once, handed to body(i, bytes)): a delivery or a
// result.
func unpackSessioned(b []byte, n int, session func(i int) *uint64, body func(i int, v []byte) error) error {
	for i := range n {
		v, rest, err := nextBytes(b, 2)
		if err != nil {
			return err
		}
		b = rest
		seen := false
		err = fields(v, func(f field) error {
			switch {
			case f.num == 1 && f.typ == protowire.VarintType:
				*session(i) = f.x
			case f.num == 2 && f.typ == protowire.BytesType && !seen:
				seen = true
				return body(i, f.v)
			default:
				return errUnexpected
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// unpackEnvelope decodes a MessageEnvelope into e, its recipient into id.
func unpackEnvelope(b []byte, e *MessageEnvelope, id *AgentId, snaps *snapshotCache) error {
	return fields(b, func(f field) error {
		var err error
		switch {
		case f.typ == protowire.VarintType && f.num == 8:
			e.Deadline = int64(f.x)
		case f.typ != protowire.BytesType:
			return errUnexpected
		case f.num == 1:
			e.Id, err = str(f.v)
		case f.num == 2 && e.Sender == nil:
			e.Sender = &AgentId{}
			err = unpackAgentID(f.v, e.Sender)
		case f.num == 3 && e.Recipient == nil:
			e.Recipient = id
			err = unpackAgentID(f.v, id)
		case f.num == 4 && e.Topic == nil:
			e.Topic = &TopicId{}
			err = unpackTwoStrings(f.v, &e.Topic.Type, &e.Topic.Source)
		case f.num == 5:
			e.Payload = f.v[:len(f.v):len(f.v)]
		case f.num == 6:
			e.ContentType, err = str(f.v)
		case f.num == 7 && e.Snapshot == nil:
			e.Snapshot, err = snaps.get(f.v)
		default:
			return errUnexpected
		}
		return err
	})
}

func unpackAgentID(b []byte, id *AgentId) error { return unpackTwoStrings(b, &id.Type, &id.Key) }

// unpackTwoStrings decodes a message of two string fields, 1 and 2 (AgentId, TopicId).
func unpackTwoStrings(b []byte, one, two *string) error {
	return fields(b, func(f field) error {
		var err error
		switch {
		case f.typ != protowire.BytesType:
			return errUnexpected
		case f.num == 1:
			*one, err = str(f.v)
		case f.num == 2:
			*two, err = str(f.v)
		default:
			return errUnexpected
		}
		return err
	})
}

// snapshotCacheSize is how many distinct snapshots of one packed request are decoded once.
const snapshotCacheSize = 8

// snapshotCache decodes each distinct snapshot of a packed request once (the deliveries of one
// request mostly share a few tenants'), up to snapshotCacheSize of them.
type snapshotCache struct {
	raw   [snapshotCacheSize][]byte
	snaps [snapshotCacheSize]*ExecutionContextSnapshot
	n     int
}

func (c *snapshotCache) get(raw []byte) (*ExecutionContextSnapshot, error) {
	for i := range c.n {
		if string(raw) == string(c.raw[i]) {
			return c.snaps[i], nil
		}
	}
	s := &ExecutionContextSnapshot{}
	if err := proto.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	if c.n < snapshotCacheSize {
		c.raw[c.n], c.snaps[c.n] = raw, s
		c.n++
	}
	return s, nil
}

func unpackResults(b []byte, n int) ([]uint64, []*DeliveryOutcome, error) {
	sessions, ptrs, outs := make([]uint64, n), make([]*DeliveryOutcome, n), make([]DeliveryOutcome, n)
	err := unpackSessioned(b, n, func(i int) *uint64 { return &sessions[i] }, func(i int, v []byte) error {
		ptrs[i] = &outs[i]
		return unpackOutcome(v, &outs[i])
	})
	if err != nil {
		return nil, nil, err
	}
	return sessions, ptrs, nil
}

// pointers returns a pointer to each element of s, in order.
func pointers[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

func unpackOutcome(b []byte, o *DeliveryOutcome) error {
	return fields(b, func(f field) error {
		var err error
		switch {
		case f.typ == protowire.VarintType && f.num == 1:
			o.Status = DeliveryOutcome_Status(int32(f.x))
		case f.typ != protowire.BytesType:
			return errUnexpected
		case f.num == 2:
			o.Response = f.v[:len(f.v):len(f.v)]
		case f.num == 3:
			o.ContentType, err = str(f.v)
		case f.num == 4:
			o.Reason, err = str(f.v)
		case f.num == 5:
			o.WorkerId, err = str(f.v)
		default:
			return errUnexpected
		}
		return err
	})
}
