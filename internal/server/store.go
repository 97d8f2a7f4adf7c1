package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/store"
	"github.com/dairuntime/dair/internal/store/boltstore"
	"github.com/dairuntime/dair/internal/store/redisstore"
)

// Store URL schemes accepted by OpenStore.
const (
	SchemeBolt  = "bolt"
	SchemeRedis = "redis"
)

// OpenStore opens the store named by rawURL: bolt://PATH opens (creating it if needed) the
// embedded bbolt file at PATH, relative or absolute; redis://HOST:PORT/DB connects to Redis
// and checks it answers.
//
// It blocks until the store is open or ctx ends. A URL with another scheme or without a path
// or host returns an error wrapping ErrInvalidOptions. The caller owns the store and closes it.
func OpenStore(ctx context.Context, rawURL string) (store.Store, error) {
	scheme, rest, err := splitStoreURL(rawURL)
	if err != nil {
		return nil, err
	}
	switch scheme {
	case SchemeBolt:
		st, err := boltstore.Open(boltstore.Options{Path: rest})
		if err != nil {
			return nil, &StoreOpenError{Store: rest, Cause: boltCause(err), err: err}
		}
		return st, nil
	case SchemeRedis:
		st, err := redisstore.Open(ctx, redisstore.Options{URL: rawURL})
		if err != nil {
			return nil, &StoreOpenError{Store: redactedURL(rawURL), Cause: redisCause(err), err: err}
		}
		return st, nil
	}
	return nil, fmt.Errorf("%w: store url %q: unknown scheme %q (want bolt://PATH or redis://HOST:PORT/DB)",
		ErrInvalidOptions, rawURL, scheme)
}

// splitStoreURL returns the scheme and, for bolt, the file path. It validates the shape only.
func splitStoreURL(rawURL string) (scheme, path string, err error) {
	s, rest, ok := strings.Cut(rawURL, "://")
	if !ok || s == "" {
		return "", "", fmt.Errorf("%w: store url %q: want bolt://PATH or redis://HOST:PORT/DB", ErrInvalidOptions, rawURL)
	}
	switch s {
	case SchemeBolt:
		if rest == "" {
			return "", "", fmt.Errorf("%w: store url %q: missing file path", ErrInvalidOptions, rawURL)
		}
		return s, rest, nil
	case SchemeRedis:
		u, perr := url.Parse(rawURL)
		if perr != nil {
			return "", "", fmt.Errorf("%w: store url %q: %v", ErrInvalidOptions, rawURL, perr)
		}
		if u.Host == "" {
			return "", "", fmt.Errorf("%w: store url %q: missing host:port", ErrInvalidOptions, rawURL)
		}
		return s, "", nil
	}
	return s, rest, nil
}

// StoreOpenError is OpenStore's error when the store could not be opened. Its message names
// the store as the user gave it (a redis URL without its password) and the cause in the
// user's terms, without the store packages' names; Unwrap returns the store's own error.
type StoreOpenError struct {
	Store string // the file path or the redacted redis URL
	Cause string // what went wrong, and what to check
	err   error
}

func (e *StoreOpenError) Error() string { return "cannot open the store " + e.Store + ": " + e.Cause }

// Unwrap returns the store package's error (boltstore.ErrLocked, a *net.OpError, ...).
func (e *StoreOpenError) Unwrap() error { return e.err }

// boltCause describes why the embedded store could not be opened.
func boltCause(err error) string {
	if errors.Is(err, boltstore.ErrLocked) {
		return "another process holds the file (is another dair dev or dair node using the same --data directory or bolt:// file?)"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Error()
	}
	return withoutPackageNames(err.Error())
}

// redisCause describes why Redis could not be opened.
func redisCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error() + " (is Redis running and reachable at that address?)"
	}
	return withoutPackageNames(err.Error())
}

// withoutPackageNames removes the store packages' "name: " prefixes from msg.
func withoutPackageNames(msg string) string {
	for _, p := range []string{"boltstore: ", "redisstore: ", "store: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// redactedURL returns rawURL with any password replaced by "xxxxx".
func redactedURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "redis://"
	}
	return u.Redacted()
}

// redisLogger sends the Redis client's own log lines (a failed pool dial, ...) to the node's
// log at debug level instead of printing them raw on stderr: the store's errors reach the
// caller and the log through the store.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug("redis client", zap.String("message", fmt.Sprintf(format, v...)))
}
