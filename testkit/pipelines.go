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

// DiamondPipeline is a pipeline of built-in echo steps, keyed "diamond": root, then a and b in
// parallel, then join. Its steps sort by id as a, b, join, root and by graph level as root,
// a, b, join, which tells a graph-ordered listing from an alphabetical one.
const DiamondPipeline = `
key: diamond
steps:
  - id: root
    uses: echo
    with: {value: r}
  - id: b
    uses: echo
    needs: [root]
    with: {value: b}
  - id: a
    uses: echo
    needs: [root]
    with: {value: a}
  - id: join
    uses: echo
    needs: [a, b]
    with: {value: j}
`
