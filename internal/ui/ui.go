package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is the path under which the dashboard is served.
const Prefix = "/ui/"

// contentSecurityPolicy allows the page to load its own scripts, styles and data only.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// asset is one embedded file with its precomputed validator.
type asset struct {
	body  []byte
	etag  string
	ctype string
}

// handler serves the embedded assets. It is immutable after newHandler.
type handler struct {
	files map[string]asset // keyed by the path under assets/, e.g. "index.html"
}

// Handler returns the dashboard's HTTP handler. It serves /ui/ (index.html) and the assets
// under /ui/, redirects browsers asking for / or /ui to /ui/, and answers anything else with
// a JSON 404 body of the API's shape. It is goroutine-safe and never blocks beyond writing the
// answer. The handler does no authentication: the assets are public, and the data the page
// shows comes from API calls that carry the user's token.
func Handler() http.Handler {
	h, err := embedded()
	if err != nil {
		// The assets are compiled in; failing to read them is a build defect.
		panic(err)
	}
	return h
}

// embedded reads the compiled-in assets once per process.
var embedded = sync.OnceValues(func() (*handler, error) { return newHandler(assets) })

func newHandler(fsys fs.FS) (*handler, error) {
	root, err := fs.Sub(fsys, "assets")
	if err != nil {
		return nil, fmt.Errorf("ui: open assets: %w", err)
	}
	h := &handler{files: map[string]asset{}}
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = http.DetectContentType(b)
		}
		h.files[p] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ctype}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ui: read assets: %w", err)
	}
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		notFound(w, r)
		return
	}
	if p == "/" || p == strings.TrimSuffix(Prefix, "/") {
		if acceptsHTML(r) {
			http.Redirect(w, r, Prefix, http.StatusFound)
			return
		}
		notFound(w, r)
		return
	}
	name, ok := strings.CutPrefix(p, Prefix)
	if !ok {
		notFound(w, r)
		return
	}
	if name == "" {
		name = "index.html"
	}
	a, ok := h.files[name]
	if !ok {
		notFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	// Revalidate every time: a new binary may serve new assets under the same names.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if name == "index.html" {
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Frame-Options", "DENY")
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}

// acceptsHTML reports whether the request comes from a browser navigating to a page.
func acceptsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// notFound writes the API's JSON error body ({"error": {"code", "message"}}) with status 404,
// worded as the API's own ("api: no route for GET /x"), without this package's name.
func notFound(w http.ResponseWriter, r *http.Request) {
	type detail struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, err := json.Marshal(struct {
		Error detail `json:"error"`
	}{detail{Code: "not_found", Message: fmt.Sprintf("api: no route for %s %s", r.Method, r.URL.Path)}})
	if err != nil {
		http.Error(w, "api: not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	if _, err := w.Write(append(b, '\n')); err != nil {
		return // the client went away: no one is left to tell
	}
}
