package swf

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxLineLength is the longest line, in bytes without the line terminator,
// that Read accepts. Real SWF lines are about 100 bytes; the limit only
// bounds the memory a corrupt or hostile input can make the reader use.
// Longer job lines are malformed; longer comment lines are malformed too.
const MaxLineLength = 1 << 20

// NumFields is the number of whitespace-separated fields of an SWF job line.
const NumFields = 18

// Options controls reading.
type Options struct {
	// SkipMalformed, if true, makes Read skip malformed job lines and count
	// them in Trace.Skipped instead of failing with a *LineError. Use it for
	// traces known to contain a few broken lines.
	SkipMalformed bool
}

// Header is the information in the ';' comment lines of an SWF file. Only the
// fields the project needs are decoded; everything else stays available in
// Fields and Comments.
type Header struct {
	// MaxProcs and MaxNodes are the machine size from the "MaxProcs:" and
	// "MaxNodes:" lines; 0 when absent, unparsable or not positive.
	MaxProcs, MaxNodes int64
	// UnixStartTime is the epoch second that job submit times are relative
	// to ("UnixStartTime:"); 0 when absent or unparsable.
	UnixStartTime int64
	// TimeZoneString is the "TimeZoneString:" value, e.g. "Europe/Stockholm".
	TimeZoneString string
	// Partitions holds the value (text after the colon, trimmed) of every
	// "; Partition: ..." line in file order, e.g. "1 DEFAULT"; nil if none.
	Partitions []string
	// Fields maps the key of every "; Key: value" line, exactly as written,
	// to its value, trimmed. A key that occurs on several lines (Note,
	// Queue, Partition, ...) maps to its values joined by "\n". Indented
	// continuation lines are not key lines; they appear only in Comments.
	Fields map[string]string
	// Comments holds every header line in file order, without the leading
	// ';' and without surrounding white space (so empty ';' lines give "").
	Comments []string
}

// Procs returns the site size m_k that the trace was recorded on: MaxProcs,
// falling back to MaxNodes, 0 if neither is known.
func (h Header) Procs() int64 {
	if h.MaxProcs > 0 {
		return h.MaxProcs
	}
	if h.MaxNodes > 0 {
		return h.MaxNodes
	}
	return 0
}

// Trace is a parsed SWF file: its header and its jobs in file order.
type Trace struct {
	Name    string // file name (base name for ReadFile) or the name passed to Read
	Header  Header
	Jobs    []Job // in file order; Job.Line gives each one's line number
	Skipped int   // malformed lines skipped (only with Options.SkipMalformed)
}

// Sanitize applies the sanitisation rules to the trace's jobs for a site of
// opts.SiteProcs processors, or of t.Header.Procs() when opts.SiteProcs is
// 0. It is a convenience wrapper around the function Sanitize and leaves the
// trace unchanged.
func (t *Trace) Sanitize(opts SanitizeOptions) ([]Job, SanitizeReport) {
	m := opts.SiteProcs
	if m <= 0 {
		m = t.Header.Procs()
	}
	return Sanitize(t.Jobs, m, opts)
}

// Read parses an SWF trace from r. The input may be plain text or gzip
// compressed; compression is detected from the gzip magic bytes 0x1f 0x8b,
// not from the name. name is used as Trace.Name and in error messages.
//
// A malformed job line yields a *LineError (which wraps ErrMalformed) unless
// opts.SkipMalformed is set. I/O and decompression errors are returned
// wrapped. Read never panics, whatever the input.
func Read(r io.Reader, name string, opts Options) (*Trace, error) {
	return read(r, name, name, opts)
}

// ReadFile opens and parses the SWF file at path, gzip-compressed or plain.
// Trace.Name is the file's base name; error messages use the full path.
func ReadFile(path string, opts Options) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("swf: %w", err)
	}
	defer f.Close()
	return read(f, filepath.Base(path), path, opts)
}

// read is Read with separate names for the trace and for error messages.
func read(r io.Reader, name, file string, opts Options) (*Trace, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	src := br
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("swf: read %s: %w", file, err)
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("swf: read %s: gzip: %w", file, err)
		}
		defer zr.Close()
		src = bufio.NewReaderSize(zr, 64<<10)
	}

	t := &Trace{Name: name, Header: Header{Fields: make(map[string]string)}}
	lr := lineReader{r: src}
	for {
		line, tooLong, ok, err := lr.next()
		if err != nil {
			return nil, fmt.Errorf("swf: read %s: %w", file, err)
		}
		if !ok {
			break
		}
		if tooLong {
			if opts.SkipMalformed {
				t.Skipped++
				continue
			}
			return nil, &LineError{File: file, Line: lr.n,
				Err: fmt.Errorf("line longer than %d bytes", MaxLineLength)}
		}
		line = trimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] == ';' {
			t.Header.addLine(string(trimSpace(line[1:])))
			continue
		}
		job, err := parseJob(line)
		if err != nil {
			if opts.SkipMalformed {
				t.Skipped++
				continue
			}
			return nil, &LineError{File: file, Line: lr.n, Err: err}
		}
		job.Line = lr.n
		if t.Jobs == nil {
			t.Jobs = make([]Job, 0, t.Header.capacityHint())
		}
		t.Jobs = append(t.Jobs, job)
	}
	return t, nil
}

// lineReader yields lines of any length up to MaxLineLength from a
// bufio.Reader without allocating for lines that fit in its buffer.
type lineReader struct {
	r    *bufio.Reader
	long []byte // reassembly buffer for lines longer than r's buffer
	n    int    // number of the line last returned (1-based)
}

// next returns the next line without its "\n" or "\r\n" terminator. The
// slice is valid until the following call. ok is false at the end of the
// input; tooLong reports a line over MaxLineLength, whose content is dropped.
func (l *lineReader) next() (line []byte, tooLong, ok bool, err error) {
	l.long = l.long[:0]
	got := false
	for {
		frag, rerr := l.r.ReadSlice('\n')
		if len(frag) > 0 {
			got = true
		}
		if !tooLong {
			// +2 leaves room for the "\r\n" terminator.
			if len(l.long)+len(frag) > MaxLineLength+2 {
				tooLong = true
				l.long = l.long[:0]
			} else if errors.Is(rerr, bufio.ErrBufferFull) || len(l.long) > 0 {
				l.long = append(l.long, frag...)
			}
		}
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, false, false, rerr
		}
		if !got {
			return nil, false, false, nil
		}
		l.n++
		if len(l.long) > 0 {
			frag = l.long
		}
		if n := len(frag); n > 0 && frag[n-1] == '\n' {
			frag = frag[:n-1]
		}
		if n := len(frag); n > 0 && frag[n-1] == '\r' {
			frag = frag[:n-1]
		}
		if len(frag) > MaxLineLength {
			tooLong = true
		}
		if tooLong {
			return nil, true, true, nil
		}
		return frag, false, true, nil
	}
}

// isSpace reports whether c separates SWF fields: ASCII white space (' ',
// and '\t', '\n', '\v', '\f', '\r', which are 9 to 13).
func isSpace(c byte) bool {
	return c == ' ' || c-'\t' <= '\r'-'\t'
}

// trimSpace removes leading and trailing ASCII white space without copying.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// fieldNames name the 18 SWF fields in error messages.
var fieldNames = [NumFields]string{
	"job id", "submit time", "wait time", "run time", "allocated procs",
	"average cpu time", "used memory", "requested procs", "requested time",
	"requested memory", "status", "user id", "group id", "executable",
	"queue", "partition", "preceding job", "think time",
}

// parseJob parses one job line (already known not to be blank or a comment).
// Fields that are plain decimal integers (almost all) are read in the same
// pass that splits the line; any other field goes through parseNumber.
func parseJob(line []byte) (Job, error) {
	var v [NumFields]int64
	var ferr error // the first bad field, reported after the field count
	n := 0
	// line is consumed from the front: each round drops the white space and
	// the field before it, so indexes stay small and bounds checks few.
	for {
		k := 0
		for k < len(line) && isSpace(line[k]) {
			k++
		}
		line = line[k:]
		if len(line) == 0 {
			break
		}
		k = 0
		neg := line[0] == '-'
		if neg || line[0] == '+' {
			k = 1
		}
		var x int64
		d0 := k
		for k < len(line) {
			d := line[k] - '0'
			if d > 9 {
				break
			}
			x = x*10 + int64(d)
			k++
		}
		digits := k - d0
		simple := digits > 0 && digits <= 18 && (k == len(line) || isSpace(line[k]))
		if !simple {
			for k < len(line) && !isSpace(line[k]) {
				k++
			}
		}
		if n < NumFields && ferr == nil {
			if !simple {
				var err error
				if x, err = parseNumber(line[:k]); err != nil {
					ferr = fmt.Errorf("field %d (%s): %w", n+1, fieldNames[n], err)
				}
			} else if neg {
				x = -x
			}
			v[n] = x
		}
		n++
		line = line[k:]
	}
	if n != NumFields {
		return Job{}, fmt.Errorf("expected %d fields, got %d", NumFields, n)
	}
	if ferr != nil {
		return Job{}, ferr
	}
	return Job{
		ID: v[0], Submit: v[1], Wait: v[2], Runtime: v[3], AllocProcs: v[4],
		AvgCPU: v[5], UsedMem: v[6], ReqProcs: v[7], ReqTime: v[8], ReqMem: v[9],
		Status: v[10], User: v[11], Group: v[12], Executable: v[13],
		Queue: v[14], Partition: v[15], PrecedingJob: v[16], ThinkTime: v[17],
	}, nil
}

// parseNumber parses an SWF field: a decimal integer, or a decimal fraction
// or exponent form ("552.21", "1e3") rounded half away from zero to int64.
// Integers take an allocation-free fast path. Errors are *strconv.NumError.
func parseNumber(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, &strconv.NumError{Func: "ParseInt", Num: "", Err: strconv.ErrSyntax}
	}
	i := 0
	neg := false
	if b[0] == '-' || b[0] == '+' {
		neg = b[0] == '-'
		i = 1
	}
	if i < len(b) && len(b)-i <= 18 {
		// At most 18 digits cannot overflow int64.
		var x int64
		j := i
		for ; j < len(b); j++ {
			c := b[j]
			if c < '0' || c > '9' {
				break
			}
			x = x*10 + int64(c-'0')
		}
		if j == len(b) {
			if neg {
				x = -x
			}
			return x, nil
		}
	}
	// Slow path: long integers, decimals, exponents. Only digits, signs,
	// '.', 'e' and 'E' are allowed, which excludes "Inf", "NaN", hex floats
	// and underscores that strconv would otherwise accept.
	for _, c := range b {
		if (c < '0' || c > '9') && c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E' {
			return 0, &strconv.NumError{Func: "ParseInt", Num: string(b), Err: strconv.ErrSyntax}
		}
	}
	s := string(b)
	if x, err := strconv.ParseInt(s, 10, 64); err == nil {
		return x, nil
	} else if errors.Is(err, strconv.ErrRange) {
		return 0, err
	}
	fv, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	fv = math.Round(fv)
	if math.IsNaN(fv) || fv < math.MinInt64 || fv >= math.MaxInt64 {
		return 0, &strconv.NumError{Func: "ParseFloat", Num: s, Err: strconv.ErrRange}
	}
	return int64(fv), nil
}

// addLine records one header comment line (already stripped of ';' and
// surrounding space) and decodes the keys the project uses.
func (h *Header) addLine(text string) {
	h.Comments = append(h.Comments, text)
	key, val, ok := splitKeyValue(text)
	if !ok {
		return
	}
	if h.Fields == nil {
		h.Fields = make(map[string]string)
	}
	if prev, dup := h.Fields[key]; dup {
		h.Fields[key] = prev + "\n" + val
	} else {
		h.Fields[key] = val
	}
	switch strings.ToLower(key) {
	case "maxprocs":
		h.MaxProcs = positiveOrZero(val)
	case "maxnodes":
		h.MaxNodes = positiveOrZero(val)
	case "unixstarttime":
		if x, err := parseNumber([]byte(firstWord(val))); err == nil {
			h.UnixStartTime = x
		} else {
			h.UnixStartTime = 0
		}
	case "timezonestring":
		h.TimeZoneString = val
	case "partition":
		h.Partitions = append(h.Partitions, val)
	}
}

// maxCapacityHint bounds the job slice preallocated from the header, so
// that a corrupt "MaxRecords" cannot make Read allocate a huge slice up
// front; larger traces simply grow the slice as usual.
const maxCapacityHint = 1 << 16

// capacityHint is the number of jobs to preallocate room for: the header's
// MaxRecords (or MaxJobs) when present, bounded by maxCapacityHint. Sizing
// the slice once avoids most of the copying of repeated growth.
func (h *Header) capacityHint() int {
	n := positiveOrZero(h.Fields["MaxRecords"])
	if n == 0 {
		n = positiveOrZero(h.Fields["MaxJobs"])
	}
	switch {
	case n <= 0:
		return 1024
	case n > maxCapacityHint:
		return maxCapacityHint
	}
	return int(n)
}

// splitKeyValue splits "Key: value". The key must be a single word of
// letters, digits, '_' or '-', and the colon must be followed by white space
// or the end of the line, so that "http://..." continuation lines are not
// taken for keys.
func splitKeyValue(text string) (key, val string, ok bool) {
	i := strings.IndexByte(text, ':')
	if i <= 0 {
		return "", "", false
	}
	for _, c := range []byte(text[:i]) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return "", "", false
		}
	}
	if i+1 < len(text) && !isSpace(text[i+1]) {
		return "", "", false
	}
	return text[:i], strings.TrimSpace(text[i+1:]), true
}

// firstWord returns the first white-space-separated word of s.
func firstWord(s string) string {
	if i := strings.IndexAny(s, " \t\n\r\v\f"); i >= 0 {
		return s[:i]
	}
	return s
}

// positiveOrZero parses the first word of a header value as a count,
// returning 0 when it is unparsable or not positive.
func positiveOrZero(val string) int64 {
	x, err := parseNumber([]byte(firstWord(val)))
	if err != nil || x <= 0 {
		return 0
	}
	return x
}
