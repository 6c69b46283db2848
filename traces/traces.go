// Package traces embeds the real workload traces the project replays: job
// logs from the Parallel Workloads Archive in Standard Workload Format,
// gzip-compressed and otherwise unchanged.
//
// They are embedded (rather than read from a path or downloaded) so that the
// tests, the benchmarks and the demo work on a fresh clone, offline, with no
// setup step and no dependence on the working directory. The compressed files
// add well under a megabyte to the binary.
//
// The package is a leaf: it imports nothing from the project. Parse the
// streams it returns with package swf. See README.md in this directory for
// the machines, job counts and the acknowledgements each trace requires.
package traces

import (
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
)

// Names of the embedded traces, as they appear in the Parallel Workloads
// Archive. Pass them to Open or Bytes.
const (
	// KTH is the cleaned log of the 100-processor IBM SP2 at KTH Stockholm,
	// Sep 1996 - Aug 1997 (EASY scheduler); it has runtime estimates.
	KTH = "KTH-SP2-1996-2.1-cln.swf.gz"
	// HPC2N is a 3,170-job excerpt of the log of the 240-processor Linux
	// cluster "Seth" at HPC2N Umeå (Maui scheduler); it has runtime estimates.
	HPC2N = "HPC2N-2002-2.2-sample.swf.gz"
	// NASA is the cleaned log of the 128-node Intel iPSC/860 at NASA Ames,
	// Oct - Dec 1993; it has no runtime estimates.
	NASA = "NASA-iPSC-1993-3.1-cln.swf.gz"
	// Lublin is a synthetic 10,000-job trace for 256 processors from the
	// Lublin-Feitelson workload model; it has no runtime estimates.
	Lublin = "lublin_256.swf.gz"
	// CTC is the cleaned log of the IBM SP2 at the Cornell Theory Center,
	// Jun 1996 - May 1997 (EASY scheduler); it has runtime estimates. Its
	// header says 338 processors (the batch partition); the federation study
	// (CTC96) runs it as a site of 430.
	CTC = "CTC-SP2-1996-3.1-cln.swf.gz"
	// SDSC is the cleaned log of the 128-processor IBM SP2 at the San Diego
	// Supercomputer Center, Apr 1998 - Apr 2000; it has runtime estimates.
	// The federation study calls it SDSC00.
	SDSC = "SDSC-SP2-1998-4.2-cln.swf.gz"
)

// ErrUnknownTrace is returned (wrapped) by Open and Bytes when the name is not
// one of the embedded traces, so callers can tell a typo from an I/O error.
var ErrUnknownTrace = errors.New("traces: unknown trace")

//go:embed *.swf.gz
var files embed.FS

// Names returns the names of all embedded traces, sorted, so that callers can
// iterate over every trace (e.g. in tests) without hard-coding the list.
func Names() []string {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		// The embedded root directory always exists; this cannot happen.
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// Bytes returns the raw gzip-compressed bytes of the named trace, for callers
// that want to decompress themselves or write the file out unchanged. The
// returned slice is a fresh copy and may be modified.
func Bytes(name string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	b, err := files.ReadFile(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %q", ErrUnknownTrace, name)
		}
		return nil, fmt.Errorf("traces: read %s: %w", name, err)
	}
	return b, nil
}

// Open returns the decompressed SWF text of the named trace as a stream. The
// caller must Close it. Unknown names yield an error wrapping ErrUnknownTrace.
func Open(name string) (io.ReadCloser, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := files.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %q", ErrUnknownTrace, name)
		}
		return nil, fmt.Errorf("traces: open %s: %w", name, err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("traces: open %s: %w", name, err)
	}
	return &gzipFile{Reader: zr, f: f}, nil
}

// gzipFile closes both the gzip reader and the embedded file beneath it.
type gzipFile struct {
	*gzip.Reader
	f fs.File
}

// Close releases the decompressor and the embedded file.
func (g *gzipFile) Close() error {
	zerr := g.Reader.Close()
	ferr := g.f.Close()
	return errors.Join(zerr, ferr)
}

// checkName rejects names that are not embedded traces before touching the
// embedded file system, which would otherwise also accept "." as a name.
func checkName(name string) error {
	if !slices.Contains(Names(), name) {
		return fmt.Errorf("%w: %q", ErrUnknownTrace, name)
	}
	return nil
}
