package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

func TestParseDirectives(t *testing.T) {
	for name, tc := range map[string]struct {
		script string
		want   []string
		err    string
	}{
		"top lines":       {"#!/bin/sh\n#FEDSCHED --procs 4 --estimate 1h\n#FEDSCHED --app wave\necho hi\n", []string{"--procs", "4", "--estimate", "1h", "--app", "wave"}, ""},
		"comments blanks": {"#!/bin/bash\n\n# a comment\n#FEDSCHED --procs 2\n\n#SBATCH -N 1\n#FEDSCHED --env 'A=x y'\n", []string{"--procs", "2", "--env", "A=x y"}, ""},
		"stop at command": {"#FEDSCHED --procs 2\necho\n#FEDSCHED --procs 9\n", []string{"--procs", "2"}, ""},
		"quotes":          {`#FEDSCHED --env "B=a \"q\" b" --env C=d\ e` + "\n", []string{"--env", `B=a "q" b`, "--env", "C=d e"}, ""},
		"trailing note":   {"#FEDSCHED --procs 4 # four of them\n", []string{"--procs", "4"}, ""},
		"not ours":        {"#FEDSCHEDULE --procs 4\n#FEDSCHED\n", nil, ""},
		"no shebang":      {"#FEDSCHED --procs 1\n", []string{"--procs", "1"}, ""},
		"unterminated":    {"#FEDSCHED --env 'A=1\n", nil, "line 1: unterminated ' quote"},
		"backslash end":   {"#!/bin/sh\n#FEDSCHED --app x\\\n", nil, "line 2: trailing backslash"},
		"empty":           {"", nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseDirectives([]byte(tc.script))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func FuzzParseDirectives(f *testing.F) {
	f.Add([]byte("#!/bin/sh\n#FEDSCHED --procs 4 --estimate 1h\necho\n"))
	f.Add([]byte("#FEDSCHED --env 'A=x y' \"q\\\"\" # c\n"))
	f.Add([]byte("#FEDSCHED \\"))
	f.Fuzz(func(t *testing.T, script []byte) {
		args, err := parseDirectives(script)
		if err != nil {
			return
		}
		// Only #FEDSCHED lines contribute: a script without the prefix
		// has no directives.
		if len(args) > 0 && !strings.Contains(string(script), directivePrefix) {
			t.Fatalf("directives %q from a script without %s", args, directivePrefix)
		}
	})
}

// TestSubmitScript: `fedsched submit job.sh` sends the script with the
// options of its #FEDSCHED lines, the command line winning, the script's
// arguments as the command, and the submit directory as working directory.
func TestSubmitScript(t *testing.T) {
	f := newFakeSite()
	addr := serve(t, f)
	dir := t.TempDir()
	script := "#!/bin/sh\n#FEDSCHED --procs 4 --estimate 1h\n#FEDSCHED --app wave --env A=1 --env B=2\n#FEDSCHED --output out-%j.txt\necho $1\n"
	path := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	mustRun(t, "submit", "--addr", addr, "--user", "u", "--procs", "2", "--env", "C=3", "job.sh", "arg1")
	spec := f.lastSpec()
	if spec.GetProcs() != 2 || spec.GetEstimateSeconds() != 3600 || spec.GetApp() != "wave" || spec.GetOutput() != "out-%j.txt" {
		t.Errorf("spec %v: want procs 2 (command line), estimate 1h, app wave, output from the script", spec)
	}
	if string(spec.GetScript()) != script || !reflect.DeepEqual(spec.GetCommand(), []string{"arg1"}) {
		t.Errorf("script %q command %q", spec.GetScript(), spec.GetCommand())
	}
	if env := spec.GetEnv(); env["C"] != "3" || env["A"] != "" {
		t.Errorf("env %v: the command line's --env replaces the script's", env)
	}
	if wd, _ := os.Getwd(); spec.GetWorkdir() != wd {
		t.Errorf("workdir %q, want the submit directory %q", spec.GetWorkdir(), wd)
	}
	// Options that are not the job's are refused in a script.
	bad := filepath.Join(dir, "bad.sh")
	os.WriteFile(bad, []byte("#FEDSCHED --addr x:1\n"), 0o644) //nolint:errcheck // checked by the run
	if _, err := run(t, "submit", "--addr", addr, "--user", "u", bad); err == nil || !strings.Contains(err.Error(), "--addr") {
		t.Errorf("a script with --addr: %v, want an error naming it", err)
	}
	if _, err := run(t, "submit", "--addr", addr, "--user", "u", filepath.Join(dir, "missing.sh")); err == nil {
		t.Error("a missing script was accepted")
	}
}

func (f *fakeSite) lastSpec() *fedschedv1.JobSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.submits[len(f.submits)-1].GetSpec()
}
