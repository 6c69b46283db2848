// Package gantt draws a site's plan (processors over time) as an SVG Gantt
// chart or as compact text for a terminal. It knows nothing of nodes or
// simulators: both describe their plan as a Chart of Bars.
//
// # Basics
//
// A Bar holds Procs processors over [Start, End). Layout assigns each bar
// to processor rows: bars are taken in order of start, each gets the
// lowest-numbered rows free at its start. Because a plan never holds more
// processors than the site has at any instant, every bar fits; a bar that
// does not (a job running late over the next reservation) is drawn on extra
// rows above the site's processors, marked as overflow.
//
// Times are integer seconds (Unix seconds of the site's clock, or trace
// seconds of a replay); labels show them as UTC clock times or as offsets,
// as Chart.Clock says.
package gantt

import (
	"cmp"
	"slices"
)

// Kinds of bars; each has its own colour and legend entry.
const (
	Running    = "running"
	Pending    = "pending"
	Overbooked = "overbooked"
	Hold       = "hold"
	Fixed      = "fixed"
	Standing   = "standing"
	Down       = "down"
)

// Bar is one reservation.
type Bar struct {
	// ID is the job id (jobs), hold id or reservation id. Jobs' bars carry
	// it in a data-job attribute; others in data-reservation.
	ID string
	// Kind is one of the kinds above.
	Kind string
	// Label is a short text drawn on the bar when it is wide enough (the
	// user, a reservation's name); Title is its tooltip.
	Label, Title string
	Procs        int
	Start, End   int64
	// PoF of an overbooked job or a hold, shown on the bar.
	PoF float64
}

// IsJob reports whether the bar is a job's reservation.
func (b Bar) IsJob() bool {
	return b.Kind == Running || b.Kind == Pending || b.Kind == Overbooked
}

// Chart is what to draw.
type Chart struct {
	Title string
	// Procs is the number of processors of the site.
	Procs int
	// From and To bound the time axis; Now, if within, is drawn as a line.
	From, To, Now int64
	// Clock: true labels times as UTC clock times (a live site); false as
	// offsets from From in hours and minutes (a replay in trace seconds).
	Clock bool
	Bars  []Bar
}

// rect is a run of consecutive rows of one bar.
type rect struct {
	row, rows int
}

// placed is a bar with its rows.
type placed struct {
	Bar
	rects    []rect
	overflow bool
}

// layout assigns rows to bars; it returns them in the order drawn and the
// number of rows used (at least procs).
func layout(procs int, bars []Bar) ([]placed, int) {
	order := slices.Clone(bars)
	slices.SortStableFunc(order, func(a, b Bar) int {
		// Running jobs first at equal starts: they were there first.
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(rank(a.Kind), rank(b.Kind)), cmp.Compare(a.ID, b.ID))
	})
	freeAt := make([]int64, procs)
	for i := range freeAt {
		freeAt[i] = -1 << 62
	}
	out := make([]placed, 0, len(order))
	for _, b := range order {
		p := placed{Bar: b}
		var rows []int
		for r := 0; r < len(freeAt) && len(rows) < b.Procs; r++ {
			if freeAt[r] <= b.Start {
				rows = append(rows, r)
			}
		}
		for len(rows) < b.Procs {
			// Overflow: the plan holds more than the site at this start.
			freeAt = append(freeAt, -1<<62)
			rows = append(rows, len(freeAt)-1)
			p.overflow = true
		}
		for _, r := range rows {
			freeAt[r] = b.End
		}
		for i := 0; i < len(rows); {
			j := i + 1
			for j < len(rows) && rows[j] == rows[j-1]+1 {
				j++
			}
			p.rects = append(p.rects, rect{row: rows[i], rows: j - i})
			i = j
		}
		out = append(out, p)
	}
	return out, len(freeAt)
}

func rank(kind string) int {
	switch kind {
	case Running, Down:
		return 0
	case Fixed, Standing:
		return 1
	}
	return 2
}
