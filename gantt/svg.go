package gantt

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// SVG writes the chart as a standalone SVG element of the given width in
// pixels (0: 1100). It is hand-written rather than drawn with a plotting
// library because every reservation must be one element carrying its id
// (data-job, data-reservation) for the status page, its tests and its
// tooltips.
func (c Chart) SVG(w io.Writer, width int) error {
	if width <= 0 {
		width = 1100
	}
	bars, rows := layout(c.Procs, c.Bars)
	from, to := c.From, c.To
	if to <= from {
		to = from + 1
	}
	const left, right, top, axis, legendH = 64, 16, 8, 26, 26
	plotW := float64(width - left - right)
	plotH := float64(min(max(rows*12, 140), 380))
	rowH := plotH / float64(rows)
	height := top + int(plotH) + axis + legendH
	x := func(t int64) float64 {
		t = min(max(t, from), to)
		return left + plotW*float64(t-from)/float64(to-from)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="gantt" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s">`, width, height, esc(c.Title))
	b.WriteString(`<defs>` +
		`<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#d5d5d5"/><line x1="0" y1="0" x2="0" y2="6" stroke="#8a8a8a" stroke-width="2"/></pattern>` +
		`<pattern id="stripes" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="8" height="8" fill="#f28e2b"/><line x1="0" y1="0" x2="0" y2="8" stroke="#fbd3a8" stroke-width="3"/></pattern>` +
		`</defs>`)
	b.WriteString(`<style>.gantt text{font:11px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;fill:#333}` +
		`.gantt .bar rect{stroke:#fff;stroke-width:.6}.gantt .bar:hover rect{stroke:#111;stroke-width:1.4}` +
		`.gantt .bar text{fill:#fff;pointer-events:none}.gantt .k-fixed text,.gantt .k-standing text{fill:#333}` +
		`.gantt .overflow rect{stroke:#e15759;stroke-width:2}</style>`)
	// Background, procs axis.
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="#f7f7f9" stroke="#ccc"/>`, left, top, plotW, plotH)
	y := func(row int) float64 { return top + plotH - float64(row)*rowH }
	for _, p := range procTicks(c.Procs) {
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e4e4e8"/>`, left, left+plotW, y(p), y(p))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%d</text>`, left-6, y(p), p)
	}
	if rows > c.Procs {
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e15759" stroke-dasharray="4 3"/>`, left, left+plotW, y(c.Procs), y(c.Procs))
	}
	fmt.Fprintf(&b, `<text x="12" y="%.1f" transform="rotate(-90 12 %.1f)" text-anchor="middle">processors</text>`, top+plotH/2, top+plotH/2)
	// Time axis.
	for _, t := range timeTicks(from, to) {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#e4e4e8"/>`, x(t), x(t), top, top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x(t), top+plotH+16, esc(c.timeLabel(t, to-from)))
	}
	// Bars.
	for _, p := range bars {
		kind := p.Kind
		attr := "data-reservation"
		if p.IsJob() {
			attr = "data-job"
		}
		class := "bar k-" + kind
		if p.overflow {
			class += " overflow"
		}
		fmt.Fprintf(&b, `<g class="%s" %s="%s"><title>%s</title>`, class, attr, esc(p.ID), esc(p.title()))
		x0, x1 := x(p.Start), x(p.End)
		wd := max(x1-x0, 1.5)
		for _, r := range p.rects {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"%s/>`, x0, y(r.row+r.rows), wd, float64(r.rows)*rowH, fill(kind), dash(kind))
		}
		if lbl := p.label(); lbl != "" && len(p.rects) > 0 {
			big := p.rects[0]
			for _, r := range p.rects {
				if r.rows > big.rows {
					big = r
				}
			}
			if h := float64(big.rows) * rowH; h >= 11 && wd >= float64(7*len(lbl)) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`, x0+4, y(big.row+big.rows)+h/2, esc(lbl))
			}
		}
		b.WriteString(`</g>`)
	}
	if c.Now >= from && c.Now <= to {
		fmt.Fprintf(&b, `<line class="now" x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#d62728" stroke-width="2"/>`, x(c.Now), x(c.Now), top-4, top+plotH+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#d62728" text-anchor="start" style="fill:#d62728;font-weight:600">now</text>`, x(c.Now)+3, top+10)
	}
	// Legend.
	lx, ly := float64(left), float64(top)+plotH+axis+12
	for _, k := range []struct{ kind, text string }{{Running, "running"}, {Pending, "waiting (reserved)"}, {Overbooked, "overbooked (PoF)"},
		{Hold, "hold backing a quote"}, {Fixed, "fixed reservation"}, {Standing, "standing reservation"}, {Down, "processors down"}} {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="14" height="10" fill="%s"%s/><text x="%.1f" y="%.1f" dominant-baseline="middle">%s</text>`,
			lx, ly-5, fill(k.kind), dash(k.kind), lx+18, ly, k.text)
		lx += 18 + float64(7*len(k.text)) + 14
	}
	b.WriteString(`</svg>`)
	_, err := w.Write(b.Bytes())
	return err
}

func fill(kind string) string {
	switch kind {
	case Running:
		return "#4e79a7"
	case Pending:
		return "#59a14f"
	case Overbooked:
		return "url(#stripes)"
	case Hold:
		return "#b07aa1"
	case Fixed:
		return "url(#hatch)"
	case Standing:
		return "#bab0ac"
	case Down:
		return "#e15759"
	}
	return "#999"
}

func dash(kind string) string {
	if kind == Hold {
		return ` stroke="#6d3f63" stroke-dasharray="3 2"`
	}
	return ""
}

func (p placed) label() string {
	switch {
	case p.Kind == Overbooked || p.Kind == Hold && p.PoF > 0:
		return fmt.Sprintf("%s PoF %.2f", p.Label, p.PoF)
	}
	return p.Label
}

func (p placed) title() string {
	t := p.Title
	if t == "" {
		t = p.ID
	}
	if p.overflow {
		t += " (drawn above the site: it overlaps the reservations after it)"
	}
	return t
}

func esc(s string) string { return html.EscapeString(s) }

// procTicks are a few processor counts to label, 0 and Procs included.
func procTicks(procs int) []int {
	step := 1
	for _, s := range []int{1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 256, 500, 1000, 2000, 5000} {
		step = s
		if procs/s <= 8 {
			break
		}
	}
	var out []int
	for p := 0; p < procs; p += step {
		out = append(out, p)
	}
	if len(out) > 0 && procs-out[len(out)-1] < step/2 {
		out = out[:len(out)-1]
	}
	return append(out, procs)
}

// timeTicks are round instants within [from, to], at most about ten.
func timeTicks(from, to int64) []int64 {
	span := to - from
	step := int64(7 * 86400)
	for _, s := range []int64{1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400} {
		if span/s <= 10 {
			step = s
			break
		}
	}
	var out []int64
	for t := (from + step - 1) / step * step; t <= to; t += step {
		out = append(out, t)
	}
	return out
}

// timeLabel writes t as a UTC clock time (with the date for spans over a
// day) or as an offset from From.
func (c Chart) timeLabel(t, span int64) string {
	if !c.Clock {
		return Offset(t - c.From)
	}
	tm := time.Unix(t, 0).UTC()
	switch {
	case span > 86400:
		return tm.Format("Jan 2 15:04")
	case span < 600:
		return tm.Format("15:04:05")
	}
	return tm.Format("15:04")
}

// Offset writes a number of seconds as "+2h30m", "+45s".
func Offset(d int64) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	var parts []string
	if d >= 86400 {
		parts = append(parts, fmt.Sprintf("%dd", d/86400))
		d %= 86400
	}
	if d >= 3600 {
		parts = append(parts, fmt.Sprintf("%dh", d/3600))
		d %= 3600
	}
	if d >= 60 {
		parts = append(parts, fmt.Sprintf("%dm", d/60))
		d %= 60
	}
	if d > 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%ds", d))
	}
	return sign + strings.Join(parts, "")
}
