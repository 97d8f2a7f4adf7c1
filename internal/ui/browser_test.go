package ui_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/dairuntime/dair/testkit"
)

// The browser tests drive Debian's chromium (apt-get install chromium) through the DevTools
// protocol. One headless browser is started for the package and each test opens its own tab.

// chromiumPath is where the browser is looked for; DAIR_CHROMIUM overrides it.
const chromiumPath = "/usr/bin/chromium"

// waitTimeout bounds every wait for a page condition.
const waitTimeout = 15 * time.Second

var shared struct {
	once   sync.Once
	ctx    context.Context // the browser; tabs are derived from it
	cancel func()
	err    error
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if shared.cancel != nil {
		shared.cancel()
	}
	os.Exit(code)
}

// wantedBrowser is the chromium executable the tests look for.
func wantedBrowser() string {
	if p := os.Getenv("DAIR_CHROMIUM"); p != "" {
		return p
	}
	return chromiumPath
}

// browserPath returns the chromium executable, or "" when it is not installed.
func browserPath() string {
	p := wantedBrowser()
	if _, err := exec.LookPath(p); err != nil {
		return ""
	}
	return p
}

// startBrowser starts the package's headless chromium once. Its user data directory is
// removed when the browser stops.
func startBrowser() (context.Context, error) {
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "dair-ui-chromium-")
		if err != nil {
			shared.err = fmt.Errorf("user data dir: %w", err)
			return
		}
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(browserPath()),
			chromedp.Flag("headless", true),
			chromedp.Flag("no-sandbox", true),
			chromedp.Flag("disable-gpu", true),
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("no-first-run", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("hide-scrollbars", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1280, 800),
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		shared.cancel = func() {
			if err := chromedp.Cancel(bctx); err != nil {
				fmt.Fprintf(os.Stderr, "ui: stop chromium: %v\n", err)
			}
			cancelBrowser()
			cancelAlloc()
			if err := os.RemoveAll(dir); err != nil {
				fmt.Fprintf(os.Stderr, "ui: remove %s: %v\n", dir, err)
			}
		}
		// The first action starts the browser, whose lifetime is that action's context: it
		// must be bctx itself, not a context with a deadline.
		if err := chromedp.Do(bctx); err != nil {
			shared.err = fmt.Errorf("start chromium: %w", err)
			return
		}
		shared.ctx = bctx
	})
	return shared.ctx, shared.err
}

// page is one browser tab on the dashboard of a test node.
type page struct {
	t    *testing.T
	ctx  context.Context // the tab, with a deadline for the test's actions
	tab  context.Context // the tab, for the failure screenshots after that deadline
	base string          // the node's URL, e.g. http://127.0.0.1:41234

	mu         sync.Mutex
	exceptions []string // uncaught script errors
	console    []string // console messages, for failure reports
	visited    []string // routes opened, screenshotted on failure
}

// openPage opens a tab on base+/ui/ and waits for the dashboard to render its first page.
// It skips the test when chromium is not installed. On failure it saves a screenshot of the
// current screen and of each visited route.
func openPage(t *testing.T, base string) *page {
	t.Helper()
	if browserPath() == "" {
		t.Skipf("chromium is not installed at %s (apt-get install chromium, or set DAIR_CHROMIUM): skipping the browser test", wantedBrowser())
	}
	bctx, err := startBrowser()
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancelTab := chromedp.NewContext(bctx)
	ctx, cancelTime := context.WithTimeout(tctx, 2*time.Minute)
	p := &page{t: t, ctx: ctx, tab: tctx, base: base}
	// Listen opens the tab (so on tctx, which the tab lives as long as) and runs fn in the
	// tab's event loop, in order; fn must return fast.
	err = chromedp.Listen(tctx, func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			p.exceptions = append(p.exceptions, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber))
		case *runtime.EventConsoleAPICalled:
			var parts []string
			for _, a := range ev.Args {
				if a.Description != "" {
					parts = append(parts, a.Description)
				} else {
					parts = append(parts, string(a.Value))
				}
			}
			p.console = append(p.console, string(ev.Type)+": "+strings.Join(parts, " "))
		}
	})
	if err != nil {
		cancelTime()
		cancelTab()
		t.Fatalf("listen to the tab: %v", err)
	}
	t.Cleanup(func() {
		cancelTime()
		if t.Failed() {
			p.saveArtifacts()
		}
		if err := chromedp.Cancel(tctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("close tab: %v", err)
		}
		cancelTab()
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/")); err != nil {
		t.Fatalf("open %s/ui/: %v", base, err)
	}
	p.waitIdle()
	return p
}

// do runs chromedp actions and fails the test on error.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\npage text:\n%s", what, err, p.text())
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) and decodes its value.
func eval[T any](p *page, expr string) (T, error) {
	return chromedp.Run(p.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// js evaluates an expression for its effect, failing the test on error.
func (p *page) js(expr string) {
	p.t.Helper()
	if _, err := eval[chromedp.Void](p, expr); err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
}

// goTo shows a route (a hash such as "#/runs") and waits for the page to load its data.
func (p *page) goTo(route string) {
	p.t.Helper()
	p.mu.Lock()
	p.visited = append(p.visited, route)
	p.mu.Unlock()
	p.js(fmt.Sprintf("location.hash = %q", route))
	p.waitIdle()
}

// waitIdle waits until the current page has rendered (main is not busy).
func (p *page) waitIdle() {
	p.t.Helper()
	p.waitFor("the page to finish loading", `document.getElementById('main').getAttribute('aria-busy') === 'false'`)
}

// waitFor polls a JavaScript condition until it is true, failing the test with the page's
// text after waitTimeout.
func (p *page) waitFor(what, cond string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	var lastErr error
	err := testkit.WaitFor(ctx, 25*time.Millisecond, func() (bool, error) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		lastErr = err
		return err == nil && ok, nil
	})
	if err != nil {
		p.t.Fatalf("waiting for %s (%s): %v (last evaluation error: %v)\npage text:\n%s", what, cond, err, lastErr, p.text())
	}
}

// count returns the number of elements matching a CSS selector.
func (p *page) count(sel string) int {
	p.t.Helper()
	n, err := eval[int](p, fmt.Sprintf("document.querySelectorAll(%q).length", sel))
	if err != nil {
		p.t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// text returns the visible text of the page's main area (for failure messages).
func (p *page) text() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	if err != nil {
		return "(unavailable: " + err.Error() + ")"
	}
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

// noExceptions fails the test if a script error escaped on the page.
func (p *page) noExceptions() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.exceptions) > 0 {
		p.t.Fatalf("uncaught script errors:\n%s", strings.Join(p.exceptions, "\n"))
	}
}

// artifactsDir is where failure screenshots go: $DAIR_TEST_ARTIFACTS/<test>, or a new
// directory under the system's temporary directory (kept, so the screenshots outlive the test).
func artifactsDir(t *testing.T) (string, error) {
	name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
	if root := os.Getenv("DAIR_TEST_ARTIFACTS"); root != "" {
		dir := filepath.Join(root, name)
		return dir, os.MkdirAll(dir, 0o755)
	}
	return os.MkdirTemp("", "dair-ui-"+name+"-")
}

// saveArtifacts saves a screenshot of the current screen and of each page of the dashboard
// and each visited route, and logs where they are.
func (p *page) saveArtifacts() {
	t := p.t
	dir, err := artifactsDir(t)
	if err != nil {
		t.Logf("no artifacts directory: %v", err)
		return
	}
	p.mu.Lock()
	routes := append([]string{""}, p.visited...)
	routes = append(routes, "#/runs", "#/tenants", "#/instances", "#/cluster")
	console := strings.Join(p.console, "\n")
	p.mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, "console.txt"), []byte(console), 0o644); err != nil {
		t.Logf("save console log: %v", err)
	}
	seen := map[string]bool{}
	for i, route := range routes {
		if seen[route] {
			continue
		}
		seen[route] = true
		ctx, cancel := context.WithTimeout(p.tab, 5*time.Second)
		if route != "" {
			// Best effort: a page that never finishes loading is screenshotted as it is.
			if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", route)),
				chromedp.Poll[chromedp.Void](`document.getElementById('main').getAttribute('aria-busy') === 'false'`,
					chromedp.WithPollingTimeout(3*time.Second))); err != nil {
				t.Logf("open %q for a screenshot: %v", route, err)
			}
		}
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			t.Logf("screenshot %q: %v", route, err)
			continue
		}
		name := "current"
		if route != "" {
			name = strings.Trim(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(route, "-"), "-")
		}
		file := filepath.Join(dir, fmt.Sprintf("%02d-%s.png", i, name))
		if err := os.WriteFile(file, buf, 0o644); err != nil {
			t.Logf("save screenshot: %v", err)
		}
	}
	t.Logf("dashboard screenshots and console log saved in %s", dir)
}

// gate is an HTTP endpoint that a pipeline's http step calls and that answers only when the
// test opens it, so a test can hold a run in a known running state.
type gate struct {
	srv  *httptest.Server
	open chan struct{}
	once sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{})}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-g.open:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write([]byte(`{"ok":true}`)); err != nil {
			t.Logf("gate: write: %v", err)
		}
	}))
	t.Cleanup(func() {
		g.release()
		g.srv.Close()
	})
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }
