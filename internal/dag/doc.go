// Package dag is dair's pipeline model: parsing pipeline documents (YAML or JSON), validating
// them with precise errors, hashing their meaning, compiling them into a DAG with a
// deterministic order, planning ready sets and resumes from committed step states, and
// rendering the `with` templates of steps.
//
// The package is pure: no I/O, no goroutines, no clocks. The execution actor drives it.
//
// # Pipelines
//
// A pipeline document has a key, an optional description and steps; each step has an id, the
// handler it uses, its `with` input, the steps it needs, a retry policy and a timeout:
//
//	key: summarize-report
//	steps:
//	  - id: fetch
//	    uses: http
//	    with: {method: GET, url: "http://127.0.0.1:9000/doc"}
//	    retry: {max_attempts: 3, backoff: 200ms, max_backoff: 2s}
//	    timeout: 10s
//	  - id: summarize
//	    uses: llm.chat
//	    needs: [fetch]
//	    with: {model: "m", prompt: "Summarize: {{ .steps.fetch.output.body }}"}
//
// A document whose first non-space byte is '{' is JSON of the same shape. Decoding is strict
// (unknown fields are errors) and numbers in `with` become float64, as with encoding/json.
//
// # Inputs
//
// A pipeline may declare input_schema, a self-contained JSON Schema that run inputs must
// match. CheckInput checks an input against it and against the `.input` fields the templates
// always evaluate, and names the failing JSON pointer (*InputError, matching ErrBadInput);
// without a schema it accepts every input and InputWarnings lists the fields a run may lack.
//
// # Errors
//
// Malformed documents give a *ParseError (with the line when known); broken rules give a
// *ValidationError whose Kind names the rule (cycle, duplicate_id, unknown_handler, ...). Both
// match ErrInvalid.
//
// # Ordering
//
// A step's level is 0 without needs, else one more than its deepest need. Graph.Order, Ready
// and Resume list steps by level, then by id, so every node computes the same sequence.
//
// # Templates
//
// String values of `with` are text/template templates over .input, .steps.<id>.output,
// .tenant_id and .execution_id, with missingkey=error and one extra function, json. Validate
// rejects templates that do not parse or that reference a step outside the step's transitive
// needs. A render is bounded by MaxRenderedBytes of text per template and MaxRenderOps
// operations per `with` (a count, so a render that exceeds it fails on every replay). See
// RenderWith.
//
// # Limits and cost
//
// Parsing, validation, hashing and compilation take time and memory linear in the document's
// size (plus sorting the step ids); a template reference to an indirect need costs one walk
// over the referencing step's ancestors. Limits bound what a node accepts (DefaultLimits:
// 1,000 steps, a 512 KiB document, 64 KiB per template); the HTTP API checks them before
// Load.
//
// # Usage
//
//	p, err := dag.Load(data, registry.Has) // parse, validate, hash
//	if err != nil {
//		return err // errors.Is(err, dag.ErrInvalid)
//	}
//	g, err := dag.Compile(p)
//	if err != nil {
//		return err
//	}
//	plan := g.Resume(committedStates, nil)
//	for _, id := range plan.Ready {
//		s, ok := p.Step(id)
//		if !ok {
//			continue
//		}
//		with, err := dag.RenderWith(s.With, dag.Scope{Input: input, Steps: outputs})
//		// ... handle err, run s.Uses with `with`
//	}
package dag
