package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/fedsched/fedsched/sim"
)

// timelineBins are the bin widths the replay plots choose from: the
// smallest that gives at most maxTimelineBins bins over the window.
var timelineBins = []int64{60, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400, 28 * 86400}

const maxTimelineBins = 400

// timelineWindow is the window of the replay plots: --from to --to, or to
// the end of the replay when --to is 0; and the bin width, --plot-bin or
// the automatic choice.
func timelineWindow(f simFlags, recs []sim.Record) (from, to, width int64, err error) {
	from, to = f.from, f.to
	if to == 0 {
		_, to = sim.ReplaySpan(recs)
	}
	if from < 0 || to <= from {
		return 0, 0, 0, fmt.Errorf("InvalidArgument: --from %d --to %d: the plots want 0 <= from < to (seconds of trace time)", f.from, f.to)
	}
	if f.plotBin != "" {
		if width, err = sim.ParseSpan(f.plotBin); err != nil || width <= 0 {
			return 0, 0, 0, fmt.Errorf("InvalidArgument: --plot-bin %q: want a duration such as 10m, 6h or 1d", f.plotBin)
		}
		if (to-from)/width > 100_000 {
			return 0, 0, 0, fmt.Errorf("InvalidArgument: --plot-bin %s makes %d bins of the window; choose a wider bin", f.plotBin, (to-from)/width)
		}
		return from, to, width, nil
	}
	width = timelineBins[len(timelineBins)-1]
	for _, w := range timelineBins {
		if (to-from)/w <= maxTimelineBins {
			width = w
			break
		}
	}
	return from, to, width, nil
}

// timeAxis is the unit of a window's x axis: hours for up to three days,
// days beyond.
func timeAxis(from, to int64) (unit float64, name string) {
	if to-from <= 3*86400 {
		return 3600, "hours"
	}
	return 86400, "days"
}

// writeTimelinePlots draws the utilisation (--utilisation-plot) and the
// queue length (--queue-plot) of a replay over time.
func writeTimelinePlots(f simFlags, rep siteReport, recs []sim.Record) error {
	from, to, width, err := timelineWindow(f, recs)
	if err != nil {
		return err
	}
	bins := sim.Timeline(recs, from, to, width)
	unit, uname := timeAxis(from, to)
	binText := binName(width)
	xlabel := fmt.Sprintf("trace time (%s); means over %s bins", uname, binText)
	step := func(y func(sim.TimelineBin) float64) plotter.XYs {
		pts := make(plotter.XYs, 0, 2*len(bins))
		for _, b := range bins {
			end := min(b.Start+width, to)
			pts = append(pts, plotter.XY{X: float64(b.Start) / unit, Y: y(b)}, plotter.XY{X: float64(end) / unit, Y: y(b)})
		}
		return pts
	}
	area := func(p *plot.Plot, pts plotter.XYs, c color.RGBA) error {
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color, l.Width = c, vg.Points(1)
		l.FillColor = color.NRGBA{R: c.R, G: c.G, B: c.B, A: 0x40}
		p.Add(l)
		return nil
	}
	where := fmt.Sprintf("%s (%d processors, %s)", rep.Name, rep.Procs, rep.Policy)
	if f.utilPlot != "" {
		p := newPlot(where+": utilisation over time", xlabel, "busy processors (% of the site)")
		pts := step(func(b sim.TimelineBin) float64 { return 100 * b.Busy / float64(rep.Procs) })
		if err := area(p, pts, plotColors[0].(color.RGBA)); err != nil {
			return err
		}
		mean := 100 * rep.Utilization
		m, err := plotter.NewLine(plotter.XYs{{X: float64(from) / unit, Y: mean}, {X: float64(to) / unit, Y: mean}})
		if err != nil {
			return err
		}
		m.Color, m.Width, m.Dashes = plotColors[1], vg.Points(1.4), []vg.Length{vg.Points(6), vg.Points(3)}
		p.Add(m)
		p.Legend.Add(fmt.Sprintf("utilisation over the whole replay: %.1f %%", mean), m)
		// Headroom above 100 % keeps the legend off the curve.
		p.Legend.Top = true
		p.Y.Min, p.Y.Max = 0, 122
		p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"}, {Value: 75, Label: "75"}, {Value: 100, Label: "100"}})
		p.X.Min, p.X.Max = float64(from)/unit, float64(to)/unit
		if err := savePlotSVG(p, nil, 8*vg.Inch, 3.5*vg.Inch, f.utilPlot); err != nil {
			return err
		}
	}
	if f.queuePlot != "" {
		p := newPlot(where+": queue length over time", xlabel, "waiting jobs")
		pts := step(func(b sim.TimelineBin) float64 { return b.Waiting })
		if err := area(p, pts, plotColors[3].(color.RGBA)); err != nil {
			return err
		}
		p.Y.Min = 0
		p.Y.Tick.Marker = plainTicks{}
		p.X.Min, p.X.Max = float64(from)/unit, float64(to)/unit
		if err := savePlotSVG(p, nil, 8*vg.Inch, 3.5*vg.Inch, f.queuePlot); err != nil {
			return err
		}
	}
	return nil
}

// binName says a bin width as an adjective: "10-minute", "1-day".
func binName(w int64) string {
	switch {
	case w%86400 == 0 && w/86400 == 1:
		return "1-day"
	case w%86400 == 0:
		return fmt.Sprintf("%d-day", w/86400)
	case w%3600 == 0:
		return fmt.Sprintf("%d-hour", w/3600)
	case w%60 == 0:
		return fmt.Sprintf("%d-minute", w/60)
	}
	return fmt.Sprintf("%d-second", w)
}
