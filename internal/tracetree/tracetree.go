// Package tracetree renders an execution's trace (httpapi.Trace spans) as a text tree for the
// CLI: the run at the root, each step with its attempts below it, and the control-plane events
// (admission, dispatch, scale-out, recovery) as leaves, all in time order with offsets from
// the run's start. It is pure: it only formats.
//
// # Usage
//
//	tr, err := c.Trace(ctx, id) // c is a *client.Client
//	if err == nil {
//		err = tracetree.Render(os.Stdout, tr.Spans)
//	}
package tracetree

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/dairuntime/dair/httpapi"
)

// node is one line of the tree.
type node struct {
	at       time.Time
	text     string
	children []*node
}

// Render writes spans as a tree to w:
//
//	run run-1 run_succeeded 1.204s
//	├── +0s      submitted
//	├── +1ms     admission runtime-instance-1: most-available-slots
//	├── +5ms     step fetch 2 attempts, 412ms
//	│   ├── +5ms     attempt 1 failed 102ms: boom
//	│   └── +310ms   attempt 2 succeeded 98ms
//	└── +1.204s  run_succeeded
//
// It returns w's first write error.
func Render(w io.Writer, spans []httpapi.Span) error {
	root, start := build(spans)
	if root == nil {
		_, err := fmt.Fprintln(w, "(empty trace)")
		return err
	}
	var b strings.Builder
	b.WriteString(root.text + "\n")
	write(&b, root.children, "", start)
	_, err := io.WriteString(w, b.String())
	return err
}

// build turns spans into the tree and returns it with the run's start.
func build(spans []httpapi.Span) (*node, time.Time) {
	var root *node
	var start time.Time
	steps := map[string]*node{}
	var stepOrder []*node
	var leaves []*node
	for _, s := range spans {
		switch s.Kind {
		case "run":
			status, _ := s.Attributes["status"].(string)
			root = &node{at: s.Start, text: strings.TrimSpace(fmt.Sprintf("%s %s %s", s.Name, status, dur(s.End.Sub(s.Start))))}
			start = s.Start
		case "step":
			id := strings.TrimPrefix(s.Name, "step ")
			st := steps[id]
			if st == nil {
				st = &node{at: s.Start}
				steps[id] = st
				stepOrder = append(stepOrder, st)
			}
			st.children = append(st.children, &node{at: s.Start, text: attempt(s)})
			st.text = stepText(id, st, s)
		default:
			leaves = append(leaves, &node{at: s.Start, text: event(s)})
		}
	}
	if root == nil {
		return nil, time.Time{}
	}
	root.children = append(stepOrder, leaves...)
	sort.SliceStable(root.children, func(i, j int) bool { return root.children[i].at.Before(root.children[j].at) })
	return root, start
}

// stepText summarizes a step from its attempts so far (last is its latest attempt).
func stepText(id string, st *node, last httpapi.Span) string {
	n := len(st.children)
	total := last.End.Sub(st.at)
	if n == 1 {
		return fmt.Sprintf("step %s %s", id, length(total))
	}
	return fmt.Sprintf("step %s %d attempts, %s", id, n, length(total))
}

// attempt is the line of one step attempt.
func attempt(s httpapi.Span) string {
	status, _ := s.Attributes["status"].(string)
	if open, _ := s.Attributes["open"].(bool); open {
		status = "unfinished"
	}
	text := fmt.Sprintf("attempt %v %s %s", s.Attributes["attempt"], status, length(s.End.Sub(s.Start)))
	if inst, _ := s.Attributes["runtime_instance_id"].(string); inst != "" {
		text += " on " + inst
	}
	if e, _ := s.Attributes["error"].(string); e != "" {
		text += ": " + oneLine(e)
	}
	return text
}

// event is the line of an instant control-plane span.
func event(s httpapi.Span) string {
	text := s.Name
	if inst, _ := s.Attributes["runtime_instance_id"].(string); inst != "" {
		text += " " + inst
	}
	if r, _ := s.Attributes["reason"].(string); r != "" {
		text += ": " + oneLine(r)
	}
	return text
}

// write renders children with the box-drawing prefix of their depth.
func write(b *strings.Builder, children []*node, prefix string, start time.Time) {
	for i, c := range children {
		branch, next := "├── ", "│   "
		if i == len(children)-1 {
			branch, next = "└── ", "    "
		}
		fmt.Fprintf(b, "%s%s%-9s%s\n", prefix, branch, "+"+dur(c.at.Sub(start)), c.text)
		write(b, c.children, prefix+next, start)
	}
}

// dur formats a duration to milliseconds, or microseconds below one millisecond.
func dur(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d < time.Millisecond && d > -time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// length formats how long something took: dur, but "<1ms" for a zero length (both ends
// recorded at the same instant).
func length(d time.Duration) string {
	if d == 0 {
		return "<1ms"
	}
	return dur(d)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
