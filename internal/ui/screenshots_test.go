package ui_test

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// screenshots names a directory to write the dashboard's screenshots into (docs/images):
//
//	go test ./internal/ui -run TestDashboard_screenshots -screenshots "$PWD/docs/images"
//
// Without it the test is skipped, so make test does not rewrite the images.
var screenshots = flag.String("screenshots", "", "write the dashboard's screenshots (PNG, 1280x800) into this directory")

const showcasePipeline = `key: research
description: plan, four parallel lookups (one retried), then a synthesis
steps:
  - id: plan
    uses: echo
    with: {value: "plan for {{ .input.topic }}"}
  - id: background
    uses: sleep
    needs: [plan]
    with: {duration: 120ms}
  - id: market
    uses: sleep
    needs: [plan]
    with: {duration: 200ms}
  - id: risks
    uses: fail
    needs: [plan]
    retry: {max_attempts: 3, backoff: 60ms}
    with: {times: 1, message: "upstream timeout"}
  - id: outlook
    uses: sleep
    needs: [plan]
    with: {duration: 90ms}
  - id: synthesize
    uses: sleep
    needs: [background, market, risks, outlook]
    with: {duration: 150ms}
  - id: publish
    uses: echo
    needs: [synthesize]
    with: {value: "published"}
`

const brokenPipeline = `key: broken
steps:
  - id: fetch
    uses: echo
    with: {value: ok}
  - id: parse
    uses: fail
    needs: [fetch]
    retry: {max_attempts: 2, backoff: 20ms}
    with: {times: 5, message: "schema mismatch"}
  - id: store
    uses: echo
    needs: [parse]
    with: {value: stored}
`

// TestDashboard_screenshots renders the pages with some data and saves them as PNG files.
func TestDashboard_screenshots(t *testing.T) {
	if *screenshots == "" {
		t.Skip("set -screenshots DIR to write the dashboard's screenshots")
	}
	dir, err := filepath.Abs(*screenshots)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := newNode(t, false)
	g := newGate(t)
	for _, src := range []string{showcasePipeline, brokenPipeline, helloPipeline, fanPipeline(g.srv.URL)} {
		var out struct{ Key string }
		f.call("PUT", "/v1/pipelines/"+pipelineKey(src), "", src, http.StatusOK, &out)
	}
	f.call("PUT", "/v1/tenants/acme", "", `{"isolation_mode":"dedicated","max_runtime_instances":2,"worker_count_per_instance":4,"max_concurrent_runs_per_instance":2}`, http.StatusOK, nil)
	f.call("PUT", "/v1/tenants/globex", "", `{"isolation_mode":"shared"}`, http.StatusOK, nil)
	var showcase string
	for i, sub := range []struct{ tenant, pipeline string }{
		{"globex", "hello"}, {"acme", "research"}, {"globex", "broken"}, {"acme", "hello"}, {"globex", "research"}, {"acme", "research"},
	} {
		id := f.submit("", fmt.Sprintf(`{"pipeline":%q,"tenant_id":%q,"input":{"name":"n%d","topic":"t%d"}}`, sub.pipeline, sub.tenant, i, i))
		f.waitFinal("", id)
		if sub.pipeline == "research" {
			showcase = id
		}
	}
	held := f.submit("", `{"pipeline":"fan","tenant_id":"globex"}`)

	p := openPage(t, f.url)
	p.do("size the viewport", chromedp.EmulateViewport(1280, 800))
	shot := func(route, ready, name string) {
		t.Helper()
		p.goTo(route)
		p.waitFor(name, ready)
		buf, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		file := filepath.Join(dir, "dashboard-"+name+".png")
		if err := os.WriteFile(file, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", file, len(buf))
	}
	shot("#/runs", fmt.Sprintf(`document.querySelector('tr[data-run-id=%q][data-status="running"]')`, held), "runs")
	shot("#/runs/"+showcase, `document.querySelectorAll('.dag .node[data-status="succeeded"]').length === 7`, "run-dag")
	shot("#/runs/"+showcase+"/trace", `document.querySelectorAll('.timeline .row-step').length === 8`, "trace")
	shot("#/tenants", `[...document.querySelectorAll('.tenant-card .usage')].every((u) => u.querySelector('.stat'))`, "tenants")
	shot("#/instances", `document.querySelectorAll('#instances-table tr[data-instance]').length >= 2`, "instances")
	g.release()
	f.waitFinal("", held)
}

// pipelineKey returns the key of a pipeline document of the form "key: K\n...".
func pipelineKey(src string) string {
	var key string
	if _, err := fmt.Sscanf(src, "key: %s", &key); err != nil {
		return ""
	}
	return key
}
