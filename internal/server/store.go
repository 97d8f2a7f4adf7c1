package server

import (
	"context"
	"fmt"
	"net/url"
	"strings"

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
			return nil, fmt.Errorf("server: open bolt store %s: %w", rest, err)
		}
		return st, nil
	case SchemeRedis:
		st, err := redisstore.Open(ctx, redisstore.Options{URL: rawURL})
		if err != nil {
			return nil, fmt.Errorf("server: open redis store %s: %w", rawURL, err)
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
