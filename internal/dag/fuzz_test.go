package dag

import (
	"errors"
	"testing"
)

func FuzzLoad(f *testing.F) {
	seeds := []string{
		validYAML,
		hashJSON,
		diamondYAML,
		"key: k\nsteps:\n  - {id: a, uses: echo, needs: [b]}\n  - {id: b, uses: echo, needs: [a]}\n",
		"key: k\nsteps:\n  - {id: a, uses: echo}\n  - {id: a, uses: echo}\n",
		"key: k\nsteps:\n  - {id: a, uses: echo, with: {v: '{{ .steps.b.output }}'}}\n  - {id: b, uses: echo}\n",
		"key: k\nsteps:\n  - {id: a, uses: echo, with: {v: '{{ range $i, $x := .input }}{{ $.steps }}{{ end }}'}}\n",
		"key: k\nsteps:\n  - {id: a, uses: echo, retry: {max_attempts: 2, backoff: 1s, max_backoff: 1ms}, timeout: x}\n",
		"key: k\nsteps: [{id: a, uses: echo, with: {x: &a [*a]}}]\n",
		"key: k\nsteps:\n  - id: a\n   uses: echo\n",
		`{"key":"k","steps":[{"id":"a","uses":"echo","with":{"n":1e400}}]}`,
		`{"key":"k","steps":[{"id":"a","uses":"echo"}],"extra":1}`,
		"{key: k}",
		"key: k\ninput_schema: {type: object, required: [n], properties: {n: {pattern: '^a+$', minLength: 1}}}\nsteps: [{id: a, uses: echo, with: {v: '{{ .input.n }}'}}]\n",
		"key: k\ninput_schema: {$defs: {x: {$ref: '#/$defs/x'}}, $ref: '#/$defs/x'}\nsteps: [{id: a, uses: echo}]\n",
		"---\n---\n",
		"",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(data, nil)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Load error does not match ErrInvalid: %T %v", err, err)
			}
			return
		}
		g, err := Compile(p)
		if err != nil {
			t.Fatalf("Load accepted a pipeline Compile rejects: %v", err)
		}
		if g.Len() != len(p.Steps) || len(g.Ready(nil)) == 0 {
			t.Fatalf("compiled graph has %d steps of %d, ready %v", g.Len(), len(p.Steps), g.Ready(nil))
		}
		if err := p.CheckInput(data); err != nil && !errors.Is(err, ErrBadInput) && !errors.Is(err, ErrInvalid) {
			t.Fatalf("CheckInput error matches neither ErrBadInput nor ErrInvalid: %T %v", err, err)
		}
		h, err := p.ComputeHash()
		if err != nil || h != p.Hash {
			t.Fatalf("hash not reproducible: %q vs %q (%v)", h, p.Hash, err)
		}
	})
}
