package dag

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/template"
	"text/template/parse"
)

// MaxRenderOps bounds the work of rendering one step's `with`: every range iteration costs one
// operation, every template call (a template's start) callOps, and the text that print,
// printf, println, html, js, urlquery and json make one per 64 bytes. The bound is a count, not a time, so a render
// that exceeds it fails the same way on every replay; it keeps a template such as three nested
// ranges over a long list from holding its execution for seconds (a render runs inside the
// execution's state machine, where neither the step's timeout nor a cancel can reach it).
const MaxRenderOps = 1 << 18

// callOps is the cost of a template call: about four range iterations' time.
const callOps = 4

// ErrRenderBudget is the error (wrapped in ErrRender) of a render that exceeded MaxRenderOps.
var ErrRenderBudget = fmt.Errorf("the template exceeds %d operations (a loop iteration is 1, a template call %d, 64 printed bytes 1)", MaxRenderOps, callOps)

// tickFunc and callFunc are the internal functions instrument places at the start of every
// range body and of every template; users cannot call them because Validate does not know
// them.
const (
	tickFunc = "dairTick"
	callFunc = "dairCall"
)

// renderBudget counts the operations left to one RenderWith.
type renderBudget struct {
	left int
	fm   template.FuncMap // funcs' map, made once
}

func (b *renderBudget) charge(n int) error {
	b.left -= n
	if b.left < 0 {
		return ErrRenderBudget
	}
	return nil
}

// printed charges for s, text a function made, and returns it.
func (b *renderBudget) printed(s string) (string, error) {
	if err := b.charge(1 + len(s)/64); err != nil {
		return "", err
	}
	return s, nil
}

// funcs are templateFuncs and the builtins that make text, charging b, and tickFunc. Each
// gives what the function it replaces gives.
func (b *renderBudget) funcs() template.FuncMap {
	if b.fm == nil {
		b.fm = b.newFuncs()
	}
	return b.fm
}

func (b *renderBudget) newFuncs() template.FuncMap {
	return template.FuncMap{
		tickFunc: func() (string, error) { return "", b.charge(1) },
		callFunc: func() (string, error) { return "", b.charge(callOps) },
		"json": func(v any) (string, error) {
			out, err := json.Marshal(v)
			if err != nil {
				return "", fmt.Errorf("json: %w", err)
			}
			return b.printed(string(out))
		},
		"print":    func(args ...any) (string, error) { return b.printed(fmt.Sprint(args...)) },
		"printf":   func(f string, args ...any) (string, error) { return b.printed(fmt.Sprintf(f, args...)) },
		"println":  func(args ...any) (string, error) { return b.printed(fmt.Sprintln(args...)) },
		"html":     func(args ...any) (string, error) { return b.printed(template.HTMLEscaper(args...)) },
		"js":       func(args ...any) (string, error) { return b.printed(template.JSEscaper(args...)) },
		"urlquery": func(args ...any) (string, error) { return b.printed(template.URLQueryEscaper(args...)) },
	}
}

// tickNode and callNode are actions calling tickFunc and callFunc (parsed once; nodes are
// only read when executed).
var tickNode, callNode = action(tickFunc), action(callFunc)

func action(fn string) parse.Node {
	t, err := template.New(fn).Funcs(template.FuncMap{fn: func() string { return "" }}).Parse("{{" + fn + "}}")
	if err != nil {
		panic(err)
	}
	return t.Tree.Root.Nodes[0]
}

// instrument makes every range iteration of t call tickFunc first, and every template of t
// callFunc.
func instrument(t *template.Template) {
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Tree.Root == nil {
			continue
		}
		tickList(tt.Tree.Root)
		tt.Tree.Root.Nodes = append([]parse.Node{callNode}, tt.Tree.Root.Nodes...)
	}
}

// tickList puts a tick at the start of every range body under l.
func tickList(l *parse.ListNode) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		switch x := n.(type) {
		case *parse.RangeNode:
			tickList(x.List)
			tickList(x.ElseList)
			x.List.Nodes = append([]parse.Node{tickNode}, x.List.Nodes...)
		case *parse.IfNode:
			tickList(x.List)
			tickList(x.ElseList)
		case *parse.WithNode:
			tickList(x.List)
			tickList(x.ElseList)
		case *parse.ListNode:
			tickList(x)
		}
	}
}

// budgetError reports whether err is a render that ran out of operations.
func budgetError(err error) bool { return errors.Is(err, ErrRenderBudget) }
