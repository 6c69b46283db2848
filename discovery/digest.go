package discovery

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// ProtocolVersion is the version of the federation protocol this code
// speaks. New and Update put it into a local digest whose Version is zero.
const ProtocolVersion uint8 = 1

// Limits on the fields of a Digest. Digest.Validate enforces them, and they
// bound the encoded size by MaxDigestSize.
const (
	// MaxSiteLen is the longest site id, in bytes.
	MaxSiteLen = 64
	// MaxAddrLen is the longest gRPC address, in bytes.
	MaxAddrLen = 128
	// MaxPolicyLen is the longest policy name, in bytes.
	MaxPolicyLen = 32
)

// MaxDigestSize is the largest encoding of a valid digest, in bytes: the
// encoding of a digest whose strings are as long as the limits allow and
// whose numbers are as large as int32 and int64 allow. It is about half of
// memberlist's 512-byte limit on node metadata (memberlist.MetaMaxSize).
const MaxDigestSize = 3 + // encoding version, Version, flags
	(1 + MaxSiteLen) + (2 + MaxAddrLen) + (1 + MaxPolicyLen) + // length-prefixed strings
	5*binary.MaxVarintLen32 + // Procs and the four free-capacity figures
	9 // Updated: a non-negative int64 needs at most 9 varint bytes

// digestEncoding is the first byte of every encoded digest: the layout of
// the bytes that follow. Any change to the layout gets a new value.
const digestEncoding = 1

// Bits of the flags byte. The other bits are reserved and must be zero in
// encoding 1.
const (
	flagOverbooking = 1 << 0
	flagLeaving     = 1 << 1
	knownFlags      = flagOverbooking | flagLeaving
)

// Digest is the capability digest a site gossips as its memberlist node
// metadata: who it is, where its gRPC API listens, how large it is, and a
// coarse outlook of its free processors. It is a hint for choosing which
// peers to ask for a quote, never a promise: a site never delegates on a
// digest alone.
//
// A Digest is a plain value; the zero value is not valid (see Validate).
type Digest struct {
	// Version is the federation protocol version the site speaks
	// (ProtocolVersion for this code). It must be at least 1.
	Version uint8

	// Site is the site id, equal to the site's memberlist node name.
	// 1 to MaxSiteLen bytes of UTF-8 without control characters.
	Site string

	// Addr is the site's gRPC address as host:port, at most MaxAddrLen
	// bytes. Peers dial it for quotes, delegation and Confirm probes.
	Addr string

	// Procs is the number of processors of the site, at least 0.
	Procs int32

	// Policy names the site's queue policy (for example "easy" or
	// "conservative"), at most MaxPolicyLen bytes; it may be empty.
	Policy string

	// FreeNow, Free1h, Free4h and Free24h are a coarse outlook of the
	// processors free now and 1, 4 and 24 hours from now, as the site's plan
	// sees them. Each is between 0 and Procs; the site clamps.
	FreeNow, Free1h, Free4h, Free24h int32

	// Overbooking reports whether the site's admission test may overbook.
	Overbooking bool

	// Leaving reports that the site is leaving the federation: peers stop
	// asking it for quotes, and when gossip then reports it gone they know
	// it Left rather than died. Membership.Leave sets it; the value the
	// local digest function returns is ignored.
	Leaving bool

	// Updated is when the site last changed its digest, in Unix seconds,
	// at least 0. Update fills it in if the site leaves it zero.
	Updated int64
}

// Validate returns an error wrapping ErrInvalidDigest if a field of d is
// outside its documented limits.
func (d Digest) Validate() error {
	if d.Version == 0 {
		return fmt.Errorf("%w: version 0", ErrInvalidDigest)
	}
	if err := checkText("site", d.Site, 1, MaxSiteLen); err != nil {
		return err
	}
	if err := checkText("addr", d.Addr, 1, MaxAddrLen); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(d.Addr)
	if err != nil {
		return fmt.Errorf("%w: addr %q: %w", ErrInvalidDigest, d.Addr, err)
	}
	if host == "" {
		return fmt.Errorf("%w: addr %q has no host", ErrInvalidDigest, d.Addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("%w: addr %q: port must be 1 to 65535", ErrInvalidDigest, d.Addr)
	}
	if err := checkText("policy", d.Policy, 0, MaxPolicyLen); err != nil {
		return err
	}
	if d.Procs < 0 {
		return fmt.Errorf("%w: procs %d < 0", ErrInvalidDigest, d.Procs)
	}
	for _, f := range []struct {
		name string
		v    int32
	}{{"free now", d.FreeNow}, {"free 1h", d.Free1h}, {"free 4h", d.Free4h}, {"free 24h", d.Free24h}} {
		if f.v < 0 || f.v > d.Procs {
			return fmt.Errorf("%w: %s %d outside [0, procs %d]", ErrInvalidDigest, f.name, f.v, d.Procs)
		}
	}
	if d.Updated < 0 {
		return fmt.Errorf("%w: updated %d < 0", ErrInvalidDigest, d.Updated)
	}
	return nil
}

// checkText checks a string field's length and characters.
func checkText(field, s string, minLen, maxLen int) error {
	if len(s) < minLen || len(s) > maxLen {
		return fmt.Errorf("%w: %s is %d bytes, want %d to %d", ErrInvalidDigest, field, len(s), minLen, maxLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidDigest, field)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s %q has a control character", ErrInvalidDigest, field, s)
		}
	}
	return nil
}

// AppendBinary appends the encoding of d to b and returns the extended
// slice. It returns an error wrapping ErrInvalidDigest, and b unchanged, if d
// is not valid.
//
// The encoding (version 1) is: one byte of encoding version (1), one byte of
// Version, one byte of flags (bit 0: Overbooking, bit 1: Leaving; the others
// zero), then
// Site, Addr and Policy, each as a uvarint length and its bytes, then Procs,
// FreeNow, Free1h, Free4h, Free24h and Updated as uvarints. Every varint is
// in its shortest form, so equal digests have equal encodings. The result
// is at most MaxDigestSize bytes.
func (d Digest) AppendBinary(b []byte) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return b, err
	}
	var flags byte
	if d.Overbooking {
		flags |= flagOverbooking
	}
	if d.Leaving {
		flags |= flagLeaving
	}
	b = append(b, digestEncoding, d.Version, flags)
	for _, s := range []string{d.Site, d.Addr, d.Policy} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, v := range []int32{d.Procs, d.FreeNow, d.Free1h, d.Free4h, d.Free24h} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = binary.AppendUvarint(b, uint64(d.Updated))
	return b, nil
}

// MarshalBinary returns the encoding of d described at AppendBinary, in a
// new slice the caller owns.
func (d Digest) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, 64))
}

// UnmarshalBinary decodes data, as made by MarshalBinary, into d. It
// returns an error wrapping ErrUnknownVersion for an encoding version other
// than 1, ErrMalformed for bytes that are not a canonical encoding, and
// ErrInvalidDigest for a decoded digest that Validate rejects; on error d is
// left unchanged. It never panics, and it does not retain data.
func (d *Digest) UnmarshalBinary(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty", ErrMalformed)
	}
	if data[0] != digestEncoding {
		return fmt.Errorf("%w: %d (this code knows %d)", ErrUnknownVersion, data[0], digestEncoding)
	}
	r := reader{buf: data[1:]}
	var out Digest
	out.Version = r.byte()
	flags := r.byte()
	out.Site = r.text(MaxSiteLen)
	out.Addr = r.text(MaxAddrLen)
	out.Policy = r.text(MaxPolicyLen)
	for _, p := range []*int32{&out.Procs, &out.FreeNow, &out.Free1h, &out.Free4h, &out.Free24h} {
		*p = int32(r.uvarint(math.MaxInt32))
	}
	out.Updated = int64(r.uvarint(math.MaxInt64))
	if r.err != nil {
		return r.err
	}
	if len(r.buf) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.buf))
	}
	if flags&^knownFlags != 0 {
		return fmt.Errorf("%w: reserved flag bits %#02x set", ErrMalformed, flags)
	}
	out.Overbooking = flags&flagOverbooking != 0
	out.Leaving = flags&flagLeaving != 0
	if err := out.Validate(); err != nil {
		return err
	}
	*d = out
	return nil
}

// reader decodes the fields of an encoded digest. After the first error it
// returns zero values and keeps that error.
type reader struct {
	buf []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.buf) == 0 {
		r.fail("truncated")
		return 0
	}
	c := r.buf[0]
	r.buf = r.buf[1:]
	return c
}

// uvarint reads a shortest-form uvarint no larger than limit.
func (r *reader) uvarint(limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	switch {
	case n == 0:
		r.fail("truncated varint")
		return 0
	case n < 0:
		r.fail("varint overflows 64 bits")
		return 0
	case n != uvarintLen(v):
		r.fail("varint not in shortest form")
		return 0
	case v > limit:
		r.fail("value %d exceeds %d", v, limit)
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// text reads a length-prefixed string of at most maxLen bytes.
func (r *reader) text(maxLen int) string {
	n := r.uvarint(uint64(maxLen))
	if r.err != nil {
		return ""
	}
	if uint64(len(r.buf)) < n {
		r.fail("truncated string")
		return ""
	}
	s := string(r.buf[:n])
	r.buf = r.buf[n:]
	return s
}

// uvarintLen is the length of the shortest encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
