package testkit

// ThreeStepPipeline is a pipeline of built-in echo steps, keyed "three": a echoes
// .input.name, then b ("b saw <a's output>") and c ("c") run in parallel after a. A run
// with input {"name":"x"} succeeds with output {"b":"b saw x","c":"c"}.
const ThreeStepPipeline = `
key: three
steps:
  - id: a
    uses: echo
    with: {value: "{{ .input.name }}"}
  - id: b
    uses: echo
    needs: [a]
    with: {value: "b saw {{ .steps.a.output }}"}
  - id: c
    uses: echo
    needs: [a]
    with: {value: "c"}
`
