package dag

import (
	"fmt"
	"sort"
	"strings"
	"text/template/parse"
)

// validateTemplates parses every templated string of every step's `with` and checks what it
// references: only .input, .steps, .tenant_id and .execution_id at the root, only steps in the
// step's transitive needs, and only their .output. References through variables other than $,
// or inside range/with bodies, are not followed.
//
// Its cost is linear in the pipeline's size for references to direct needs; a step that
// references an indirect need costs one walk over its ancestors (see ancestry), never a
// stored ancestor set.
func validateTemplates(p *Pipeline, g *Graph) error {
	a := newAncestry(g)
	for i := range p.Steps {
		s := &p.Steps[i]
		if len(s.With) == 0 {
			continue
		}
		c := &templateChecker{step: s.ID, exists: g.level, ancestry: a}
		if err := c.value(s.With, "with"); err != nil {
			return err
		}
	}
	return nil
}

type templateChecker struct {
	step     string
	exists   map[string]int
	ancestry *ancestry // nil: collect input references only, check nothing about steps
	field    string    // the with path being checked
	// collect, when set, receives every `.input...` reference.
	collect func(InputRef)
	// cond counts the if/with/range bodies around the node being walked.
	cond int
}

func (c *templateChecker) fail(format string, args ...any) error {
	return &ValidationError{Kind: KindBadTemplate, StepID: c.step, Field: c.field, Detail: fmt.Sprintf(format, args...)}
}

func (c *templateChecker) value(v any, path string) error {
	switch x := v.(type) {
	case string:
		return c.text(x, path)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if err := c.value(x[k], path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := c.value(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case map[string]string:
		for _, k := range sortedKeys(x) {
			if err := c.text(x[k], path+"."+k); err != nil {
				return err
			}
		}
	case []string:
		for i, e := range x {
			if err := c.text(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *templateChecker) text(s, path string) error {
	if !strings.Contains(s, "{{") {
		return nil
	}
	c.field = path
	t, err := newTemplate(path).Parse(s)
	if err != nil {
		return c.fail("%v", err)
	}
	templates := t.Templates()
	sort.Slice(templates, func(i, j int) bool { return templates[i].Name() < templates[j].Name() })
	for _, tt := range templates {
		if tt.Tree == nil || tt.Tree.Root == nil {
			continue
		}
		if err := c.node(tt.Tree.Root, tt.Name() == path); err != nil {
			return err
		}
	}
	return nil
}

// node walks n; root reports whether dot is the template data there.
func (c *templateChecker) node(n parse.Node, root bool) error {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return nil
		}
		for _, e := range x.Nodes {
			if err := c.node(e, root); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return c.pipe(x.Pipe, root)
	case *parse.TemplateNode:
		return c.pipe(x.Pipe, root)
	case *parse.IfNode:
		return c.branch(&x.BranchNode, root, root)
	case *parse.WithNode:
		return c.branch(&x.BranchNode, root, false)
	case *parse.RangeNode:
		if x.Pipe != nil && len(x.Pipe.Cmds) == 1 && len(x.Pipe.Cmds[0].Args) == 1 {
			if _, ok := x.Pipe.Cmds[0].Args[0].(*parse.NumberNode); ok {
				return c.fail("range over a number literal is not allowed")
			}
		}
		return c.branch(&x.BranchNode, root, false)
	}
	return nil
}

// branch walks if/with/range: the pipeline and else branch see the outer dot, the body inner.
func (c *templateChecker) branch(b *parse.BranchNode, root, innerRoot bool) error {
	if err := c.pipe(b.Pipe, root); err != nil {
		return err
	}
	c.cond++
	defer func() { c.cond-- }()
	if err := c.node(b.List, innerRoot); err != nil {
		return err
	}
	if b.ElseList != nil {
		return c.node(b.ElseList, root)
	}
	return nil
}

func (c *templateChecker) pipe(p *parse.PipeNode, root bool) error {
	if p == nil {
		return nil
	}
	for _, cmd := range p.Cmds {
		if err := c.command(cmd, root); err != nil {
			return err
		}
	}
	return nil
}

func (c *templateChecker) command(cmd *parse.CommandNode, root bool) error {
	args := cmd.Args
	if len(args) >= 2 {
		if id, ok := args[0].(*parse.IdentifierNode); ok && id.Ident == "index" {
			if base, ok := rootPath(args[1], root); ok {
				path := base
				for _, a := range args[2:] {
					s, ok := a.(*parse.StringNode)
					if !ok {
						break
					}
					path = append(path, s.Text)
				}
				if err := c.refVia(path, true); err != nil {
					return err
				}
			}
		}
	}
	for _, a := range args {
		if err := c.arg(a, root); err != nil {
			return err
		}
	}
	return nil
}

func (c *templateChecker) arg(a parse.Node, root bool) error {
	switch x := a.(type) {
	case *parse.FieldNode, *parse.VariableNode:
		if path, ok := rootPath(x, root); ok {
			return c.ref(path)
		}
	case *parse.PipeNode:
		return c.pipe(x, root)
	case *parse.ChainNode:
		return c.arg(x.Node, root)
	}
	return nil
}

// rootPath returns the field names of a node that starts at the template data: .a.b (when dot
// is the data), $.a.b, or . itself.
func rootPath(n parse.Node, root bool) ([]string, bool) {
	switch x := n.(type) {
	case *parse.FieldNode:
		if root {
			return append([]string(nil), x.Ident...), true
		}
	case *parse.VariableNode:
		if len(x.Ident) > 0 && x.Ident[0] == "$" {
			return append([]string(nil), x.Ident[1:]...), true
		}
	case *parse.DotNode:
		if root {
			return nil, true
		}
	}
	return nil, false
}

// ref checks one reference into the template data.
func (c *templateChecker) ref(path []string) error { return c.refVia(path, false) }

// refVia checks one reference; viaIndex marks `index .input "k"`, which yields nil for a
// missing key instead of failing.
func (c *templateChecker) refVia(path []string, viaIndex bool) error {
	if len(path) == 0 {
		return nil
	}
	if !rootFields[path[0]] {
		return c.fail("unknown field .%s (templates see .input, .steps, .tenant_id, .execution_id)", path[0])
	}
	if path[0] == "input" && len(path) > 1 && c.collect != nil {
		c.collect(InputRef{StepID: c.step, Field: c.field, Path: append([]string(nil), path[1:]...),
			Conditional: c.cond > 0 || viaIndex})
	}
	if path[0] != "steps" || len(path) < 2 || c.ancestry == nil {
		return nil
	}
	id := path[1]
	switch {
	case id == c.step:
		return c.fail("template references the step's own output")
	case !c.hasStep(id):
		return c.fail("template references unknown step %q", id)
	case !c.ancestry.isAncestor(id, c.step):
		return c.fail("template references step %q, which is not in the step's needs", id)
	case len(path) >= 3 && path[2] != "output":
		return c.fail("template references .steps.%s.%s; a step exposes only .output", id, path[2])
	}
	return nil
}

func (c *templateChecker) hasStep(id string) bool {
	_, ok := c.exists[id]
	return ok
}

// InputRef is one `.input.a.b` reference of a step's `with` templates.
type InputRef struct {
	// StepID and Field locate the template ("with.prompt").
	StepID, Field string
	// Path is the referenced field's path under .input.
	Path []string
	// Conditional marks references inside an if, with or range body, or through index: a run
	// may succeed without the field.
	Conditional bool
}

// InputRefs returns the input references of every step's templates, in step and field order.
// It walks the templates once and caches the answer; the slice is shared: do not modify it.
// Templates that do not parse are skipped (Validate reports them).
func (p *Pipeline) InputRefs() []InputRef {
	if refs := p.inputRefs.Load(); refs != nil {
		return *refs
	}
	refs := []InputRef{}
	for i := range p.Steps {
		s := &p.Steps[i]
		if len(s.With) == 0 {
			continue
		}
		c := &templateChecker{step: s.ID, collect: func(r InputRef) { refs = append(refs, r) }}
		for _, k := range sortedKeys(s.With) {
			if err := c.value(s.With[k], "with."+k); err != nil {
				continue
			}
		}
	}
	p.inputRefs.Store(&refs)
	return refs
}

// InputWarnings returns the warnings a pipeline without an input_schema deserves: one per
// input field its templates always evaluate, since a run whose input lacks it is created and
// then fails at that step. A pipeline with an input_schema gets none (submit checks inputs).
func (p *Pipeline) InputWarnings() []string {
	if p.HasInputSchema() {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range p.InputRefs() {
		key := strings.Join(r.Path, ".")
		if r.Conditional || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, fmt.Sprintf("step %q uses .input.%s (%s) but the pipeline has no input_schema: a run "+
			"without that field is accepted and fails at the step; declare input_schema to check inputs at submit",
			r.StepID, key, r.Field))
	}
	return out
}
