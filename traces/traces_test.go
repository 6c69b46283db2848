package traces_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/swf"
	"github.com/fedsched/fedsched/traces"
)

func TestNames(t *testing.T) {
	want := []string{traces.HPC2N, traces.KTH, traces.NASA, traces.Lublin, traces.CTC, traces.SDSC}
	slices.Sort(want)
	if got := traces.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
}

// TestOpenFirstJob opens every trace, checks that the stream is
// decompressed SWF text, and parses the first job line with package swf.
func TestOpenFirstJob(t *testing.T) {
	for _, name := range traces.Names() {
		t.Run(name, func(t *testing.T) {
			rc, err := traces.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			sc := bufio.NewScanner(rc)
			var first string
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				if line != "" && !strings.HasPrefix(line, ";") {
					first = sc.Text()
					break
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			tr, err := swf.Read(strings.NewReader(first), name, swf.Options{})
			if err != nil {
				t.Fatalf("first job line %q: %v", first, err)
			}
			if len(tr.Jobs) != 1 || tr.Jobs[0].ID < 1 || tr.Jobs[0].Procs() < 1 {
				t.Errorf("first job line %q parsed as %+v", first, tr.Jobs)
			}
			if err := rc.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// TestOpenWholeStream reads every trace to the end, which also verifies the
// gzip checksums of the embedded files.
func TestOpenWholeStream(t *testing.T) {
	for _, name := range traces.Names() {
		rc, err := traces.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n == 0 {
			t.Errorf("%s: read %d bytes, err %v", name, n, err)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, name := range traces.Names() {
		b, err := traces.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: not gzip data", name)
		}
		b[0] = 0 // a copy: must not affect later calls
		again, _ := traces.Bytes(name)
		if again[0] != 0x1f {
			t.Errorf("%s: Bytes returned shared memory", name)
		}
	}
	b, _ := traces.Bytes(traces.KTH)
	tr, err := swf.Read(bytes.NewReader(b), traces.KTH, swf.Options{})
	if err != nil {
		t.Fatalf("KTH via Bytes: %v", err)
	}
	if len(tr.Jobs) != 28476 {
		t.Errorf("KTH via Bytes: %d jobs, want 28476", len(tr.Jobs))
	}
}

func TestUnknownTrace(t *testing.T) {
	for _, name := range []string{"", ".", "nope.swf.gz", "KTH", "../traces/" + traces.KTH, "traces.go"} {
		if _, err := traces.Open(name); !errors.Is(err, traces.ErrUnknownTrace) {
			t.Errorf("Open(%q): err = %v, want ErrUnknownTrace", name, err)
		}
		if _, err := traces.Bytes(name); !errors.Is(err, traces.ErrUnknownTrace) {
			t.Errorf("Bytes(%q): err = %v, want ErrUnknownTrace", name, err)
		}
	}
}

// TestJobCounts pins the number of job lines package swf parses from each
// trace, so that a truncated or substituted file is caught.
func TestJobCounts(t *testing.T) {
	want := map[string]int{
		traces.KTH:    28476,
		traces.HPC2N:  3170,
		traces.NASA:   18239,
		traces.Lublin: 10000,
		traces.CTC:    77222,
		traces.SDSC:   59715,
	}
	for _, name := range traces.Names() {
		rc, err := traces.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := swf.Read(rc, name, swf.Options{})
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(tr.Jobs) != want[name] {
			t.Errorf("%s: %d jobs, want %d", name, len(tr.Jobs), want[name])
		}
	}
}
