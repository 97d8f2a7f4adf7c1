package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dairuntime/dair/httpapi"
)

func newClusterCmd(a *app) *cobra.Command {
	cmd := group("cluster", "cluster membership")
	cmd.AddCommand(&cobra.Command{
		Use:   "members",
		Short: "list the cluster members the node sees",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := a.client().Members(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut() {
				return a.printJSON(l)
			}
			tw := a.table()
			fmt.Fprintln(tw, "NODE\tMEMBER\tADDRESS\tROLES\tSELF")
			for _, m := range l.Members {
				self := ""
				if m.ID == l.Self {
					self = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", dash(m.NodeID), m.ID, m.Address, dash(strings.Join(m.Roles, ",")), self)
			}
			return tw.Flush()
		},
	})
	return cmd
}

// printInstances prints capacity descriptors as a table. In cluster mode (withNode) a NODE
// column names the node hosting each instance (its host id: the node's --node-id).
func (a *app) printInstances(insts []httpapi.Instance, withNode bool) error {
	tw := a.table()
	head := "ID\tSTATUS\tTENANT\tISOLATION\tWORKERS\tRUNS\tSLOTS\tQUEUE\tPAUSED\tDRAINING\tHEARTBEAT"
	if withNode {
		head = "ID\tNODE" + strings.TrimPrefix(head, "ID")
	}
	fmt.Fprintln(tw, head)
	for _, i := range insts {
		id := i.RuntimeInstanceID
		if withNode {
			id += "\t" + dash(i.HostID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d/%d\t%d\t%d/%d\t%t\t%t\t%s\n", id, i.Status,
			dash(i.TenantID), dash(i.IsolationMode), i.ActiveWorkerCount, i.WorkerCount, i.ActiveRunCount,
			i.MaxConcurrentRuns, i.AvailableRunSlots, i.QueuedRunCount, i.QueueCapacity, i.IsQueuePaused,
			i.IsDraining, fmtTime(i.LastHeartbeatAt))
	}
	return tw.Flush()
}

// clusterMode reports whether the node is a cluster member (GET /v1/cluster/members answers).
func (a *app) clusterMode(ctx context.Context) bool {
	_, err := a.client().Members(ctx)
	return err == nil
}
