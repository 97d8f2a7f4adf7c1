package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/internal/auth"
	"github.com/dairuntime/dair/internal/logging"
	"github.com/dairuntime/dair/internal/mcpserver"
)

// mcpOptions are the flags of `dair mcp`.
type mcpOptions struct {
	httpAddr         string
	auth             string
	jwtSecretFile    string
	jwtPublicKeyFile string
	logLevel         string
	logFormat        string
}

func newMCPCmd(a *app) *cobra.Command {
	o := mcpOptions{auth: mcpserver.AuthNone, logLevel: logging.LevelWarn, logFormat: logging.FormatConsole}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "serve dair's control-plane tools over MCP (stdio, or streamable HTTP with --http)",
		Long: "mcp serves the runtime control-plane tools (submit_run, get_run, ..., replay_execution) to MCP clients.\n" +
			"Every tool calls the node at --server, so authorization is the HTTP API's.\n\n" +
			"Over stdio (the default) the node sees --token (or DAIR_TOKEN). With --http ADDR each MCP HTTP request's\n" +
			"own \"Authorization: Bearer\" header is forwarded to the node; --token is only a fallback for requests\n" +
			"without the header. With --auth none ADDR must be loopback. With --auth jwt requests without a bearer token\n" +
			"are answered 401 and --token is never used; --jwt-secret-file or --jwt-public-key-file additionally checks\n" +
			"tokens before forwarding them (the node verifies them either way). Logs go to stderr.",
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMCP(cmd, a, o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.httpAddr, "http", "", "serve streamable HTTP on ADDR instead of stdio")
	fs.StringVar(&o.auth, "auth", o.auth, "with --http: none or jwt (the node verifies tokens)")
	fs.StringVar(&o.jwtSecretFile, "jwt-secret-file", "", "with --auth jwt: also check HS256 tokens with this secret")
	fs.StringVar(&o.jwtPublicKeyFile, "jwt-public-key-file", "", "with --auth jwt: also check RS256/ES256 tokens with this PEM key")
	fs.StringVar(&o.logLevel, "log-level", o.logLevel, "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", o.logFormat, "log format: json or console")
	return cmd
}

// runMCP wires the flags into mcpserver and serves until the client leaves or a signal.
// The logger writes to stderr unbuffered, so stdout carries only the MCP stream.
func runMCP(cmd *cobra.Command, a *app, o mcpOptions) error {
	log, err := logging.New(logging.Config{Level: o.logLevel, Format: o.logFormat, Output: a.stderr})
	if err != nil {
		return usagef("%v", err)
	}
	cfg := mcpserver.Config{Server: a.server, Token: a.token, Version: versionString(), Logger: log, Auth: o.auth}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	if o.jwtSecretFile != "" || o.jwtPublicKeyFile != "" {
		if o.auth != mcpserver.AuthJWT {
			return usagef("--jwt-secret-file and --jwt-public-key-file need --auth jwt")
		}
		v, err := auth.LoadVerifier(o.jwtSecretFile, o.jwtPublicKeyFile)
		if err != nil {
			return err
		}
		cfg.Verifier = v
	}
	if o.httpAddr == "" {
		if o.auth != mcpserver.AuthNone {
			return usagef("--auth %s needs --http (over stdio the node checks --token)", o.auth)
		}
		return mcpserver.RunStdio(cmd.Context(), cfg)
	}
	err = mcpserver.ListenAndServe(cmd.Context(), o.httpAddr, cfg, nil)
	if errors.Is(err, mcpserver.ErrInvalidConfig) {
		return &usageError{err: err}
	}
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}
