package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/internal/standin"
)

func newStandinCmd(a *app) *cobra.Command {
	addr := "127.0.0.1:9000"
	cmd := &cobra.Command{
		Use:   "standin",
		Short: "serve local stand-ins for the example pipelines' document and OpenAI-compatible model",
		Long: "standin serves, until interrupted, GET /doc (a text document), GET /doc.json and an OpenAI-compatible\n" +
			"POST /v1/chat/completions that answers deterministically, so pipelines with http and llm.chat steps run\n" +
			"without network access or an API key. Point llm.chat at it with DAIR_LLM_BASE_URL=http://ADDR/v1\n" +
			"(see docs/handlers.md).",
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return usagef("standin: listen on %s: %v", addr, err)
			}
			srv := &http.Server{Handler: standin.Handler(), ReadHeaderTimeout: 5 * time.Second}
			base := "http://" + ln.Addr().String()
			fmt.Fprintf(a.stdout, "stand-in serving on %s: GET %s/doc, POST %s/v1/chat/completions\n", base, base, base)
			fmt.Fprintf(a.stdout, "point llm.chat steps at it: export DAIR_LLM_BASE_URL=%s/v1\n", base)
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				return fmt.Errorf("standin: serve: %w", err)
			case <-cmd.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err = srv.Shutdown(ctx)
			if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
				err = errors.Join(err, serr)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "http", addr, "listen address")
	return cmd
}
