package main

import (
	"bytes"
	"fmt"
	"image/color"
	"os"
	"strconv"
	"sync"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plotColors are the series colours of every figure (Tableau 10: readable
// in print and by the colour-blind in this order).
var plotColors = []color.Color{
	color.RGBA{R: 0x4e, G: 0x79, B: 0xa7, A: 0xff}, color.RGBA{R: 0xe1, G: 0x57, B: 0x59, A: 0xff},
	color.RGBA{R: 0x59, G: 0xa1, B: 0x4f, A: 0xff}, color.RGBA{R: 0xf2, G: 0x8e, B: 0x2b, A: 0xff},
	color.RGBA{R: 0x76, G: 0xb7, B: 0xb2, A: 0xff}, color.RGBA{R: 0xb0, G: 0x7a, B: 0xa1, A: 0xff},
}

// plotFont is the typeface of every figure. gonum/plot lays text out with
// its embedded Liberation fonts and the SVG only names them; a viewer that
// lacks the font substitutes one of other widths and labels overrun.
// Liberation Sans has the metrics of Arial and Helvetica, which every
// desktop has, so svgFontFamily names those as fallbacks.
var plotFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

var setPlotFont sync.Once

const svgFontFamily = `font-family:'Liberation Sans',Arimo,Arial,Helvetica,sans-serif;`

// newPlot returns a plot with the figures' typeface and a light grid.
func newPlot(title, x, y string) *plot.Plot {
	// plot.New and the legend read the package's default font.
	setPlotFont.Do(func() { plot.DefaultFont = plotFont })
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(6)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = color.Gray{Y: 0xe0}, color.Gray{Y: 0xe0}
	p.Add(g)
	return p
}

// savePlotSVG draws p (w x h) to an SVG file. A non-nil legend is drawn
// in a column right of the plot instead of inside it, where it would cover
// a curve.
func savePlotSVG(p *plot.Plot, legend *plot.Legend, w, h vg.Length, path string) error {
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	if legend != nil {
		r := legend.Rectangle(dc)
		lw := r.Max.X - r.Min.X + vg.Points(16)
		p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
		lc := draw.Crop(dc, w-lw+vg.Points(8), -vg.Points(4), 0, -vg.Points(30))
		legend.Top, legend.Left = true, true
		legend.Draw(lc)
	} else {
		p.Draw(dc)
	}
	return writePlotSVG(c, path)
}

// savePanelsSVG draws plots one above the other, their axes aligned, in
// one SVG file w wide and h high.
func savePanelsSVG(ps []*plot.Plot, w, h vg.Length, path string) error {
	c := vgsvg.New(w, h)
	rows := make([][]*plot.Plot, len(ps))
	for i, p := range ps {
		rows[i] = []*plot.Plot{p}
	}
	t := draw.Tiles{Rows: len(ps), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(6), PadY: vg.Points(12)}
	cs := plot.Align(rows, t, draw.New(c))
	for i, p := range ps {
		p.Draw(cs[i][0])
	}
	return writePlotSVG(c, path)
}

// writePlotSVG writes a drawn canvas to path, its text in svgFontFamily.
func writePlotSVG(c *vgsvg.Canvas, path string) error {
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	out := bytes.ReplaceAll(b.Bytes(), []byte("font-family:Liberation Sans;"), []byte(svgFontFamily))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// plainTicks are gonum/plot's default ticks labelled without trailing
// zeros ("25", not "25.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}
