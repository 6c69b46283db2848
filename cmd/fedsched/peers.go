package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// peerJSON is one member in `fedsched peers --json`.
type peerJSON struct {
	Site        string `json:"site"`
	Addr        string `json:"addr"`
	GossipAddr  string `json:"gossip_addr"`
	State       string `json:"state"`
	Procs       int32  `json:"procs"`
	Policy      string `json:"policy"`
	FreeNow     int32  `json:"free_now"`
	Free1h      int32  `json:"free_1h"`
	Free4h      int32  `json:"free_4h"`
	Free24h     int32  `json:"free_24h"`
	Overbooking bool   `json:"overbooking"`
	Local       bool   `json:"local"`
}

func newPeersCmd() *cobra.Command {
	var f connFlags
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "List the federation as a site sees it, itself included, with each member's gossiped digest",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return unary(cmd, &f, func(ctx context.Context, c *siteClient) ([]peerJSON, error) {
				r, err := fedschedv1.NewFederationServiceClient(c.conn).ListMembers(ctx, &fedschedv1.ListMembersRequest{})
				if err != nil {
					return nil, err
				}
				out := make([]peerJSON, 0, len(r.GetMembers()))
				for _, m := range r.GetMembers() {
					out = append(out, peerJSON{Site: m.GetSite(), Addr: m.GetAddr(), GossipAddr: m.GetGossipAddr(), State: m.GetState(),
						Procs: m.GetProcs(), Policy: m.GetPolicy(), FreeNow: m.GetFreeNow(), Free1h: m.GetFree_1H(), Free4h: m.GetFree_4H(),
						Free24h: m.GetFree_24H(), Overbooking: m.GetOverbooking(), Local: m.GetLocal()})
				}
				return out, nil
			}, func(p []peerJSON) any { return p }, printPeers)
		},
	}
	f.register(cmd, "print the members as a JSON array")
	return cmd
}

func printPeers(w io.Writer, peers []peerJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tSTATE\tADDR\tGOSSIP\tPROCS\tPOLICY\tFREE NOW/1H/4H/24H\tOVERBOOKING")
	for _, p := range peers {
		name := p.Site
		if p.Local {
			name += " (this site)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d/%d/%d/%d\t%v\n", name, p.State, p.Addr, p.GossipAddr, p.Procs, p.Policy,
			p.FreeNow, p.Free1h, p.Free4h, p.Free24h, p.Overbooking)
	}
	return tw.Flush()
}
