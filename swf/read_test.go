package swf

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// gz compresses s, for tests of the gzip-transparent reader.
func gz(t testing.TB, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const sampleHeader = `; Version: 2.2
; Computer: IBM SP2
; Information: http://www.pdc.kth.se/
;              http://www.cs.huji.ac.il/labs/parallel/workload/
; UnixStartTime: 843480031
; TimeZoneString: Europe/Stockholm
; MaxNodes: 100
; MaxProcs: 128
; Note: first
; Note: second
; Partition:  1 DEFAULT 
; Partition:  2 ALL     
;
`

const line15 = "   15   599850 192180   3477    4     -1    -1    4  53940    -1  1  12  12  -1 -1 -1 -1 -1"

var job15 = Job{ID: 15, Submit: 599850, Wait: 192180, Runtime: 3477, AllocProcs: 4,
	AvgCPU: -1, UsedMem: -1, ReqProcs: 4, ReqTime: 53940, ReqMem: -1, Status: 1,
	User: 12, Group: 12, Executable: -1, Queue: -1, Partition: -1, PrecedingJob: -1,
	ThinkTime: -1}

func TestReadJobs(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Job
	}{
		{"empty", "", nil},
		{"only blank lines", "\n  \n\t\n", nil},
		{"plain integers", line15 + "\n", []Job{withLine(job15, 1)}},
		{"no final newline", line15, []Job{withLine(job15, 1)}},
		{"crlf", line15 + "\r\n" + line15 + "\r\n", []Job{withLine(job15, 1), withLine(job15, 2)}},
		{"tabs", strings.ReplaceAll(line15, "  ", "\t") + "\n", []Job{withLine(job15, 1)}},
		{"blank lines and header keep line numbers", "; a\n\n" + line15 + "\n\n" + line15 + "\n",
			[]Job{withLine(job15, 3), withLine(job15, 5)}},
		{"decimals rounded", "1 0 10 223 32 223.29 28672 32 1800 -1 1 8 1 -1 -1 1 -1 -1\n" +
			"2 0 10 223 32 552.5 28672.49 32 1800.51 -1 1 8 1 -1 -1 1 -1 -1\n" +
			"3 0 10 223 32 -0.4 -1.5 32 1e3 -1 1 8 1 -1 -1 1 -1 -1\n",
			[]Job{
				{ID: 1, Wait: 10, Runtime: 223, AllocProcs: 32, AvgCPU: 223, UsedMem: 28672, ReqProcs: 32, ReqTime: 1800, ReqMem: -1, Status: 1, User: 8, Group: 1, Executable: -1, Queue: -1, Partition: 1, PrecedingJob: -1, ThinkTime: -1, Line: 1},
				{ID: 2, Wait: 10, Runtime: 223, AllocProcs: 32, AvgCPU: 553, UsedMem: 28672, ReqProcs: 32, ReqTime: 1801, ReqMem: -1, Status: 1, User: 8, Group: 1, Executable: -1, Queue: -1, Partition: 1, PrecedingJob: -1, ThinkTime: -1, Line: 2},
				{ID: 3, Wait: 10, Runtime: 223, AllocProcs: 32, AvgCPU: 0, UsedMem: -2, ReqProcs: 32, ReqTime: 1000, ReqMem: -1, Status: 1, User: 8, Group: 1, Executable: -1, Queue: -1, Partition: 1, PrecedingJob: -1, ThinkTime: -1, Line: 3},
			}},
		{"all unknown", strings.Repeat("-1 ", 18) + "\n",
			[]Job{{ID: -1, Submit: -1, Wait: -1, Runtime: -1, AllocProcs: -1, AvgCPU: -1, UsedMem: -1, ReqProcs: -1, ReqTime: -1, ReqMem: -1, Status: -1, User: -1, Group: -1, Executable: -1, Queue: -1, Partition: -1, PrecedingJob: -1, ThinkTime: -1, Line: 1}}},
		{"large integers", "9223372036854775807 +5 -9223372036854775808 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
			[]Job{{ID: 9223372036854775807, Submit: 5, Wait: -9223372036854775808, Line: 1}}},
	}
	for _, tt := range tests {
		for _, compress := range []bool{false, true} {
			name := tt.name
			in := []byte(tt.in)
			if compress {
				name += "/gzip"
				in = gz(t, tt.in)
			}
			t.Run(name, func(t *testing.T) {
				tr, err := Read(bytes.NewReader(in), "x.swf", Options{})
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if tr.Name != "x.swf" {
					t.Errorf("Name = %q", tr.Name)
				}
				if !reflect.DeepEqual(tr.Jobs, tt.want) {
					t.Errorf("Jobs =\n%+v\nwant\n%+v", tr.Jobs, tt.want)
				}
				if tr.Skipped != 0 {
					t.Errorf("Skipped = %d", tr.Skipped)
				}
			})
		}
	}
}

func withLine(j Job, line int) Job {
	j.Line = line
	return j
}

func TestReadHeader(t *testing.T) {
	for _, compress := range []bool{false, true} {
		in := []byte(sampleHeader + line15 + "\n")
		if compress {
			in = gz(t, string(in))
		}
		tr, err := Read(bytes.NewReader(in), "h.swf", Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := tr.Header
		if h.MaxProcs != 128 || h.MaxNodes != 100 || h.Procs() != 128 {
			t.Errorf("MaxProcs, MaxNodes, Procs = %d, %d, %d", h.MaxProcs, h.MaxNodes, h.Procs())
		}
		if h.UnixStartTime != 843480031 {
			t.Errorf("UnixStartTime = %d", h.UnixStartTime)
		}
		if h.TimeZoneString != "Europe/Stockholm" {
			t.Errorf("TimeZoneString = %q", h.TimeZoneString)
		}
		if want := []string{"1 DEFAULT", "2 ALL"}; !reflect.DeepEqual(h.Partitions, want) {
			t.Errorf("Partitions = %q, want %q", h.Partitions, want)
		}
		wantFields := map[string]string{
			"Version": "2.2", "Computer": "IBM SP2", "Information": "http://www.pdc.kth.se/",
			"UnixStartTime": "843480031", "TimeZoneString": "Europe/Stockholm",
			"MaxNodes": "100", "MaxProcs": "128", "Note": "first\nsecond",
			"Partition": "1 DEFAULT\n2 ALL",
		}
		if !reflect.DeepEqual(h.Fields, wantFields) {
			t.Errorf("Fields = %q\nwant %q", h.Fields, wantFields)
		}
		if len(h.Comments) != 13 || h.Comments[3] != "http://www.cs.huji.ac.il/labs/parallel/workload/" || h.Comments[12] != "" {
			t.Errorf("Comments = %q", h.Comments)
		}
		if len(tr.Jobs) != 1 || tr.Jobs[0].Line != 14 {
			t.Errorf("Jobs = %+v", tr.Jobs)
		}
	}
}

func TestHeaderProcs(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"; MaxProcs: 100\n; MaxNodes: 50\n", 100},
		{"; MaxNodes: 50\n", 50},
		{"; MaxProcs: -1\n; MaxNodes: 50\n", 50},
		{"; MaxProcs: many\n", 0},
		{"; maxprocs: 7\n", 7},
		{"; Note: nothing\n", 0},
		{"", 0},
	}
	for _, tt := range tests {
		tr, err := Read(strings.NewReader(tt.in), "p", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.Header.Procs(); got != tt.want {
			t.Errorf("%q: Procs() = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestReadMalformed(t *testing.T) {
	good := line15 + "\n"
	tests := []struct {
		name    string
		bad     string // the malformed line, inserted as line 2
		msg     string // expected error message
		wantErr error  // additionally reachable with errors.Is, if not nil
	}{
		{"too few fields", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17",
			"KTH.swf:2: expected 18 fields, got 17", nil},
		{"too many fields", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",
			"KTH.swf:2: expected 18 fields, got 19", nil},
		{"not a number", "1 2 3 x 5 6 7 8 9 10 11 12 13 14 15 16 17 18",
			`KTH.swf:2: field 4 (run time): strconv.ParseInt: parsing "x": invalid syntax`, strconv.ErrSyntax},
		{"inf", "1 2 3 4 5 6 7 8 Inf 10 11 12 13 14 15 16 17 18",
			`KTH.swf:2: field 9 (requested time): strconv.ParseInt: parsing "Inf": invalid syntax`, strconv.ErrSyntax},
		{"nan", "1 2 3 4 5 6 7 8 NaN 10 11 12 13 14 15 16 17 18",
			`KTH.swf:2: field 9 (requested time): strconv.ParseInt: parsing "NaN": invalid syntax`, strconv.ErrSyntax},
		{"overflow", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 99999999999999999999",
			`KTH.swf:2: field 18 (think time): strconv.ParseInt: parsing "99999999999999999999": value out of range`, strconv.ErrRange},
		{"float overflow", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 1e19",
			`KTH.swf:2: field 18 (think time): strconv.ParseFloat: parsing "1e19": value out of range`, strconv.ErrRange},
		{"lone sign", "1 2 3 4 - 6 7 8 9 10 11 12 13 14 15 16 17 18",
			`KTH.swf:2: field 5 (allocated procs): strconv.ParseFloat: parsing "-": invalid syntax`, strconv.ErrSyntax},
		{"two dots", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 1.2.3 16 17 18",
			`KTH.swf:2: field 15 (queue): strconv.ParseFloat: parsing "1.2.3": invalid syntax`, strconv.ErrSyntax},
		{"too long", strings.Repeat("1", MaxLineLength+1),
			"KTH.swf:2: line longer than 1048576 bytes", nil},
	}
	for _, tt := range tests {
		in := good + tt.bad + "\n" + good
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(in), "KTH.swf", Options{})
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tt.msg {
				t.Errorf("message = %q\nwant      %q", err.Error(), tt.msg)
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %T is not a *LineError", err)
			}
			if le.File != "KTH.swf" || le.Line != 2 {
				t.Errorf("LineError = %+v", le)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Error("error does not wrap ErrMalformed")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error does not wrap %v", tt.wantErr)
			}

			tr, err := Read(strings.NewReader(in), "KTH.swf", Options{SkipMalformed: true})
			if err != nil {
				t.Fatalf("SkipMalformed: %v", err)
			}
			if tr.Skipped != 1 || len(tr.Jobs) != 2 || tr.Jobs[0].Line != 1 || tr.Jobs[1].Line != 3 {
				t.Errorf("SkipMalformed: Skipped %d, jobs %+v", tr.Skipped, tr.Jobs)
			}
		})
	}
}

func TestLongLines(t *testing.T) {
	// A valid job line padded past the reader's buffer but within the limit
	// must still parse, and a header line of exactly the limit is accepted.
	padded := strings.Replace(line15, " ", strings.Repeat(" ", 200<<10), 1)
	hdr := "; Note: " + strings.Repeat("x", MaxLineLength-8)
	in := padded + "\n" + hdr + "\n" + line15
	tr, err := Read(strings.NewReader(in), "long", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != 2 || tr.Jobs[0] != withLine(job15, 1) || tr.Jobs[1] != withLine(job15, 3) {
		t.Errorf("Jobs = %+v", tr.Jobs)
	}
	if len(tr.Header.Fields["Note"]) != MaxLineLength-8 {
		t.Errorf("Note has %d bytes", len(tr.Header.Fields["Note"]))
	}
}

func TestReadCorruptGzip(t *testing.T) {
	z := gz(t, sampleHeader+line15+"\n")
	tests := []struct {
		name string
		in   []byte
	}{
		{"truncated", z[:len(z)/2]},
		{"bad header", append([]byte{0x1f, 0x8b, 0xff}, z[3:]...)},
		{"magic only", []byte{0x1f, 0x8b}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.in), "c.swf.gz", Options{SkipMalformed: true})
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrMalformed) {
				t.Errorf("corrupt compression reported as malformed line: %v", err)
			}
			if !strings.Contains(err.Error(), "c.swf.gz") {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.swf")
	packed := filepath.Join(dir, "packed.swf.gz")
	// The gzip file is deliberately named without .gz too: detection is by
	// content, not by name.
	misnamed := filepath.Join(dir, "misnamed.swf")
	content := sampleHeader + line15 + "\n"
	for path, data := range map[string][]byte{plain: []byte(content), packed: gz(t, content), misnamed: gz(t, content)} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{plain, packed, misnamed} {
		tr, err := ReadFile(path, Options{})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if tr.Name != filepath.Base(path) || len(tr.Jobs) != 1 || tr.Header.MaxProcs != 128 {
			t.Errorf("%s: Name %q, %d jobs, MaxProcs %d", path, tr.Name, len(tr.Jobs), tr.Header.MaxProcs)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.swf"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad.swf")
	if err := os.WriteFile(bad, []byte("1 2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(bad, Options{})
	var le *LineError
	if !errors.As(err, &le) || le.File != bad || le.Line != 1 {
		t.Errorf("bad file: err = %v", err)
	}
}

func TestParseNumber(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-1", -1, true}, {"+7", 7, true}, {"007", 7, true},
		{"552.21", 552, true}, {"552.5", 553, true}, {"-552.5", -553, true},
		{".5", 1, true}, {"5.", 5, true}, {"1E2", 100, true}, {"2.5e-1", 0, true},
		{"123456789012345678", 123456789012345678, true},
		{"1234567890123456789", 1234567890123456789, true},
		{"-9223372036854775808", -9223372036854775808, true},
		{"9223372036854775808", 0, false},
		{"", 0, false}, {"-", 0, false}, {"+", 0, false}, {"1-", 0, false},
		{"0x10", 0, false}, {"1_000", 0, false}, {"inf", 0, false}, {"1e400", 0, false},
		{"9.3e18", 0, false}, {"-9.3e18", 0, false},
	}
	for _, tt := range tests {
		got, err := parseNumber([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseNumber(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestLineErrorUnwrap(t *testing.T) {
	e := &LineError{File: "f", Line: 3}
	if !errors.Is(e, ErrMalformed) || e.Error() != "f:3: malformed job line" {
		t.Errorf("nil Err: Is=%v, msg %q", errors.Is(e, ErrMalformed), e.Error())
	}
}
