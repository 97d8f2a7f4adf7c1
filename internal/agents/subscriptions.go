package agents

import (
	"slices"
	"strings"

	"github.com/dairuntime/dair/messages"
)

// Index is the subscription index of a router: the subscriptions of every live worker, matched
// by tenant and topic type, exactly or by prefix. It is not safe for concurrent use; the
// router's actor owns it.
type Index struct {
	byWorker map[string][]*messages.Subscription
	exact    map[string]map[string][]*messages.Subscription // tenant -> topic -> subs
	prefix   map[string][]*messages.Subscription            // tenant -> subs, by prefix
	n        int
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{byWorker: map[string][]*messages.Subscription{}}
}

// Set replaces the subscriptions owned by worker. The index keeps subs (the caller must not
// modify them afterwards).
func (x *Index) Set(worker string, subs []*messages.Subscription) {
	if len(subs) == 0 {
		x.Remove(worker)
		return
	}
	x.byWorker[worker] = subs
	x.rebuild()
}

// Remove drops the subscriptions owned by worker.
func (x *Index) Remove(worker string) {
	if _, ok := x.byWorker[worker]; !ok {
		return
	}
	delete(x.byWorker, worker)
	x.rebuild()
}

// Len returns the number of subscriptions indexed.
func (x *Index) Len() int { return x.n }

// rebuild recomputes the lookup maps from byWorker, in a deterministic order (worker id, then
// the worker's order).
func (x *Index) rebuild() {
	x.exact = map[string]map[string][]*messages.Subscription{}
	x.prefix = map[string][]*messages.Subscription{}
	x.n = 0
	workers := make([]string, 0, len(x.byWorker))
	for w := range x.byWorker {
		workers = append(workers, w)
	}
	slices.Sort(workers)
	for _, w := range workers {
		for _, s := range x.byWorker[w] {
			x.n++
			if s.TopicPrefix != "" {
				x.prefix[s.TenantId] = append(x.prefix[s.TenantId], s)
				continue
			}
			byTopic := x.exact[s.TenantId]
			if byTopic == nil {
				byTopic = map[string][]*messages.Subscription{}
				x.exact[s.TenantId] = byTopic
			}
			byTopic[s.Topic] = append(byTopic[s.Topic], s)
		}
	}
}

// Match returns the subscriptions of tenant matching topic: those whose topic equals the topic
// type, then those whose prefix starts it. A tenant never matches another tenant's
// subscriptions. The caller must not modify the returned subscriptions.
func (x *Index) Match(tenant string, topic *messages.TopicId) []*messages.Subscription {
	typ := topic.GetType()
	out := slices.Clone(x.exact[tenant][typ])
	for _, s := range x.prefix[tenant] {
		if strings.HasPrefix(typ, s.TopicPrefix) {
			out = append(out, s)
		}
	}
	return out
}

// Recipient returns the agent a subscription maps topic to: its agent key, or the topic's
// source when it names none (seed 003's mapping from topic source to recipient key).
func Recipient(s *messages.Subscription, topic *messages.TopicId) *messages.AgentId {
	key := s.AgentKey
	if key == "" {
		key = topic.GetSource()
	}
	return &messages.AgentId{Type: s.AgentType, Key: key}
}

// Refusal is a recipient of a publish that cannot be reached.
type Refusal struct {
	Recipient *messages.AgentId
	Reason    string
}

// Plan is a publish resolved once: the concrete recipients grouped by destination worker.
type Plan struct {
	// Workers lists the destination workers, sorted.
	Workers []string
	// ByWorker holds each destination worker's recipients, in subscription order, each
	// recipient once.
	ByWorker map[string][]*messages.AgentId
	// Refused lists the recipients that have no live owner or refuse the tenant, and
	// subscriptions whose recipient key would be empty.
	Refused []Refusal
}

// Deliveries returns the number of concrete deliveries of the plan.
func (p Plan) Deliveries() int {
	n := 0
	for _, r := range p.ByWorker {
		n += len(r)
	}
	return n
}

// Resolve matches topic against the index once for tenant, rewrites each match into its
// concrete recipient (each agent at most once, however many subscriptions map to it) and
// groups the recipients by the worker the table places them on.
func Resolve(x *Index, t *Table, tenant string, topic *messages.TopicId) Plan {
	p := Plan{ByWorker: map[string][]*messages.AgentId{}}
	seen := map[Key]bool{}
	for _, s := range x.Match(tenant, topic) {
		id := Recipient(s, topic)
		if id.Key == "" {
			p.Refused = append(p.Refused, Refusal{Recipient: id,
				Reason: Reason(ReasonNoRecipientKey, "subscription %s names no key and the topic no source", s.Id)})
			continue
		}
		k := KeyOf(tenant, id)
		if seen[k] {
			continue
		}
		seen[k] = true
		r := t.Route(tenant, id)
		if r.Worker == nil {
			p.Refused = append(p.Refused, Refusal{Recipient: id, Reason: r.Reason})
			continue
		}
		if _, ok := p.ByWorker[r.Worker.ID]; !ok {
			p.Workers = append(p.Workers, r.Worker.ID)
		}
		p.ByWorker[r.Worker.ID] = append(p.ByWorker[r.Worker.ID], id)
	}
	slices.Sort(p.Workers)
	return p
}
