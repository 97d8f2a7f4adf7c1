package http

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers"
	"github.com/dairuntime/dair/providers/remote"
)

// Name is the provider name and the transport name of the HTTP transport.
const Name = "http"

// Content types of command bodies.
const (
	ContentTypeProtobuf = "application/x-protobuf"
	ContentTypeJSON     = "application/json"
)

// CommandsPath is the envelope endpoint of a runtime host.
const CommandsPath = "/runtime-instance/commands"

// maxAnswerBytes bounds a command answer the provider reads.
const maxAnswerBytes = 16 << 20

// Config configures the HTTP provider. The zero value of each field means its default.
type Config struct {
	// Remote is the hardening (timeout, retries, circuit); its Prefix is set to "http".
	Remote remote.Config
	// TLS is the client TLS configuration for https endpoints (mutual TLS: set Certificates).
	// Default: the system roots.
	TLS *tls.Config
	// JSON sends JSON bodies instead of protobuf. Default false.
	JSON bool
	// ScaleOut, Lookup and ReadyTimeout make the provider a scale-out provider (see
	// remote.ClientConfig).
	ScaleOut     providers.ScaleOuter
	Lookup       func(ctx context.Context, id string) (*messages.CapacityDescriptor, error)
	ReadyTimeout time.Duration
}

// Provider is the "http" provider. All methods are goroutine-safe.
type Provider struct {
	*remote.Client
	tr *transport
}

var (
	_ providers.Dispatcher   = (*Provider)(nil)
	_ providers.StatusReader = (*Provider)(nil)
	_ providers.Controller   = (*Provider)(nil)
	_ providers.ScaleOuter   = (*Provider)(nil)
	_ remote.Transport       = (*transport)(nil)
)

// New returns the HTTP provider.
func New(cfg Config) *Provider {
	cfg.Remote.Prefix = Name
	tr := &transport{json: cfg.JSON, client: &http.Client{Transport: &http.Transport{
		TLSClientConfig: cfg.TLS, MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		ForceAttemptHTTP2: false,
	}}}
	c := remote.NewClient(remote.ClientConfig{Name: Name, Transport: tr, Caller: remote.NewCaller(cfg.Remote), ScaleOut: cfg.ScaleOut,
		Lookup: cfg.Lookup, ReadyTimeout: cfg.ReadyTimeout})
	return &Provider{Client: c, tr: tr}
}

// Close closes the provider's idle connections. It is idempotent.
func (p *Provider) Close() { p.tr.client.CloseIdleConnections() }

// transport sends runtime commands as HTTP requests.
type transport struct {
	client *http.Client
	json   bool
}

// Endpoint returns d's endpoint ("http://HOST:PORT" or "https://..."), validated.
func (t *transport) Endpoint(d *messages.CapacityDescriptor) (string, error) {
	ep := strings.TrimRight(d.GetEndpoint(), "/")
	if ep == "" {
		return "", remote.ErrNoEndpoint
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", remote.Fail(remote.ClassEndpointInvalid, fmt.Errorf("http: endpoint %q is not an http(s) URL", ep))
	}
	return ep, nil
}

// Send posts cmd to endpoint's envelope path and decodes the answer.
func (t *transport) Send(ctx context.Context, endpoint string, cmd *messages.RuntimeCommand) (*messages.RuntimeCommandResult, error) {
	ct := ContentTypeProtobuf
	var body []byte
	var err error
	if t.json {
		ct = ContentTypeJSON
		body, err = protojson.Marshal(cmd)
	} else {
		body, err = proto.Marshal(cmd)
	}
	if err != nil {
		return nil, remote.Fail(remote.ClassException, fmt.Errorf("http: encode command: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+CommandsPath, bytes.NewReader(body))
	if err != nil {
		return nil, remote.Fail(remote.ClassEndpointInvalid, err)
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Accept", ct)
	for _, kv := range messages.TenantMetadata(cmd.GetDispatch().GetSnapshot()) {
		req.Header.Set(kv[0], kv[1])
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, remote.Classify(err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, remote.Classify(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp.StatusCode, b)
	}
	out := &messages.RuntimeCommandResult{}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), ContentTypeJSON) {
		err = protojson.Unmarshal(b, out)
	} else {
		err = proto.Unmarshal(b, out)
	}
	if err != nil {
		return nil, remote.Fail(remote.ClassInvalidResponse, fmt.Errorf("http: decode answer: %w", err))
	}
	return out, nil
}

// statusError classifies a non-200 answer: 408, 429 and 5xx are retryable failures, other
// statuses refusals.
func statusError(code int, body []byte) error {
	err := fmt.Errorf("http: status %d: %s", code, strings.TrimSpace(string(body[:min(len(body), 200)])))
	if code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 {
		return remote.Fail(remote.ClassFailed, err)
	}
	return remote.Fail(remote.ClassNonRetryable, err)
}

// WithScaleOut returns a provider sharing p's connections and circuits whose scale-out goes
// through s (the host manager's provider); each new instance is proven ready through this
// transport (a status call) before the scale-out succeeds.
func (p *Provider) WithScaleOut(s providers.ScaleOuter, lookup func(ctx context.Context, id string) (*messages.CapacityDescriptor, error)) *Provider {
	q := *p
	q.Client = p.Client.WithScaleOut(s, lookup)
	return &q
}
