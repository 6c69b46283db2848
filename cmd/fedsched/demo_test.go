package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemo runs `fedsched demo` in-process with a small replay and checks
// its summary table and that it leaves no temporary directory behind.
func TestDemo(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp) // os.MkdirTemp("", ...) makes the demo's directory here
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs([]string{"demo", "--jobs", "60", "--time-scale", "400", "--seed", "3"})
	root.SetOut(&out)
	root.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	began := time.Now()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	t.Logf("demo took %v:\n%s", time.Since(began).Round(time.Millisecond), out.String())
	text := out.String()
	var header string
	rows := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "site" {
			header = line
		}
		rows[f[0]] = len(f) == 8 // a name and seven numbers
	}
	for _, col := range []string{"accepted", "overbooked", "delegated in", "delegated out", "met", "violated", "gain"} {
		if !strings.Contains(header, col) {
			t.Errorf("summary header %q lacks %q", header, col)
		}
	}
	for _, row := range []string{"alpha", "beta", "gamma", "total"} {
		if !rows[row] {
			t.Errorf("no summary row for %s", row)
		}
	}
	if !strings.Contains(text, "60 jobs submitted") {
		t.Errorf("no totals line")
	}
	// Not a terminal: plain progress lines on stderr.
	if !strings.Contains(errOut.String(), "demo: ") {
		t.Errorf("no progress lines on stderr: %q", errOut.String())
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
}

func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{{"--jobs", "5"}, {"--time-scale", "0"}, {"extra"}} {
		root := newRootCmd()
		root.SetArgs(append([]string{"demo"}, args...))
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.HasPrefix(errorLine(err), "InvalidArgument:") {
			t.Errorf("demo %v: %v", args, err)
		}
	}
}
