package node

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// updateGolden rewrites the differential tests' recorded baselines
// (node/testdata/*.golden) from this run instead of comparing with them.
var updateGolden = flag.Bool("update", false, "rewrite node/testdata/*.golden from this run")

// transcript is what a differential test observed of a node (replies,
// records, statistics, wake times), line by line, to compare with the
// baseline recorded in node/testdata/<name>.golden. The baselines were
// recorded from the node's own core, before it was deleted (see
// docs/architecture.md); -update records them again from this run.
type transcript struct {
	b    strings.Builder
	prev map[string]bool // lines of the last delta's text
}

// add appends a line (or several) to the transcript.
func (s *transcript) add(format string, args ...any) {
	fmt.Fprintf(&s.b, format, args...)
	if !strings.HasSuffix(format, "\n") {
		s.b.WriteByte('\n')
	}
}

// delta appends, under head, the lines of text that the last delta's text
// did not have (+) and those it had that text has not (-), in text's
// order and then the removed ones sorted: the whole of text can be read
// back from the deltas, without repeating what did not change.
func (s *transcript) delta(head, text string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	now := make(map[string]bool, len(lines))
	var b strings.Builder
	for _, l := range lines {
		now[l] = true
		if !s.prev[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	var gone []string
	for l := range s.prev {
		if !now[l] {
			gone = append(gone, l)
		}
	}
	slices.Sort(gone)
	for _, l := range gone {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	s.prev = now
	if b.Len() > 0 {
		s.add("%s\n%s", head, b.String())
	}
}

// stable is m as compact JSON: its text does not change between builds
// (prototext's and protojson's spacing does, on purpose).
func stable(m proto.Message) string {
	b, err := protojson.Marshal(m)
	if err != nil {
		return "marshal: " + err.Error()
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return "compact: " + err.Error()
	}
	return c.String()
}

// check compares the transcript with node/testdata/<name>.golden (or
// writes it there with -update) and fails the test at the first line
// that differs.
func (s *transcript) check(t *testing.T, name string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got := s.b.String()
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d lines)", path, strings.Count(got, "\n"))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the recorded baseline: %v (go test ./node -run %s -update records it)", err, t.Name())
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			// The nearest head line above names the op or step.
			var head string
			for k := i; k >= 0; k-- {
				if !strings.HasPrefix(wl[k], "+ ") && !strings.HasPrefix(wl[k], "- ") {
					head = wl[k]
					break
				}
			}
			if head == wl[i] {
				head = ""
			} else {
				head = fmt.Sprintf(" (under %q)", head)
			}
			t.Fatalf("%s, line %d%s:\nrecorded %s\nthis run %s", path, i+1, head, wl[i], gl[i])
		}
	}
	t.Fatalf("%s: recorded %d lines, this run %d", path, len(wl), len(gl))
}
