package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/fedsched/fedsched/sim"
)

// execRecords returns the records of the jobs site k ran (or would have).
// A job that ran partly on processors leased from another site (the
// study's leasing) holds only its own part here, and its leased part at
// the lender, where it never waited.
func execRecords(r *sim.FedResult, k int) []sim.Record {
	var out []sim.Record
	for _, f := range r.Records {
		if f.Exec == k {
			rec := f.Record
			rec.Procs -= f.Leased
			out = append(out, rec)
		}
		if f.Leased > 0 && f.Lender == k {
			rec := f.Record
			rec.Procs, rec.Submit = f.Leased, f.Start
			out = append(out, rec)
		}
	}
	return out
}

// writeFedTimelinePlots draws, one panel per site, the utilisation
// (--utilisation-plot) and the queue length (--queue-plot) of a scenario's
// sites over time, each site alone (dashed) and federated (solid).
func writeFedTimelinePlots(f simFlags, name string, alone, fed *sim.FedResult) error {
	var all []sim.Record
	for _, r := range fed.Records {
		all = append(all, r.Record)
	}
	for _, r := range alone.Records {
		all = append(all, r.Record)
	}
	from, to, width, err := timelineWindow(f, all)
	if err != nil {
		return err
	}
	unit, uname := timeAxis(from, to)
	xlabel := fmt.Sprintf("time (%s); means over %s bins", uname, binName(width))
	draw := func(path, what, ylabel string, y func(sim.TimelineBin, int) float64) error {
		var panels []*plot.Plot
		for k, s := range fed.Sites {
			title := fmt.Sprintf("%s (%d processors)", s.Name, s.Procs)
			if k == 0 {
				title = fmt.Sprintf("scenario %s, %s: %s", name, what, title)
			}
			p := newPlot(title, "", ylabel)
			if k == len(fed.Sites)-1 {
				p.X.Label.Text = xlabel
			}
			p.Title.TextStyle.Font.Size = vg.Points(11)
			for i, res := range []*sim.FedResult{alone, fed} {
				bins := sim.Timeline(execRecords(res, k), from, to, width)
				pts := make(plotter.XYs, 0, 2*len(bins))
				for _, b := range bins {
					v := y(b, s.Procs)
					pts = append(pts, plotter.XY{X: float64(b.Start) / unit, Y: v}, plotter.XY{X: float64(min(b.Start+width, to)) / unit, Y: v})
				}
				l, err := plotter.NewLine(pts)
				if err != nil {
					return err
				}
				l.Width = vg.Points(1.2)
				if i == 0 {
					l.Color, l.Dashes = color.Gray{Y: 0x70}, []vg.Length{vg.Points(4), vg.Points(2)}
				} else {
					l.Color = plotColors[0]
					c := plotColors[0].(color.RGBA)
					l.FillColor = color.NRGBA{R: c.R, G: c.G, B: c.B, A: 0x38}
				}
				p.Add(l)
			}
			p.X.Min, p.X.Max = float64(from)/unit, float64(to)/unit
			p.Y.Min = 0
			p.Y.Max *= 1.05
			p.Y.Tick.Marker = plainTicks{}
			panels = append(panels, p)
		}
		return savePanelsSVG(panels, 8*vg.Inch, vg.Length(len(panels))*2.2*vg.Inch, path)
	}
	if f.utilPlot != "" {
		err := draw(f.utilPlot, "utilisation alone (dashed) and federated (filled)", "busy (%)", func(b sim.TimelineBin, procs int) float64 { return 100 * b.Busy / float64(procs) })
		if err != nil {
			return err
		}
	}
	if f.queuePlot != "" {
		return draw(f.queuePlot, "queue length alone (dashed) and federated (filled)", "waiting jobs", func(b sim.TimelineBin, _ int) float64 { return b.Waiting })
	}
	return nil
}
