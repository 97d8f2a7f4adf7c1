package client

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrBadBaseURL is returned by NormalizeBaseURL for an address that is not an http(s) URL or
// a HOST:PORT.
var ErrBadBaseURL = errors.New("client: bad server address")

// NormalizeBaseURL turns a server address into the base URL New expects: an http or https
// URL is kept (without a trailing slash), a bare HOST:PORT (or HOST) gets "http://". Anything
// else, such as "ftp://x" or "http://" without a host, is an error wrapping ErrBadBaseURL that
// says what is expected.
func NormalizeBaseURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: empty; want a URL such as http://127.0.0.1:8080", ErrBadBaseURL)
	}
	if !strings.Contains(s, "://") {
		if strings.ContainsAny(s, "/?#@ ") {
			return "", fmt.Errorf("%w: %q; want a URL such as http://127.0.0.1:8080", ErrBadBaseURL, s)
		}
		if _, _, err := net.SplitHostPort(s); err != nil && strings.Contains(s, ":") && !strings.HasPrefix(s, "[") {
			return "", fmt.Errorf("%w: %q: %v; want a URL such as http://127.0.0.1:8080", ErrBadBaseURL, s, err)
		}
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadBaseURL, s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%w: %q: scheme %q (want http or https)", ErrBadBaseURL, s, u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%w: %q has no host; want a URL such as http://127.0.0.1:8080", ErrBadBaseURL, s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: %q: a server address takes no query or fragment", ErrBadBaseURL, s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}
