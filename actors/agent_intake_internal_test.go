package actors

import (
	"slices"
	"sync"
	"testing"
)

func TestAgentIntake_pushAndTake(t *testing.T) {
	var q agentIntake[int]
	if !q.push(1) {
		t.Fatal("the first push must post the wake-up")
	}
	if q.push(2) || q.push(3) {
		t.Fatal("a push with a wake-up pending must not post another")
	}
	got := q.take(nil)
	if !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("took %v, want [1 2 3] in push order", got)
	}
	if !q.push(4) {
		t.Fatal("the first push after a take must post the wake-up")
	}
	next := q.take(got)
	if !slices.Equal(next, []int{4}) {
		t.Fatalf("took %v, want [4]", next)
	}
	if len(q.take(next)) != 0 {
		t.Fatal("a take of an empty intake must return nothing")
	}
}

func TestAgentIntake_spareIsCleared(t *testing.T) {
	var q agentIntake[*int]
	one := 1
	q.push(&one)
	got := q.take(nil)
	q.push(nil)
	q.take(got) // got's array is the intake's again, its old item cleared
	if got[:1][0] != nil {
		t.Fatal("the spare's items must be cleared (they would keep their referents alive)")
	}
}

// TestAgentIntake_concurrentPushes: every item pushed is taken exactly once, each producer's in
// its order, and a wake-up was posted for every take that found items.
func TestAgentIntake_concurrentPushes(t *testing.T) {
	const producers, each = 4, 1000
	var q agentIntake[[2]int]
	wakes := make(chan struct{}, producers*each)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if q.push([2]int{p, i}) {
					wakes <- struct{}{}
				}
			}
		}()
	}
	next := make([]int, producers)
	var spare [][2]int
	taken := 0
	for taken < producers*each {
		<-wakes
		spare = q.take(spare)
		for _, it := range spare {
			if it[1] != next[it[0]] {
				t.Fatalf("producer %d: took item %d, want %d", it[0], it[1], next[it[0]])
			}
			next[it[0]]++
		}
		taken += len(spare)
	}
	wg.Wait()
	if len(q.take(spare)) != 0 {
		t.Fatal("items left after every one was taken")
	}
}
