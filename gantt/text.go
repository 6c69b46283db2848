package gantt

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Text writes the chart for a terminal: one line per bar (id, kind,
// processors, a bar over cols columns spanning [From, To)), then a load
// line whose glyph height is the share of processors reserved in each
// column. Glyphs: █ running, ▓ waiting, ▒ overbooked, ░ hold, ╳ fixed or
// standing, ! processors down.
func (c Chart) Text(w io.Writer, cols int) error {
	if cols <= 0 {
		cols = 60
	}
	from, to := c.From, c.To
	if to <= from {
		to = from + 1
	}
	col := func(t int64) int {
		t = min(max(t, from), to)
		return int(int64(cols) * (t - from) / (to - from))
	}
	stamp := func(t int64) string {
		if c.Clock {
			return time.Unix(t, 0).UTC().Format("2006-01-02 15:04:05Z")
		}
		return Offset(t - from)
	}
	step := (to - from) / int64(cols)
	fmt.Fprintf(w, "%s: %d processors, %s → %s (one column = %s)\n", c.Title, c.Procs, stamp(from), stamp(to), strings.TrimPrefix(Offset(max(step, 1)), "+"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ruler := []rune(strings.Repeat(" ", cols))
	if c.Now >= from && c.Now <= to {
		if i := min(col(c.Now), cols-1); i >= 0 {
			ruler[i] = '↓'
		}
	}
	fmt.Fprintf(tw, "ID\tKIND\tPROCS\t|%s|\tDETAIL\n", string(ruler))
	bars, _ := layout(c.Procs, c.Bars)
	for _, b := range bars {
		line := []rune(strings.Repeat(" ", cols))
		a, z := col(b.Start), col(b.End)
		if z <= a {
			z = min(a+1, cols)
			a = z - 1
		}
		g := glyph(b.Kind)
		for i := a; i < z; i++ {
			line[i] = g
		}
		detail := b.Label
		if b.Kind == Overbooked || b.Kind == Hold && b.PoF > 0 {
			detail = strings.TrimSpace(fmt.Sprintf("%s PoF %.2f", detail, b.PoF))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t|%s|\t%s\n", b.ID, b.Kind, b.Procs, string(line), oneLine(detail))
	}
	load := make([]rune, cols)
	levels := []rune(" ▁▂▃▄▅▆▇█")
	for i := range load {
		t0 := from + (to-from)*int64(i)/int64(cols)
		busy := 0
		for _, b := range c.Bars {
			if b.Start <= t0 && b.End > t0 {
				busy += b.Procs
			}
		}
		k := 0
		if c.Procs > 0 {
			k = min(len(levels)-1, (busy*(len(levels)-1)+c.Procs-1)/c.Procs)
		}
		load[i] = levels[k]
	}
	fmt.Fprintf(tw, "load\t\t\t|%s|\tshare of the %d processors reserved\n", string(load), c.Procs)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "█ running  ▓ waiting  ▒ overbooked  ░ hold  ╳ fixed/standing  ! down  ↓ now")
	return err
}

func glyph(kind string) rune {
	switch kind {
	case Running:
		return '█'
	case Pending:
		return '▓'
	case Overbooked:
		return '▒'
	case Hold:
		return '░'
	case Fixed, Standing:
		return '╳'
	case Down:
		return '!'
	}
	return '?'
}

func oneLine(s string) string {
	if !strings.ContainsAny(s, "\t\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}
