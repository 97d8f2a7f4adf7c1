package logging

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
)

// Sentinel errors of the logging package.
var (
	// ErrUnknownLevel is returned by New when Config.Level is not debug, info, warn or error.
	ErrUnknownLevel = errors.New("logging: unknown level")
	// ErrUnknownFormat is returned by New when Config.Format is not json or console.
	ErrUnknownFormat = errors.New("logging: unknown format")
)

// Level and format names accepted by Config.
const (
	LevelDebug    = "debug"
	LevelInfo     = "info"
	LevelWarn     = "warn"
	LevelError    = "error"
	FormatJSON    = "json"
	FormatConsole = "console"
)

// Config describes a logger. The zero value is an info-level console logger on os.Stderr.
type Config struct {
	// Level is the minimum level: debug, info, warn or error. Default info.
	Level string
	// Format is the encoding: json or console. Default console.
	Format string
	// Output receives the encoded lines. Default os.Stderr. Writes are serialized by zap.
	Output io.Writer
}

// DefaultConfig returns the configuration used when every field is zero.
func DefaultConfig() Config {
	return Config{Level: LevelInfo, Format: FormatConsole, Output: os.Stderr}
}

// Validate reports whether the level and format are known. Empty fields are valid (defaults).
func (c Config) Validate() error {
	if _, err := parseLevel(c.Level); err != nil {
		return err
	}
	if _, err := encoder(c.Format); err != nil {
		return err
	}
	return nil
}

// New builds a zap logger from cfg.
//
// It returns an error wrapping ErrUnknownLevel or ErrUnknownFormat for bad input. The returned
// logger is goroutine-safe; the caller owns it and should call Sync before exiting.
func New(cfg Config) (*zap.Logger, error) {
	level, err := parseLevel(cfg.Level)
	if err != nil {
		return nil, err
	}
	enc, err := encoder(cfg.Format)
	if err != nil {
		return nil, err
	}
	out := cfg.Output
	if out == nil {
		out = os.Stderr
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(out)), level)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel)), nil
}

// Slog returns a *slog.Logger whose records are written through l's core.
// The result is goroutine-safe and shares l's level and sink.
func Slog(l *zap.Logger) *slog.Logger {
	return slog.New(zapslog.NewHandler(l.Core()))
}

// ActorLoggerFactory returns a logger factory for actor.WithLoggerFactory that routes
// protoactor's slog records into l, each with the field system=<actor system id>.
func ActorLoggerFactory(l *zap.Logger) func(*actor.ActorSystem) *slog.Logger {
	return func(system *actor.ActorSystem) *slog.Logger {
		named := l.Named("protoactor")
		if system != nil {
			named = named.With(zap.String("system", system.ID))
		}
		return slog.New(zapslog.NewHandler(named.Core(), zapslog.WithName("protoactor")))
	}
}

// Discard returns a logger factory for actor.WithLoggerFactory that drops every record.
// Use it to silence protoactor in tests.
func Discard() func(*actor.ActorSystem) *slog.Logger {
	return func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}
}

func parseLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", LevelInfo:
		return zapcore.InfoLevel, nil
	case LevelDebug:
		return zapcore.DebugLevel, nil
	case LevelWarn, "warning":
		return zapcore.WarnLevel, nil
	case LevelError:
		return zapcore.ErrorLevel, nil
	default:
		return 0, fmt.Errorf("%w %q", ErrUnknownLevel, s)
	}
}

func encoder(format string) (zapcore.Encoder, error) {
	ec := zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		NameKey:        "logger",
		CallerKey:      "caller",
		MessageKey:     "msg",
		StacktraceKey:  "stacktrace",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeLevel:    zapcore.LowercaseLevelEncoder,
		EncodeTime:     utcRFC3339Nano,
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
	}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "", FormatConsole:
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		return zapcore.NewConsoleEncoder(ec), nil
	case FormatJSON:
		return zapcore.NewJSONEncoder(ec), nil
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownFormat, format)
	}
}

func utcRFC3339Nano(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
	enc.AppendString(t.UTC().Format(time.RFC3339Nano))
}
