package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/client"
	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/server"
)

// Exit codes (CONTRACT.md).
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code. Errors are printed as one
// line on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	var quiet *quietError
	if !errors.As(err, &quiet) {
		msg := oneLine(withoutPackagePrefix(err.Error()))
		path := ""
		if cmd != nil {
			path = cmd.CommandPath()
		}
		if h := hintFor(err, path, a.server); h != "" {
			msg += "; " + h
		}
		fmt.Fprintf(stderr, "dair: %s\n", msg)
	}
	return code
}

// usageError marks bad usage or bad input (exit 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, a ...any) error { return &usageError{err: fmt.Errorf(format, a...)} }

// runError wraps every error a command's RunE returns, so that errors cobra produces before
// RunE (unknown command or flag, wrong arguments) are recognised as bad usage.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// quietError fails the command (exit 1) without an error line: the command already explained
// the failure on stdout (a failed run's summary, a diverged replay).
type quietError struct{ msg string }

func (e *quietError) Error() string { return e.msg }

// exitCode maps an error of Execute to an exit code.
func exitCode(err error) int {
	var re *runError
	if !errors.As(err, &re) {
		return exitUsage // cobra's own errors: unknown command or flag, bad arguments
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		if ce.Status == http.StatusBadRequest || ce.Status == http.StatusRequestEntityTooLarge {
			return exitUsage
		}
		return exitFailed
	}
	switch {
	case errors.Is(err, server.ErrInvalidOptions), errors.Is(err, server.ErrBadPipeline),
		errors.Is(err, auth.ErrBadKey), errors.Is(err, auth.ErrMissingClaim), errors.Is(err, auth.ErrUnknownRole):
		return exitUsage
	}
	return exitFailed
}

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '\n' || r == '\r' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}

// wrapRunE makes every command of the tree wrap its RunE errors in runError.
func wrapRunE(c *cobra.Command) {
	if c.RunE != nil {
		inner := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := inner(cmd, args); err != nil {
				return &runError{err: err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapRunE(sub)
	}
}
