package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fedsched/fedsched/node"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

func newPlanCmd() *cobra.Command {
	var (
		f    connFlags
		svg  string
		cols int
	)
	cmd := &cobra.Command{
		Use:   "plan [--svg FILE] [--width COLUMNS]",
		Short: "Draw a site's plan: every reservation from now to the end of the last one, as a text Gantt (or SVG)",
		Long: `Draw the plan of a live site from now to the end of its last reservation:
one line per reservation (running jobs █, waiting ▓, overbooked ▒ with their
PoF, holds backing quotes ░, fixed and standing reservations ╳) over a time
axis, then the share of the processors reserved in each column. Queued jobs
(queue policies) and what every waiting job waits for follow. --svg FILE
writes the status page's Gantt chart to FILE instead. Times are UTC.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return unary(cmd, &f, func(ctx context.Context, c *siteClient) (*fedschedv1.GetPlanResponse, error) {
				return c.rpc.GetPlan(ctx, &fedschedv1.GetPlanRequest{})
			}, func(r *fedschedv1.GetPlanResponse) any { return planView(r) }, func(w io.Writer, r *fedschedv1.GetPlanResponse) error {
				if svg != "" {
					return writeSVG(svg, r)
				}
				return printPlan(w, r, cols)
			})
		},
	}
	f.register(cmd, "print the plan as a JSON object")
	cmd.Flags().StringVar(&svg, "svg", "", "write the Gantt chart as SVG to this file")
	cmd.Flags().IntVar(&cols, "width", 0, "columns of the time axis (default: fit the terminal, or 60)")
	return cmd
}

func writeSVG(path string, r *fedschedv1.GetPlanResponse) error {
	out, err := os.Create(path)
	if err != nil {
		return invalidArg("--svg: %v", err)
	}
	if err := node.PlanChart(r).SVG(out, 0); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func printPlan(w io.Writer, r *fedschedv1.GetPlanResponse, cols int) error {
	if cols <= 0 {
		cols = 60
		if wd, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && wd > 100 {
			cols = min(wd-60, 160)
		}
	}
	if err := node.PlanChart(r).Text(w, cols); err != nil {
		return err
	}
	var waiting []*fedschedv1.PlanEntry
	for _, e := range append(r.GetEntries(), r.GetQueued()...) {
		if e.GetWait() != nil {
			waiting = append(waiting, e)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nwaiting:")
	k := newKV(w)
	for _, e := range waiting {
		k.add(e.GetId(), "%s: %s", e.GetWait().GetKind(), e.GetWait().GetMessage())
	}
	return k.flush()
}

// planEntryJSON is one reservation in `plan --json`.
type planEntryJSON struct {
	Kind       string  `json:"kind"`
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	User       string  `json:"user"`
	Procs      int32   `json:"procs"`
	Start      *string `json:"start"`
	End        *string `json:"end"`
	EstimateS  int64   `json:"estimate_s"`
	Overbooked bool    `json:"overbooked"`
	PoF        float64 `json:"pof"`
	Wait       *string `json:"wait"`
	WaitKind   string  `json:"wait_kind"`
}

type planJSON struct {
	Site    string          `json:"site"`
	Procs   int32           `json:"procs"`
	Now     *string         `json:"now"`
	Until   *string         `json:"until"`
	Entries []planEntryJSON `json:"entries"`
	Queued  []planEntryJSON `json:"queued"`
}

func planView(r *fedschedv1.GetPlanResponse) planJSON {
	conv := func(es []*fedschedv1.PlanEntry) []planEntryJSON {
		out := make([]planEntryJSON, 0, len(es))
		for _, e := range es {
			v := planEntryJSON{Kind: e.GetKind(), ID: e.GetId(), Name: e.GetName(), User: e.GetUser(), Procs: e.GetProcs(),
				Start: tsJSON(e.GetStart()), End: tsJSON(e.GetEnd()), EstimateS: e.GetEstimateSeconds(), Overbooked: e.GetOverbooked(), PoF: e.GetPof()}
			if wt := e.GetWait(); wt != nil {
				msg := wt.GetMessage()
				v.Wait, v.WaitKind = &msg, wt.GetKind()
			}
			out = append(out, v)
		}
		return out
	}
	return planJSON{Site: r.GetSite().GetName(), Procs: r.GetSite().GetProcs(), Now: tsJSON(r.GetSite().GetNow()), Until: tsJSON(r.GetUntil()),
		Entries: conv(r.GetEntries()), Queued: conv(r.GetQueued())}
}
