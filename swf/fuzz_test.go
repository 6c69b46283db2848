package swf

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzRead checks that Read never panics and that its result is consistent:
// either an error or a Trace, never both; a failure without SkipMalformed is
// a *LineError or an I/O/decompression error; with SkipMalformed no
// *LineError occurs at all.
func FuzzRead(f *testing.F) {
	seeds := []string{
		"",
		"\n",
		line15 + "\n",
		sampleHeader + line15 + "\n",
		"; MaxProcs: 100\n; MaxRecords: 99999999999\n1 0 10 223 32 223.29 28672 32 1800 -1 1 8 1 -1 -1 1 -1 -1\n",
		"1 2 3\n",
		"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 1e19\n",
		"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 NaN\r\n",
		"; Key:\n;:\n; :x\n;Note: a\n; Note: b\n",
		"\x1f\x8b",
	}
	for _, s := range seeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Add(gz(f, sampleHeader+line15+"\n"), false)
	f.Add(gz(f, "1 2 3\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		tr, err := Read(bytes.NewReader(data), "fuzz", Options{SkipMalformed: skip})
		if (tr == nil) == (err == nil) {
			t.Fatalf("tr = %v, err = %v: want exactly one", tr, err)
		}
		var le *LineError
		if err != nil {
			if errors.As(err, &le) {
				if skip {
					t.Fatalf("LineError with SkipMalformed: %v", err)
				}
				if !errors.Is(err, ErrMalformed) || le.Line < 1 || le.File != "fuzz" {
					t.Fatalf("bad LineError %+v", le)
				}
			}
			return
		}
		if !skip && tr.Skipped != 0 {
			t.Fatalf("Skipped = %d without SkipMalformed", tr.Skipped)
		}
		prev := 0
		for _, j := range tr.Jobs {
			if j.Line <= prev {
				t.Fatalf("line numbers not increasing: %d after %d", j.Line, prev)
			}
			prev = j.Line
		}
		// Sanitising whatever was read must not panic either.
		Sanitize(tr.Jobs, tr.Header.Procs(), DefaultSanitizeOptions())
	})
}

// FuzzSanitize checks the sanitiser's guarantees on arbitrary jobs: it never
// panics, leaves its input alone, accounts for every job, and every job it
// returns is valid and in submit order.
func FuzzSanitize(f *testing.F) {
	f.Add(int64(0), int64(100), int64(4), int64(4), int64(200), int64(1), int64(10), int64(0), false, true)
	f.Add(int64(5), int64(-1), int64(-1), int64(4), int64(-1), int64(0), int64(10), int64(0), true, false)
	f.Add(int64(9), int64(300), int64(11), int64(8), int64(200), int64(1), int64(0), int64(10), true, true)
	f.Fuzz(func(t *testing.T, submit, runtime, alloc, req, reqTime, status, site, optSite int64, drop, requireEst bool) {
		// Three jobs derived from the fuzzed one so that sorting matters.
		in := []Job{
			{ID: 1, Submit: submit, Runtime: runtime, AllocProcs: alloc, ReqProcs: req, ReqTime: reqTime, Status: status},
			{ID: 2, Submit: submit / 2, Runtime: reqTime, AllocProcs: req, ReqProcs: alloc, ReqTime: runtime, Status: 1},
			{ID: 3, Submit: -submit, Runtime: runtime, AllocProcs: -1, ReqProcs: req, ReqTime: reqTime, Status: status},
		}
		orig := append([]Job(nil), in...)
		opts := SanitizeOptions{SiteProcs: optSite, RequireEstimate: requireEst}
		if drop {
			opts.Rule4 = Rule4Drop
		}
		out, rep := Sanitize(in, site, opts)
		for i := range in {
			if in[i] != orig[i] {
				t.Fatalf("input modified")
			}
		}
		if rep.In != len(in) || rep.Out != len(out) || rep.In != rep.Out+rep.Dropped() {
			t.Fatalf("report does not add up: %+v, %d out", rep, len(out))
		}
		m := site
		if m <= 0 {
			m = optSite
		}
		for i, j := range out {
			if j.Procs() < 1 || (m > 0 && j.Procs() > m) || j.Runtime <= 0 {
				t.Fatalf("invalid job kept: %+v (m=%d)", j, m)
			}
			if j.ReqTime > 0 && j.Runtime > j.ReqTime {
				t.Fatalf("job ran past its estimate: %+v", j)
			}
			if requireEst && j.ReqTime <= 0 {
				t.Fatalf("job without estimate kept: %+v", j)
			}
			if i > 0 && j.Submit < out[i-1].Submit {
				t.Fatalf("output not sorted")
			}
		}
	})
}

// FuzzWriteReadsBack: whatever jobs and header line Write takes, Read
// reads back the same jobs (Line aside) and the header line (trimmed, as
// Read keeps comments); a header line Write refuses spans lines.
func FuzzWriteReadsBack(f *testing.F) {
	f.Add("MaxProcs: 64", int64(1), int64(0), int64(5), int64(100), int64(4), int64(-1), int64(-1), int64(4), int64(600), int64(-1),
		int64(1), int64(3), int64(1), int64(7), int64(1), int64(-1), int64(-1), int64(-1))
	f.Add("", int64(-1<<63), int64(1<<63-1), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0),
		int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Add(" two\nlines", int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0),
		int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, header string, id, submit, wait, runtime, alloc, avgCPU, usedMem, reqProcs, reqTime, reqMem,
		status, user, group, exe, queue, part, prec, think int64) {
		j := Job{ID: id, Submit: submit, Wait: wait, Runtime: runtime, AllocProcs: alloc, AvgCPU: avgCPU, UsedMem: usedMem,
			ReqProcs: reqProcs, ReqTime: reqTime, ReqMem: reqMem, Status: status, User: user, Group: group, Executable: exe,
			Queue: queue, Partition: part, PrecedingJob: prec, ThinkTime: think}
		var b bytes.Buffer
		err := Write(&b, []string{header}, []Job{j, j})
		if strings.ContainsAny(header, "\r\n") {
			if err == nil {
				t.Fatalf("header %q spanning lines written", header)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		tr, err := Read(&b, "fuzz", Options{})
		if err != nil {
			t.Fatalf("%v reading back:\n%s", err, b.String())
		}
		if len(tr.Jobs) != 2 {
			t.Fatalf("%d jobs read back, want 2", len(tr.Jobs))
		}
		for _, got := range tr.Jobs {
			got.Line = 0
			if got != j {
				t.Fatalf("read %+v, wrote %+v", got, j)
			}
		}
		if want := string(trimSpace([]byte(header))); len(tr.Header.Comments) != 1 || tr.Header.Comments[0] != want {
			t.Fatalf("header read back as %q, want [%q]", tr.Header.Comments, want)
		}
	})
}
