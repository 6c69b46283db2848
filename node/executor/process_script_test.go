package executor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestProcessScriptAndOutputFiles: a script runs with its interpreter line
// (or sh without one) and its arguments; output and error go to the
// spec's files, one file when they name the same.
func TestProcessScriptAndOutputFiles(t *testing.T) {
	dir := t.TempDir()
	p := newProcess(t, dir, time.Second)
	run(t, p)
	work := t.TempDir()
	both := filepath.Join(work, "both.txt")
	for _, tc := range []struct {
		id     string
		script string
	}{
		{"with-shebang", "#!/bin/sh\necho out $1 $FEDSCHED_JOB_ID\necho err >&2\n"},
		{"without-shebang", "echo out $1 $FEDSCHED_JOB_ID\necho err >&2\n"},
	} {
		if err := p.Start(context.Background(), Spec{JobID: tc.id, Script: []byte(tc.script), Argv: []string{"arg"},
			Env: map[string]string{"FEDSCHED_JOB_ID": "origin.1"}, Workdir: work, Stdout: both, Stderr: both}); err != nil {
			t.Fatal(err)
		}
		if e := waitExit(t, p); e.ExitCode != 0 {
			t.Fatalf("%s: %+v", tc.id, e)
		}
		if b, err := os.ReadFile(both); err != nil || string(b) != "out arg origin.1\nerr\n" {
			t.Errorf("%s: output %q, %v", tc.id, b, err)
		}
	}
	sep := filepath.Join(work, "err.txt")
	if err := p.Start(context.Background(), Spec{JobID: "separate", Script: []byte("echo out; echo err >&2"), Stdout: both, Stderr: sep}); err != nil {
		t.Fatal(err)
	}
	waitExit(t, p)
	if b, _ := os.ReadFile(both); string(b) != "out\n" {
		t.Errorf("stdout %q", b)
	}
	if b, _ := os.ReadFile(sep); string(b) != "err\n" {
		t.Errorf("stderr %q", b)
	}
}
