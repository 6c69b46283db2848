package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/fedsched/fedsched/gantt"
	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/sim"
)

// printStartAccuracy prints, per site, how the actual starts compare with
// the starts planned at submission.
func printStartAccuracy(w io.Writer, sites []siteReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	for _, s := range sites {
		a := s.StartAccuracy
		if a == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nstart accuracy: actual - planned start at submission (positive: late)")
			fmt.Fprintf(tw, "site\tpolicy\tjobs\ton time\twithin 1 min\tearly > 1 min\tlate > 1 h\tp10 (s)\tp50 (s)\tp90 (s)\tp99 (s)\tmean |error| (s)\t\n")
			header = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f %%\t%.1f %%\t%.1f %%\t%.1f %%\t%d\t%d\t%d\t%d\t%.0f\t\n", s.Name, s.Policy, a.Jobs, 100*a.OnTime, 100*a.Within1m,
			100*a.Early, 100*a.Late1h, a.P10, a.P50, a.P90, a.P99, a.MeanAbs)
	}
	tw.Flush()
}

// accuracySeries is one curve of the start accuracy plot.
type accuracySeries struct {
	name string
	errs []int64 // sorted
}

// runStartAccuracy replays in under conservative and EASY backfilling,
// prints both accuracies and plots the distribution of the start errors.
func runStartAccuracy(cmd *cobra.Command, f simFlags, in []sim.Job, cfg sim.Config, rep siteReport) error {
	var sites []siteReport
	var series []accuracySeries
	for _, pol := range []plan.Policy{plan.Conservative, plan.EASY} {
		c := cfg
		c.Site.Policy = pol
		res, err := sim.Run(cmd.Context(), in, c)
		if err != nil {
			return err
		}
		r := rep
		r.Policy = pol.String()
		m := sim.ComputeMetrics(res.Records, cfg.Site.Procs)
		r.Metrics = &m
		r.StartAccuracy = sim.ComputeStartAccuracy(res.Records)
		sites = append(sites, r)
		series = append(series, accuracySeries{name: pol.String(), errs: sim.StartErrors(res.Records)})
	}
	out := simReport{Trace: rep.Name, Sites: sites}
	printSimTable(tableOut(cmd, f.jsonOut), out)
	printStartAccuracy(tableOut(cmd, f.jsonOut), sites)
	if f.jsonOut != "" {
		if err := writeJSON(cmd.OutOrStdout(), f.jsonOut, out); err != nil {
			return err
		}
	}
	title := fmt.Sprintf("%s: how good is the start promised at submission?", rep.Name)
	if err := plotStartAccuracy(f.accPlot, title, series); err != nil {
		return err
	}
	fmt.Fprintf(tableOut(cmd, f.jsonOut), "wrote %s\n", f.accPlot)
	return nil
}

// plotStartAccuracy draws the cumulative distribution of each series'
// start errors, in hours, over -24 h to +24 h.
func plotStartAccuracy(path, title string, series []accuracySeries) error {
	p := newPlot(title, "actual start - planned start (hours; negative: earlier than promised)", "share of started jobs (cumulative)")
	// Top left stays empty: a curve is high only after most jobs started.
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(6), -vg.Points(6)
	dashes := [][]vg.Length{nil, {vg.Points(5), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}}
	for i, s := range series {
		if len(s.errs) == 0 {
			continue
		}
		// One step per minute of error (a pixel is four), errors beyond
		// the axis at its ends: the file stays small for any trace.
		n := float64(len(s.errs))
		var pts plotter.XYs
		for k := 0; k < len(s.errs); {
			m := min(max(s.errs[k]/60, -25*60), 25*60)
			j := k
			for j < len(s.errs) && min(max(s.errs[j]/60, -25*60), 25*60) == m {
				j++
			}
			x := float64(m) / 60
			pts = append(pts, plotter.XY{X: x, Y: float64(k) / n}, plotter.XY{X: x, Y: float64(j) / n})
			k = j
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color, l.Width, l.Dashes = plotColors[i%len(plotColors)], vg.Points(1.6), dashes[i%len(dashes)]
		p.Add(l)
		a := sim.StartAccuracyOf(s.errs)
		p.Legend.Add(fmt.Sprintf("%s: %.0f %% within 1 min, %.0f %% >1 h late", s.name, 100*a.Within1m, 100*a.Late1h), l)
	}
	p.Legend.ThumbnailWidth = vg.Points(24)
	p.Legend.Padding = vg.Points(2)
	p.X.Min, p.X.Max = -24, 24
	p.Y.Min, p.Y.Max = 0, 1
	p.X.Tick.Marker = plot.ConstantTicks(hourTicks())
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0 %"}, {Value: 0.25, Label: "25 %"}, {Value: 0.5, Label: "50 %"}, {Value: 0.75, Label: "75 %"}, {Value: 1, Label: "100 %"}})
	if err := savePlotSVG(p, nil, 8*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("start accuracy plot: %w", err)
	}
	return nil
}

func hourTicks() []plot.Tick {
	var ts []plot.Tick
	for h := -24; h <= 24; h += 6 {
		ts = append(ts, plot.Tick{Value: float64(h), Label: fmt.Sprintf("%+d h", h)})
	}
	for h := -24; h <= 24; h++ {
		if h%6 != 0 {
			ts = append(ts, plot.Tick{Value: float64(h)})
		}
	}
	return ts
}

// writeReplayGantt draws the jobs of a replay that ran in [--from, --to)
// (trace seconds): each as it actually ran, on the site's processors;
// overbooked ones (a reservation shorter than the estimate) striped.
func writeReplayGantt(f simFlags, name string, procs int, recs []sim.Record) error {
	from, to := f.from, f.to
	if to == 0 {
		to = from + 86400
	}
	if from < 0 || to <= from {
		return fmt.Errorf("InvalidArgument: --from %d --to %d: want 0 <= from < to (seconds of trace time)", from, to)
	}
	c := gantt.Chart{Title: fmt.Sprintf("%s: jobs that ran from %s to %s of the trace", name, gantt.Offset(from), gantt.Offset(to)),
		Procs: procs, From: from, To: to, Now: -1}
	for _, r := range recs {
		if !r.Started || r.End <= from || r.Start >= to || r.End <= r.Start {
			continue
		}
		kind := gantt.Running
		if r.Reserved < r.Estimate {
			kind = gantt.Overbooked
		}
		c.Bars = append(c.Bars, gantt.Bar{ID: fmt.Sprint(r.ID), Kind: kind, Procs: r.Procs, Start: r.Start, End: r.End, Label: r.User,
			Title: fmt.Sprintf("job %d: %d processors, %s to %s, estimate %d s, waited %d s", r.ID, r.Procs, gantt.Offset(r.Start), gantt.Offset(r.End), r.Estimate, r.Start-r.Submit)})
	}
	out, err := os.Create(f.gantt)
	if err != nil {
		return fmt.Errorf("InvalidArgument: --gantt: %w", err)
	}
	if err := c.SVG(out, 1400); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
