package ui_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboard_pages loads every page of the dashboard of a node without auth, submits a run
// through the API, watches its DAG turn green from the run's event stream, and opens its trace,
// ledger and replay.
func TestDashboard_pages(t *testing.T) {
	f := newNode(t, false)
	g := newGate(t)
	f.call("PUT", "/v1/pipelines/fan", "", fanPipeline(g.srv.URL), http.StatusOK, nil)
	f.call("PUT", "/v1/tenants/acme", "", `{"isolation_mode":"shared"}`, http.StatusOK, nil)
	p := openPage(t, f.url)

	// The runs page is the default; the new run appears without a reload.
	p.waitFor("the runs table", `document.querySelector('#runs-table table')`)
	id := f.submit("", `{"pipeline":"fan","tenant_id":"acme","input":{"n":1}}`)
	p.waitFor("the new run in the list", fmt.Sprintf(`document.querySelector('tr[data-run-id=%q]')`, id))

	// The run page draws the DAG; the gate holds "fetch" running until the page shows it.
	p.goTo("#/runs/" + id)
	p.waitFor("four nodes and four edges", `document.querySelectorAll('.dag .node').length === 4 && document.querySelectorAll('.dag .edge').length === 4`)
	p.js(`window.__samePage = true`)
	p.waitFor("fetch to show as running", `document.querySelector('.dag .node[data-step="fetch"]').dataset.status === 'running'`)
	if n := p.count(`.dag .node[data-status="succeeded"]`); n != 0 {
		t.Fatalf("%d steps succeeded while fetch is held", n)
	}
	g.release()
	p.waitFor("every step to turn green", `[...document.querySelectorAll('.dag .node')].every((n) => n.dataset.status === 'succeeded')`)
	p.waitFor("the run status to be succeeded", `document.querySelector('#run-status .badge').textContent === 'succeeded'`)
	p.waitFor("the step table to show flaky's two attempts", `document.querySelector('#steps-table tr[data-step="flaky"] td:nth-child(3)').textContent === '2'`)
	if same, err := eval[bool](p, `window.__samePage === true`); err != nil || !same {
		t.Fatalf("the page reloaded instead of updating live (%v)", err)
	}

	// Trace: a row per attempt, flaky's first attempt failed.
	p.do("open the trace tab", chromedp.Click(chromedp.CSS(`.tabs a[data-tab="trace"]`)))
	p.waitIdle()
	p.waitFor("the timeline", `document.querySelectorAll('.timeline .row-step').length === 5`)
	p.waitFor("flaky's retry", `document.querySelector('.timeline .row-step[data-step="flaky"][data-attempt="2"] .bar[data-status="succeeded"]') &&
		document.querySelector('.timeline .row-step[data-step="flaky"][data-attempt="1"] .bar[data-status="failed"]')`)
	p.waitFor("the run row and control-plane events", `document.querySelector('.timeline .row-run .bar[data-status="succeeded"]') &&
		document.querySelector('.timeline .row-event[data-event="dispatch"]')`)

	// Ledger and replay.
	p.goTo("#/runs/" + id + "/ledger")
	p.waitFor("the ledger rows", `document.querySelector('#ledger tr[data-kind="step_failed"]') && document.querySelector('#ledger tr[data-kind="run_succeeded"]')`)
	p.goTo("#/runs/" + id + "/replay")
	p.do("replay", chromedp.Click(chromedp.ID("replay-button")))
	p.waitFor("the replay verdict", `document.querySelector('.verdict[data-diverged="false"]')`)
	// A diverged replay lists its steps: the node's answer is stood in for in the page.
	p.js(`const real = window.fetch; window.fetch = (u, init) => String(u).endsWith('/replay')
		? Promise.resolve(new Response(JSON.stringify({execution_id: 'x', diverged: true, replayed: 4,
			divergences: [{step_id: 'flaky', reason: 'output differs from the record'}]}), {headers: {'Content-Type': 'application/json'}}))
		: real(u, init)`)
	p.do("replay again", chromedp.Click(chromedp.ID("replay-button")))
	p.waitFor("the divergence report", `document.querySelector('.verdict[data-diverged="true"]') &&
		document.querySelector('#replay-result table').innerText.includes('output differs from the record')`)

	// A malformed percent-escape in the address is an error on the page, not a blank page.
	p.goTo("#/runs/%ZZ")
	p.waitFor("the bad address error", `(() => { const e = document.querySelector('#main .error[data-status="400"]');
		return e && e.innerText.includes('bad address'); })()`)

	// Filters.
	p.goTo("#/runs?tenant=acme&pipeline=fan")
	p.waitFor("the run under its filters", fmt.Sprintf(`document.querySelector('tr[data-run-id=%q][data-status="succeeded"]')`, id))
	p.goTo("#/runs?status=failed")
	p.waitFor("no failed runs", `document.querySelector('#runs-table tr.empty')`)

	// Tenants, instances, cluster.
	p.goTo("#/tenants")
	p.waitFor("acme's card with its usage", `(() => { const c = document.querySelector('.tenant-card[data-tenant="acme"]');
		return c && c.querySelector('.stat-value') && c.querySelector('.stat-value').textContent === '1'; })()`)
	p.goTo("#/instances")
	p.waitFor("an instance row", `document.querySelector('#instances-table tr[data-instance] .meter')`)
	p.goTo("#/cluster")
	p.waitFor("the single-node notice", `document.querySelector('.single-node')`)
	// A cluster member lists the members: the answer of a clustered node is stood in for.
	p.js(`const before = window.fetch; window.fetch = (u, init) => String(u).endsWith('/v1/cluster/members')
		? Promise.resolve(new Response(JSON.stringify({self: 'm1', members: [
			{id: 'm1', node_id: 'node-a', address: '127.0.0.1:7001', roles: ['control-plane', 'runtime']},
			{id: 'm2', node_id: 'node-b', address: '127.0.0.1:7002', roles: ['runtime']}]}), {headers: {'Content-Type': 'application/json'}}))
		: before(u, init)`)
	p.goTo("#/runs")
	p.goTo("#/cluster")
	p.waitFor("the members", `document.querySelectorAll('#cluster-body tr[data-member]').length === 2 &&
		document.querySelector('tr[data-member="m1"]').innerText.includes('this node')`)
	p.noExceptions()
}

// TestDashboard_tenantToken checks that the page shows what the token may see: nothing
// without a token, its own tenant's runs with a tenant token, everything with an operator's.
func TestDashboard_tenantToken(t *testing.T) {
	f := newNode(t, true)
	admin := f.token("ops", "admin")
	acme := f.token("acme", "tenant")
	globex := f.token("globex", "tenant")
	f.call("PUT", "/v1/pipelines/hello", admin, helloPipeline, http.StatusOK, nil)
	acmeRun := f.submit(acme, `{"pipeline":"hello","input":{"name":"a"}}`)
	globexRun := f.submit(globex, `{"pipeline":"hello","input":{"name":"g"}}`)
	f.waitFinal(acme, acmeRun)
	f.waitFinal(globex, globexRun)

	p := openPage(t, f.url)
	p.waitFor("the 401 explanation", `document.querySelector('.error[data-status="401"]') && document.body.innerText.includes('Not signed in')`)

	p.do("enter acme's token", chromedp.SetValue(chromedp.ID("token"), acme), chromedp.Click(chromedp.ID("token-save")))
	p.waitIdle()
	p.waitFor("acme's run", fmt.Sprintf(`document.querySelector('tr[data-run-id=%q]')`, acmeRun))
	if n := p.count(fmt.Sprintf(`tr[data-run-id=%q]`, globexRun)); n != 0 {
		t.Fatal("a tenant token sees another tenant's run")
	}
	if n := p.count(`#runs-table tr[data-run-id]:not([data-tenant="acme"])`); n != 0 {
		t.Fatalf("%d rows of other tenants", n)
	}
	if who, err := eval[string](p, `document.getElementById('who').textContent`); err != nil || who != "acme · tenant" {
		t.Fatalf("identity = %q (%v)", who, err)
	}
	p.goTo("#/runs/" + acmeRun)
	p.waitFor("acme's DAG in green", `document.querySelectorAll('.dag .node[data-status="succeeded"]').length === 2`)
	p.goTo("#/runs/" + globexRun)
	// Another tenant's run is forbidden (CONTRACT.md), and the page says so.
	p.waitFor("a 403 on globex's run", `document.querySelector('.error[data-status="403"]') && document.body.innerText.includes('Not allowed')`)
	p.goTo("#/instances")
	p.waitFor("a 403 on instances", `document.querySelector('.error[data-status="403"]')`)
	p.goTo("#/tenants")
	p.waitFor("acme's own tenant only", `document.querySelectorAll('.tenant-card').length === 1 && document.querySelector('.tenant-card[data-tenant="acme"]')`)

	// An operator sees both tenants' runs.
	p.do("enter the operator's token", chromedp.SetValue(chromedp.ID("token"), f.token("ops", "operator")), chromedp.Click(chromedp.ID("token-save")))
	p.goTo("#/runs")
	p.waitFor("both runs", fmt.Sprintf(`document.querySelector('tr[data-run-id=%q]') && document.querySelector('tr[data-run-id=%q]')`, acmeRun, globexRun))

	// Forgetting the token forgets it for the tab.
	p.do("forget the token", chromedp.Click(chromedp.ID("token-clear")))
	p.waitFor("the 401 again", `document.querySelector('.error[data-status="401"]') && sessionStorage.getItem('dair.token') === null`)
	p.noExceptions()
}
