package engine

import (
	"strings"
	"text/template/parse"
)

// stepRefs says which step outputs the `with` templates of one step read, so that rendering
// them costs what they read rather than what the execution has produced so far.
type stepRefs struct {
	// templated reports that some string of `with` holds a template action.
	templated bool
	// all reports that a template reaches .steps (or the whole data) in a way the analysis
	// does not follow: it is given every output.
	all bool
	// ids lists the steps read as .steps.<id>, $.steps.<id> or index .steps "<id>".
	ids []string
}

// templateRefs analyses the templates of with. It errs towards all: any use of dot or a
// variable as a whole, .steps without an id, a template call or a parse error gives all.
func templateRefs(with map[string]any) stepRefs {
	var r refWalker
	r.value(with)
	return r.refs
}

type refWalker struct {
	refs stepRefs
	seen map[string]bool
}

func (r *refWalker) value(v any) {
	switch x := v.(type) {
	case string:
		r.text(x)
	case map[string]any:
		for _, e := range x {
			r.value(e)
		}
	case []any:
		for _, e := range x {
			r.value(e)
		}
	case map[string]string:
		for _, e := range x {
			r.text(e)
		}
	case []string:
		for _, e := range x {
			r.text(e)
		}
	}
}

func (r *refWalker) text(s string) {
	if !strings.Contains(s, "{{") {
		return
	}
	r.refs.templated = true
	t := parse.New("with")
	t.Mode = parse.SkipFuncCheck
	trees := map[string]*parse.Tree{}
	if _, err := t.Parse(s, "", "", trees); err != nil {
		r.refs.all = true // rendering reports the error
		return
	}
	for _, tr := range trees {
		if tr != nil && tr.Root != nil {
			r.node(tr.Root)
		}
	}
}

func (r *refWalker) node(n parse.Node) {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, e := range x.Nodes {
			r.node(e)
		}
	case *parse.ActionNode:
		r.pipe(x.Pipe)
	case *parse.IfNode:
		r.branch(&x.BranchNode)
	case *parse.RangeNode:
		r.branch(&x.BranchNode)
	case *parse.WithNode:
		r.branch(&x.BranchNode)
	case *parse.TextNode, *parse.CommentNode, *parse.BreakNode, *parse.ContinueNode:
	default: // template calls and anything newer
		r.refs.all = true
	}
}

func (r *refWalker) branch(b *parse.BranchNode) {
	r.pipe(b.Pipe)
	r.node(b.List)
	if b.ElseList != nil {
		r.node(b.ElseList)
	}
}

func (r *refWalker) pipe(p *parse.PipeNode) {
	if p == nil {
		return
	}
	for _, c := range p.Cmds {
		r.command(c)
	}
}

func (r *refWalker) command(c *parse.CommandNode) {
	args := c.Args
	if len(args) >= 3 && isIdent(args[0], "index") && isStepsRoot(args[1]) {
		if s, ok := args[2].(*parse.StringNode); ok {
			r.add(s.Text)
			args = args[3:]
		}
	}
	for _, a := range args {
		r.arg(a)
	}
}

func (r *refWalker) arg(a parse.Node) {
	switch x := a.(type) {
	case *parse.FieldNode:
		r.path(x.Ident)
	case *parse.VariableNode:
		if len(x.Ident) > 1 && x.Ident[0] == "$" {
			r.path(x.Ident[1:])
		} else {
			r.refs.all = true // $ or a declared variable: it may hold anything
		}
	case *parse.PipeNode:
		r.pipe(x)
	case *parse.ChainNode:
		r.arg(x.Node)
	case *parse.IdentifierNode, *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.NilNode:
	default: // dot and anything newer
		r.refs.all = true
	}
}

// path records a reference rooted at the data (or at an inner dot, which over-approximates).
func (r *refWalker) path(ident []string) {
	if len(ident) == 0 || ident[0] != "steps" {
		return
	}
	if len(ident) < 2 {
		r.refs.all = true
		return
	}
	r.add(ident[1])
}

func (r *refWalker) add(id string) {
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if !r.seen[id] {
		r.seen[id] = true
		r.refs.ids = append(r.refs.ids, id)
	}
}

func isIdent(n parse.Node, name string) bool {
	id, ok := n.(*parse.IdentifierNode)
	return ok && id.Ident == name
}

func isStepsRoot(n parse.Node) bool {
	switch x := n.(type) {
	case *parse.FieldNode:
		return len(x.Ident) == 1 && x.Ident[0] == "steps"
	case *parse.VariableNode:
		return len(x.Ident) == 2 && x.Ident[0] == "$" && x.Ident[1] == "steps"
	}
	return false
}
