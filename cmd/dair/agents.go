package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dairuntime/dair/httpapi"
	"github.com/dairuntime/dair/internal/agents"
	"github.com/dairuntime/dair/internal/server"
)

// addAgentFlags registers the agent messaging flags of `dair dev` and `dair node`.
func addAgentFlags(fs *pflag.FlagSet, o *server.AgentOptions) {
	fs.StringSliceVar(&o.Types, "agents", nil, "built-in agent types this node owns: echo,counter")
	fs.StringArrayVar(&o.Subscriptions, "agent-subscription", nil,
		"subscription this node owns, TENANT:TOPIC=TYPE[/KEY] (TOPIC ending in * is a prefix of at least one character; without KEY the topic source is the key); repeatable")
	fs.DurationVar(&o.HealthInterval, "agent-health-interval", 0, "agent worker health probe interval (0: 5s)")
	fs.IntVar(&o.FailureThreshold, "agent-failure-threshold", 0, "failed probes that evict an agent worker (0: 2)")
	fs.DurationVar(&o.RPCTimeout, "agent-rpc-timeout", 0, "bound of a request to an agent worker and default send timeout (0: 30s)")
}

func newAgentsCmd(a *app) *cobra.Command {
	cmd := group("agents", "agent messaging: list agent types, send to an agent, publish to a topic")
	list := &cobra.Command{
		Use:   "list",
		Short: "list the agent types and their owners (operators: and the workers)",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := a.client().ListAgents(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(l)
			}
			return a.printAgents(l)
		},
	}
	cmd.AddCommand(list, newAgentsSendCmd(a), newAgentsPublishCmd(a))
	return cmd
}

// printAgents prints the types, then the workers when the answer has them.
func (a *app) printAgents(l *httpapi.AgentList) error {
	tw := a.table()
	fmt.Fprintln(tw, "TYPE\tOWNERS")
	for _, t := range l.Agents {
		fmt.Fprintf(tw, "%s\t%s\n", t.Type, dash(strings.Join(t.OwnerNodes, ",")))
	}
	if len(l.Workers) > 0 {
		fmt.Fprintf(tw, "\nWORKER\tNODE\tTYPES\tACTIVE\tSUBSCRIPTIONS\tSTATE\n")
		for _, w := range l.Workers {
			state := "healthy"
			switch {
			case w.Evicted:
				state = "evicted"
			case w.Leaving:
				state = "leaving"
			case w.Unhealthy:
				state = fmt.Sprintf("unhealthy (%d failed probes)", w.Failures)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", w.WorkerID, w.NodeID, dash(strings.Join(w.Types, ",")),
				w.ActiveAgents, w.Subscriptions, state)
		}
		if l.PendingSessions != nil {
			fmt.Fprintf(tw, "\npending sends: %d\n", *l.PendingSessions)
		}
	}
	return tw.Flush()
}

func newAgentsSendCmd(a *app) *cobra.Command {
	var (
		req     httpapi.AgentSendRequest
		message string
	)
	cmd := &cobra.Command{
		Use:   "send TYPE/KEY",
		Short: "send a message to an agent and print the outcome; exit 1 unless delivered",
		Long: "send posts --message (JSON, or @FILE) to agent TYPE/KEY of the tenant and waits for the outcome:\n" +
			"delivered (with the agent's reply), timeout, undeliverable or error. It exits 0 only if delivered.",
		Args: exactArgs("TYPE/KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := agents.ParseAgentRef(args[0])
			if err != nil {
				return usagef("%v", err)
			}
			if req.Message, err = agentMessage(a, "send", req.TenantID, message); err != nil {
				return err
			}
			o, err := a.client().SendAgent(cmd.Context(), id.Type, id.Key, req)
			if err != nil {
				return err
			}
			if a.jsonOut() {
				err = a.printJSON(o)
			} else if o.Outcome == httpapi.OutcomeDelivered {
				_, err = fmt.Fprintf(a.stdout, "delivered: %s\n", o.Response)
			} else {
				_, err = fmt.Fprintf(a.stdout, "%s: %s\n", o.Outcome, o.Reason)
			}
			if err != nil {
				return err
			}
			if o.Outcome != httpapi.OutcomeDelivered {
				return &quietError{msg: "agent message " + o.Outcome}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&req.TenantID, "tenant", "", "tenant id (with auth on, the token's tenant is used)")
	fs.StringVar(&message, "message", "", "the message: JSON, or @FILE to read it from a file")
	fs.StringVar(&req.Timeout, "timeout", "", "how long to wait for the reply, e.g. 2s (default: the node's 30s)")
	return cmd
}

func newAgentsPublishCmd(a *app) *cobra.Command {
	var (
		req     httpapi.AgentPublishRequest
		message string
	)
	cmd := &cobra.Command{
		Use:   "publish TOPIC",
		Short: "publish a message to a topic and print the number of deliveries",
		Long: "publish posts --message (JSON, or @FILE) to TOPIC, \"TYPE\" or \"TYPE/SOURCE\": the tenant's subscriptions\n" +
			"matching TYPE (exactly or by prefix) each deliver it to one agent, keyed by SOURCE when the\n" +
			"subscription names no key.",
		Args: exactArgs("TOPIC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := agents.ParseTopic(args[0]); err != nil {
				return usagef("%v", err)
			}
			var err error
			if req.Message, err = agentMessage(a, "publish", req.TenantID, message); err != nil {
				return err
			}
			p, err := a.client().PublishAgent(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(p)
			}
			noun := "deliveries"
			if p.Deliveries == 1 {
				noun = "delivery"
			}
			_, err = fmt.Fprintf(a.stdout, "%d %s\n", p.Deliveries, noun)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&req.TenantID, "tenant", "", "tenant id (with auth on, the token's tenant is used)")
	fs.StringVar(&message, "message", "", "the message: JSON, or @FILE to read it from a file")
	return cmd
}

// agentMessage checks the tenant and reads --message: literal JSON or @FILE.
func agentMessage(a *app, verb, tenant, s string) (json.RawMessage, error) {
	if tenant == "" && a.token == "" {
		return nil, usagef("%s needs --tenant (or a --token carrying the tenant)", verb)
	}
	if s == "" {
		return nil, usagef("%s needs --message JSON (or @FILE)", verb)
	}
	b := []byte(s)
	if path, ok := strings.CutPrefix(s, "@"); ok {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, usagef("read message file: %v", err)
		}
	}
	if !json.Valid(b) {
		return nil, usagef("--message is not valid JSON")
	}
	return json.RawMessage(b), nil
}
