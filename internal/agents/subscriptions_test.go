package agents

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dairuntime/dair/messages"
)

func topic(t, s string) *messages.TopicId { return &messages.TopicId{Type: t, Source: s} }

func prefixSub(id, tenant, prefix, agentType, key string) *messages.Subscription {
	return &messages.Subscription{Id: id, TenantId: tenant, TopicPrefix: prefix, AgentType: agentType, AgentKey: key}
}

func TestResolve_seedRules(t *testing.T) {
	tests := []struct {
		name    string
		subs    []*messages.Subscription
		tenant  string
		topic   *messages.TopicId
		want    []string // "worker:type/key", sorted
		refused []string // reason codes
	}{
		{"an exact topic subscription maps the topic source to the recipient key",
			[]*messages.Subscription{sub("s1", "acme", "orders", "echo", "")}, "acme", topic("orders", "o-17"),
			[]string{"w:echo/o-17"}, nil},
		{"a subscription with a key always reaches that key",
			[]*messages.Subscription{sub("s1", "acme", "orders", "echo", "audit")}, "acme", topic("orders", "o-17"),
			[]string{"w:echo/audit"}, nil},
		{"a prefix subscription matches every topic type it starts",
			[]*messages.Subscription{prefixSub("s1", "acme", "orders.", "echo", "all")}, "acme", topic("orders.eu", ""),
			[]string{"w:echo/all"}, nil},
		{"a prefix does not match a shorter or different topic",
			[]*messages.Subscription{prefixSub("s1", "acme", "orders.", "echo", "all")}, "acme", topic("orders", "x"),
			nil, nil},
		{"another tenant's subscriptions never match",
			[]*messages.Subscription{sub("s1", "globex", "orders", "echo", "")}, "acme", topic("orders", "o-1"),
			nil, nil},
		{"recipients reached by several subscriptions get the message once",
			[]*messages.Subscription{sub("s1", "acme", "orders", "echo", "k"), prefixSub("s2", "acme", "ord", "echo", "k"),
				sub("s3", "acme", "orders", "echo", "")}, "acme", topic("orders", "k"),
			[]string{"w:echo/k"}, nil},
		{"a recipient type without live owner is refused",
			[]*messages.Subscription{sub("s1", "acme", "orders", "ghost", "k")}, "acme", topic("orders", ""),
			nil, []string{ReasonNoLiveOwner}},
		{"no key and no source is refused",
			[]*messages.Subscription{sub("s1", "acme", "orders", "echo", "")}, "acme", topic("orders", ""),
			nil, []string{ReasonNoRecipientKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := directoryOf("r", "echo", "w")
			d.Register(&messages.AgentWorkerRegistration{WorkerId: "r", Version: 1, Subscriptions: tt.subs})
			p := Resolve(d.Index(), d.Table(), tt.tenant, tt.topic)
			var got []string
			for w, ids := range p.ByWorker {
				for _, id := range ids {
					got = append(got, w+":"+id.Type+"/"+id.Key)
				}
			}
			slices.Sort(got)
			var refused []string
			for _, r := range p.Refused {
				refused = append(refused, ReasonCode(r.Reason))
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(refused, tt.refused) {
				t.Fatalf("deliveries %v refused %v, want %v and %v", got, refused, tt.want, tt.refused)
			}
		})
	}
}

func TestResolve_groupsOneBatchPerWorker(t *testing.T) {
	d := directoryOf("r", "counter", "w1", "w2", "w3")
	var subs []*messages.Subscription
	for i := range 1000 {
		subs = append(subs, sub(fmt.Sprint("s", i), "acme", "news", "counter", fmt.Sprint("k", i)))
	}
	d.Register(&messages.AgentWorkerRegistration{WorkerId: "r", Version: 1, Subscriptions: subs})
	p := Resolve(d.Index(), d.Table(), "acme", topic("news", ""))
	if !slices.Equal(p.Workers, []string{"w1", "w2", "w3"}) || len(p.ByWorker) != 3 {
		t.Fatalf("workers %v", p.Workers)
	}
	if p.Deliveries() != 1000 || len(p.Refused) != 0 {
		t.Fatalf("deliveries %d refused %d", p.Deliveries(), len(p.Refused))
	}
	tb := d.Table()
	for w, ids := range p.ByWorker {
		if len(ids) < 250 {
			t.Errorf("%s got %d recipients, want about a third", w, len(ids))
		}
		for _, id := range ids {
			if r := tb.Route("acme", id); r.Worker.ID != w {
				t.Fatalf("%s grouped on %s but placed on %s", id.Key, w, r.Worker.ID)
			}
		}
	}
}

func TestIndex_SetRemove(t *testing.T) {
	x := NewIndex()
	x.Set("w1", []*messages.Subscription{sub("a", "acme", "t", "echo", "")})
	x.Set("w2", []*messages.Subscription{sub("b", "acme", "t", "echo", ""), prefixSub("c", "acme", "x", "echo", "")})
	if x.Len() != 3 || len(x.Match("acme", topic("t", ""))) != 2 {
		t.Fatalf("Len %d, Match %d", x.Len(), len(x.Match("acme", topic("t", ""))))
	}
	x.Set("w2", nil)
	x.Remove("nobody")
	if x.Len() != 1 {
		t.Fatalf("after removing w2: %d", x.Len())
	}
}
