package main

import (
	"fmt"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/fedsched/fedsched/sim"
)

// plotExperiment draws an experiment's rows to an SVG file: per site of
// every cell, the AWRT improvement (top) and the utilisation change
// (bottom) in per cent, ours beside the reference's where there is one.
func plotExperiment(path, name string, rows []sim.ExperimentRow) error {
	labels := make([]string, len(rows))
	ours := [2]plotter.Values{make(plotter.Values, len(rows)), make(plotter.Values, len(rows))}
	study := [2]plotter.Values{make(plotter.Values, len(rows)), make(plotter.Values, len(rows))}
	refs := false
	for i, r := range rows {
		labels[i] = fmt.Sprintf("%s\n%s", r.Site, r.Scenario)
		if !strings.Contains(r.Scenario, r.Transfer) {
			labels[i] += "\n" + r.Transfer
		}
		if r.Seed != 1 {
			labels[i] += fmt.Sprintf("\nseed %d", r.Seed)
		}
		ours[0][i], ours[1][i] = 100*r.AWRTChange, 100*r.UtilizationChange
		// A reference may give one figure alone (the study's text): the
		// other has no bar.
		for k, x := range []*float64{r.StudyAWRTChange, r.StudyUtilizationChange} {
			if x != nil {
				study[k][i] = 100 * *x
				refs = true
			}
		}
	}
	w := vg.Points(float64(max(400, 64*len(rows)+120)))
	var ps []*plot.Plot
	for k, what := range []string{"AWRT improvement (%, + is better)", "utilisation change (%)"} {
		title := ""
		if k == 0 {
			title = "experiment " + name + ": each site federated against itself alone"
		}
		p := newPlot(title, "", what)
		bw := vg.Points(14)
		b, err := plotter.NewBarChart(ours[k], bw)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		b.Color, b.LineStyle.Width = plotColors[0], 0
		p.Add(b)
		if k == 0 {
			p.Legend.Add("ours", b)
		}
		if refs {
			b.Offset = -bw / 2
			s, err := plotter.NewBarChart(study[k], bw)
			if err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			s.Color, s.LineStyle.Width, s.Offset = plotColors[1], 0, bw/2
			p.Add(s)
			if k == 0 {
				p.Legend.Add("reference", s)
			}
		}
		// Room above the bars for the legend.
		p.Legend.Top = true
		p.Y.Max += 0.2 * (p.Y.Max - p.Y.Min)
		p.NominalX(labels...)
		p.X.Tick.Label.Font.Size = vg.Points(7)
		p.Y.Tick.Marker = plainTicks{}
		ps = append(ps, p)
	}
	return savePanelsSVG(ps, w, vg.Points(520), path)
}
