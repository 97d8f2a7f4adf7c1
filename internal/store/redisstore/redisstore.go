package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/internal/store"
)

// Sentinel errors of the package (the store sentinels are in package store).
var (
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("redisstore: closed")
	// ErrBadOptions is returned by Open when neither Addr nor URL is usable.
	ErrBadOptions = errors.New("redisstore: bad options")
	// ErrConflict is returned by Update* methods when the optimistic retry budget is exhausted.
	ErrConflict = errors.New("redisstore: too many concurrent updates")
)

const (
	// defaultTimeout is Options.Timeout's default.
	defaultTimeout = time.Second
	// maxCASAttempts bounds optimistic update retries; each failed attempt means another writer
	// succeeded, so the bound is only reached under pathological contention.
	maxCASAttempts = 10000
)

var _ store.Store = (*Store)(nil)

// Options configures Open. The zero value (with Addr or URL set) is usable.
type Options struct {
	// Addr is "host:port" of the Redis server. Either Addr or URL is required.
	Addr string
	// URL is "redis://host:port/db", an alternative to Addr; it wins when both are set.
	URL string
	// Prefix namespaces every key. Default "dair".
	Prefix string
	// Now is the clock for timestamps and expiry decisions. Default time.Now.
	Now func() time.Time
	// PoolSize is the connection pool size. Default 10 per GOMAXPROCS (go-redis default).
	PoolSize int
	// Timeout bounds dialing and each socket read or write, so calls fail promptly when Redis
	// is down or hung. Default 1s.
	Timeout time.Duration
	// Flights bounds the pipelines of concurrent store calls in flight at once; calls beyond
	// it share the next pipeline (batch.go). Default 8.
	Flights int
}

// Store is the Redis implementation of store.Store. It is safe for concurrent use.
type Store struct {
	rdb    *redis.Client
	batch  *batcher // sends the store's concurrent calls in shared pipelines
	prefix string
	now    func() time.Time

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// Open connects to Redis, pings it and loads the Lua scripts. It blocks for at most about the
// dial timeout (1s) when Redis is unreachable, and the returned error wraps the cause.
func Open(ctx context.Context, opts Options) (*Store, error) {
	var ro *redis.Options
	switch {
	case opts.URL != "":
		parsed, err := redis.ParseURL(opts.URL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: parse url: %w: %w", ErrBadOptions, err)
		}
		ro = parsed
	case opts.Addr != "":
		ro = &redis.Options{Addr: opts.Addr}
	default:
		return nil, fmt.Errorf("redisstore: open: %w: Addr or URL is required", ErrBadOptions)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	ro.DialTimeout = timeout
	ro.ReadTimeout = timeout
	ro.WriteTimeout = timeout
	ro.DialerRetries = 1
	// Scripts are not idempotent (ledger appends): a retry after a lost reply could apply a
	// write twice, so the client never retries; callers see the error and decide.
	ro.MaxRetries = -1
	if opts.PoolSize > 0 {
		ro.PoolSize = opts.PoolSize
	}
	s := &Store{
		rdb:    redis.NewClient(ro),
		prefix: opts.Prefix,
		now:    opts.Now,
		closed: make(chan struct{}),
	}
	s.batch = newBatcher(s.rdb, opts.Flights)
	if s.prefix == "" {
		s.prefix = "dair"
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return nil, s.closeAfter(fmt.Errorf("redisstore: ping %s: %w", ro.Addr, err))
	}
	for _, sc := range append(allScripts[:len(allScripts):len(allScripts)], fairScripts...) {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return nil, s.closeAfter(fmt.Errorf("redisstore: load script: %w", err))
		}
	}
	if err := s.buildLiveIndex(ctx); err != nil {
		return nil, s.closeAfter(fmt.Errorf("redisstore: index live runs: %w", err))
	}
	return s, nil
}

// closeAfter closes the client after a failed Open and returns err (joined with a close error).
func (s *Store) closeAfter(err error) error {
	if cerr := s.rdb.Close(); cerr != nil {
		return errors.Join(err, fmt.Errorf("redisstore: close client: %w", cerr))
	}
	return err
}

// Client returns the underlying go-redis client (for benchmarks and diagnostics). The caller
// must not close it.
func (s *Store) Client() *redis.Client { return s.rdb }

// Close closes the client. It is idempotent; later calls return the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		if err := s.rdb.Close(); err != nil {
			s.closeErr = fmt.Errorf("redisstore: close: %w", err)
		}
	})
	return s.closeErr
}

// check returns ErrClosed after Close.
func (s *Store) check() error {
	select {
	case <-s.closed:
		return ErrClosed
	default:
		return nil
	}
}

// k builds a namespaced key from parts.
func (s *Store) k(parts ...string) string {
	// One allocation for the common lengths (strings.Join and the concatenation made two, 5% of
	// the CPU of a run).
	switch len(parts) {
	case 1:
		return s.prefix + ":" + parts[0]
	case 2:
		return s.prefix + ":" + parts[0] + ":" + parts[1]
	case 3:
		return s.prefix + ":" + parts[0] + ":" + parts[1] + ":" + parts[2]
	}
	return s.prefix + ":" + strings.Join(parts, ":")
}

// micros converts a time to the Unix microseconds used for deadlines (exact in a Lua double).
func micros(t time.Time) int64 { return t.UnixMicro() }

// deadline returns the deadline d from now in Unix microseconds.
func (s *Store) deadline(d time.Duration) int64 { return micros(s.now().Add(d)) }

// nowMicros returns the clock's now in Unix microseconds.
func (s *Store) nowMicros() int64 { return micros(s.now()) }

// marshal encodes m, wrapping errors with what.
func marshal(what string, m proto.Message) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("redisstore: marshal %s: %w", what, err)
	}
	return b, nil
}

// unmarshal decodes b into m, wrapping errors with what.
func unmarshal(what string, b []byte, m proto.Message) error {
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("redisstore: unmarshal %s: %w", what, err)
	}
	return nil
}

// asString converts a script or HMGET reply element to a string; nil becomes "" and false.
func asString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	default:
		return "", false
	}
}

// runScript runs sc (EVALSHA, falling back to EVAL on NOSCRIPT) and wraps errors with op.
func (s *Store) runScript(ctx context.Context, op string, sc *redis.Script, keys []string, args ...any) (any, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "evalsha", sc.Hash(), len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	err := s.batch.do(ctx, cmd)
	v := cmd.Val()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis restarted and lost its scripts: Run sends the source, which loads it again.
		v, err = sc.Run(ctx, s.rdb, keys, args...).Result()
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return v, nil
}

// casResult is the answer of the compare-and-set scripts.
const (
	casMissing  = -1
	casConflict = 0
	casOK       = 1
	casStale    = 2
)

// loadVersioned reads the pb and ver fields of a versioned record hash. It returns
// store.ErrNotFound when the record does not exist.
func (s *Store) loadVersioned(ctx context.Context, key string) (pb []byte, ver string, err error) {
	cmd := redis.NewSliceCmd(ctx, "hmget", key, "pb", "ver")
	if err := s.batch.do(ctx, cmd); err != nil {
		return nil, "", err
	}
	vals := cmd.Val()
	p, ok := asString(vals[0])
	if !ok {
		return nil, "", store.ErrNotFound
	}
	v, ok := asString(vals[1])
	if !ok {
		return nil, "", store.ErrNotFound
	}
	return []byte(p), v, nil
}

// updateVersioned is the optimistic read-modify-write loop over a versioned record hash: read
// pb and ver, let apply produce the new pb, and write it back only if ver is unchanged. apply
// returning an error aborts the loop with that error.
func (s *Store) updateVersioned(ctx context.Context, op, key string, apply func(pb []byte) ([]byte, error)) error {
	_, err := s.updateVersionedAppend(ctx, op, key, "", func(pb []byte) (casWrite, error) {
		next, err := apply(pb)
		return casWrite{next: next}, err
	})
	return err
}

// casWrite is what the apply function of updateVersionedAppend produces: the record's new pb,
// and optionally an item for the list and a usage event (pb and tenant) stored with it.
type casWrite struct {
	next, item []byte
	usage      []byte
	tenant     string
	live       []any // liveLib's arguments (runs only)
}

// updateVersionedAppend is updateVersioned whose apply may also return an item to push onto
// the list listKey in the same script (an empty item pushes nothing), and with the item a
// usage event for its tenant's usage list. It returns the list's new length, which is the
// item's ledger sequence number, or 0 when nothing was pushed.
func (s *Store) updateVersionedAppend(ctx context.Context, op, key, listKey string, apply func(pb []byte) (casWrite, error)) (int64, error) {
	if err := s.check(); err != nil {
		return 0, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	for range maxCASAttempts {
		pb, ver, err := s.loadVersioned(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("redisstore: %s: %w", op, err)
		}
		w, err := apply(pb)
		if err != nil {
			return 0, err
		}
		var code, seq int64
		if len(w.item) == 0 {
			res, err := s.runScript(ctx, op, scriptCAS, []string{key}, append([]any{ver, w.next}, w.live...)...)
			if err != nil {
				return 0, err
			}
			code, _ = res.(int64)
		} else {
			keys, args := []string{key, listKey}, []any{ver, w.next, w.item}
			if len(w.usage) > 0 {
				keys = append(keys, s.usageKey(w.tenant), s.usageTenants())
				args = append(args, w.usage, w.tenant)
			} else if len(w.live) > 0 {
				args = append(args, "", "") // liveLib's arguments start at ARGV[6]
			}
			args = append(args, w.live...)
			res, err := s.runScript(ctx, op, scriptCASAppend, keys, args...)
			if err != nil {
				return 0, err
			}
			if out, ok := res.([]any); ok && len(out) == 2 {
				code, _ = out[0].(int64)
				seq, _ = out[1].(int64)
			}
		}
		switch code {
		case casOK:
			return seq, nil
		case casMissing:
			return 0, fmt.Errorf("redisstore: %s: %w", op, store.ErrNotFound)
		}
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("redisstore: %s: %w", op, err)
		}
	}
	return 0, fmt.Errorf("redisstore: %s: %w", op, ErrConflict)
}
