package gantt

import (
	"bytes"
	"encoding/xml"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomPlan makes bars that never hold more than procs processors at once
// (a valid plan), by reserving on a brute-force profile.
func randomPlan(rng *rand.Rand, procs, n int) []Bar {
	const horizon = 200
	busy := make([]int, horizon)
	var bars []Bar
	kinds := []string{Running, Pending, Overbooked, Hold, Fixed}
	for try := 0; len(bars) < n && try < 100*n; try++ {
		p := 1 + rng.IntN(procs)
		s := int64(rng.IntN(horizon - 1))
		e := s + 1 + int64(rng.IntN(int(horizon-s)))
		ok := true
		for t := s; t < e; t++ {
			ok = ok && busy[t]+p <= procs
		}
		if !ok {
			continue
		}
		for t := s; t < e; t++ {
			busy[t] += p
		}
		bars = append(bars, Bar{ID: string(rune('a'+len(bars)%26)) + strings.Repeat("x", len(bars)/26), Kind: kinds[rng.IntN(len(kinds))], Procs: p, Start: s, End: e})
	}
	return bars
}

// TestLayoutNeverOverlaps: in a valid plan every bar gets exactly its
// processors, within the site, and no two bars share a row at one time.
func TestLayoutNeverOverlaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		procs := 1 + rng.IntN(16)
		bars := randomPlan(rng, procs, 1+rng.IntN(25))
		placedBars, rows := layout(procs, bars)
		if rows != procs {
			t.Fatalf("trial %d: %d rows for a valid plan on %d processors", trial, rows, procs)
		}
		owner := map[[2]int64]string{}
		for _, p := range placedBars {
			got := 0
			for _, r := range p.rects {
				got += r.rows
				for row := r.row; row < r.row+r.rows; row++ {
					for tm := p.Start; tm < p.End; tm++ {
						k := [2]int64{int64(row), tm}
						if o, dup := owner[k]; dup {
							t.Fatalf("trial %d: row %d at %d held by %s and %s", trial, row, tm, o, p.ID)
						}
						owner[k] = p.ID
					}
				}
			}
			if got != p.Procs || p.overflow {
				t.Fatalf("trial %d: bar %s got %d rows for %d processors (overflow %v)", trial, p.ID, got, p.Procs, p.overflow)
			}
		}
	}
}

func TestLayoutOverflowIsDrawnAbove(t *testing.T) {
	bars := []Bar{{ID: "late", Kind: Running, Procs: 3, Start: 0, End: 20}, {ID: "next", Kind: Pending, Procs: 2, Start: 10, End: 30}}
	ps, rows := layout(4, bars)
	if rows != 5 || !ps[1].overflow || ps[0].overflow {
		t.Fatalf("rows %d, overflow %v %v; want 5 rows and the second bar over", rows, ps[0].overflow, ps[1].overflow)
	}
}

// TestSVGIsWellFormedWithOneElementPerBar parses the SVG as XML and counts
// the elements carrying data-job and data-reservation.
func TestSVGIsWellFormedWithOneElementPerBar(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	bars := randomPlan(rng, 8, 30)
	bars = append(bars, Bar{ID: `<odd & "id">`, Kind: Pending, Procs: 1, Start: 300, End: 400, Label: "<b>"})
	c := Chart{Title: "t & <s>", Procs: 8, From: 0, To: 400, Now: 5, Clock: true, Bars: bars}
	var b bytes.Buffer
	if err := c.SVG(&b, 900); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&b)
	jobs, resv := map[string]int{}, map[string]int{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				switch a.Name.Local {
				case "data-job":
					jobs[a.Value]++
				case "data-reservation":
					resv[a.Value]++
				}
			}
		}
	}
	for _, bar := range bars {
		m := resv
		if bar.IsJob() {
			m = jobs
		}
		if m[bar.ID] != 1 {
			t.Errorf("bar %q (%s) appears %d times", bar.ID, bar.Kind, m[bar.ID])
		}
	}
	if len(jobs)+len(resv) != len(bars) {
		t.Errorf("%d elements for %d bars", len(jobs)+len(resv), len(bars))
	}
}

func TestTextHasOneLinePerBar(t *testing.T) {
	bars := []Bar{{ID: "a.1", Kind: Running, Procs: 4, Start: 0, End: 50, Label: "alice"},
		{ID: "a.2", Kind: Pending, Procs: 8, Start: 50, End: 100, Label: "bob"},
		{ID: "maint", Kind: Fixed, Procs: 8, Start: 100, End: 120, Label: "maintenance"}}
	var b bytes.Buffer
	if err := (Chart{Title: "a", Procs: 8, From: 0, To: 120, Now: 0, Bars: bars}).Text(&b, 24); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"a.1", "████", "a.2", "▓▓▓", "maint", "╳", "load"} {
		if !strings.Contains(out, want) {
			t.Errorf("text chart lacks %q:\n%s", want, out)
		}
	}
}
