package store

import (
	"bytes"
	"testing"
)

// FuzzLogRecord feeds arbitrary bytes to the log's decoders: the frame
// decoder, the payload decoder and readLog over a segment holding them.
// None may panic; a payload the decoder accepts must encode back to a
// payload that decodes to the same encoding (what a checkpoint writes is
// what was logged), and a frame it accepts must hold its sequence number
// and payload as appendFrame wrote them.
func FuzzLogRecord(f *testing.F) {
	first, rest, _, _ := workload()
	for i, c := range append(first, rest...) {
		e, err := encodeChanges(c)
		if err != nil {
			f.Fatal(err)
		}
		p := e.appendTo(nil)
		f.Add(p)
		f.Add(appendFrame(nil, uint64(i+1), p))
		f.Add(appendFrame(appendFrame(nil, 1, p), 2, p))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		if seq, payload, size, err := decodeFrame(b); err == nil {
			if again := appendFrame(nil, seq, payload); !bytes.Equal(again, b[:size]) {
				t.Fatalf("frame %x re-encodes as %x", b[:size], again)
			}
		}
		if e, err := decodeEncChanges(b); err == nil {
			enc := e.appendTo(nil)
			e2, err := decodeEncChanges(enc)
			if err != nil {
				t.Fatalf("re-encoded payload does not decode: %v", err)
			}
			if !bytes.Equal(e2.appendTo(nil), enc) {
				t.Fatal("payload does not round-trip")
			}
		}
		var scan logScan
		scan.scan(b, "fuzz", 0) //nolint:errcheck // must not panic
	})
}
