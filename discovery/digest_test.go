package discovery

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

// testDigest returns a valid, realistic digest for site.
func testDigest(site string) Digest {
	return Digest{
		Version:     ProtocolVersion,
		Site:        site,
		Addr:        "10.1.2.3:7070",
		Procs:       128,
		Policy:      "easy",
		FreeNow:     16,
		Free1h:      32,
		Free4h:      64,
		Free24h:     128,
		Overbooking: true,
		Updated:     1_760_000_000,
	}
}

// worstDigest returns the valid digest with the longest encoding.
func worstDigest() Digest {
	host := strings.Repeat("h", MaxAddrLen-len(":65535"))
	return Digest{
		Version:     math.MaxUint8,
		Site:        strings.Repeat("é", MaxSiteLen/2), // 2 bytes a rune
		Addr:        host + ":65535",
		Procs:       math.MaxInt32,
		Policy:      strings.Repeat("p", MaxPolicyLen),
		FreeNow:     math.MaxInt32,
		Free1h:      math.MaxInt32,
		Free4h:      math.MaxInt32,
		Free24h:     math.MaxInt32,
		Overbooking: true,
		Leaving:     true,
		Updated:     math.MaxInt64,
	}
}

func TestDigestRoundTrip(t *testing.T) {
	tests := map[string]Digest{
		"a realistic site":        testDigest("site-a"),
		"the smallest valid site": {Version: 1, Site: "x", Addr: "h:1"},
		"the worst case":          worstDigest(),
		"an IPv6 address":         {Version: 1, Site: "v6", Addr: "[2001:db8::1]:7070", Procs: 4, FreeNow: 4},
		"a full site that does not overbook": {
			Version: 1, Site: "full", Addr: "full.example:443", Procs: 1024, Policy: "conservative",
		},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := want.MarshalBinary()
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			var got Digest
			if err := got.UnmarshalBinary(b); err != nil {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			if got != want {
				t.Fatalf("round trip: got %+v, want %+v", got, want)
			}
			if len(b) > MaxDigestSize {
				t.Fatalf("encoded %d bytes, more than MaxDigestSize %d", len(b), MaxDigestSize)
			}
		})
	}
}

func TestDigestWorstCaseSize(t *testing.T) {
	b, err := worstDigest().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worst-case digest: %d bytes (MaxDigestSize %d, memberlist limit %d)", len(b), MaxDigestSize, memberlist.MetaMaxSize)
	if len(b) != MaxDigestSize {
		t.Errorf("worst case is %d bytes, MaxDigestSize says %d", len(b), MaxDigestSize)
	}
	if MaxDigestSize > memberlist.MetaMaxSize*6/10 {
		t.Errorf("MaxDigestSize %d leaves too little room under memberlist's %d", MaxDigestSize, memberlist.MetaMaxSize)
	}
	typical, _ := testDigest("site-a").MarshalBinary()
	t.Logf("typical digest: %d bytes", len(typical))
}

func TestDigestValidate(t *testing.T) {
	tests := map[string]func(*Digest){
		"version 0":                     func(d *Digest) { d.Version = 0 },
		"an empty site":                 func(d *Digest) { d.Site = "" },
		"a site one byte too long":      func(d *Digest) { d.Site = strings.Repeat("s", MaxSiteLen+1) },
		"a site with a newline":         func(d *Digest) { d.Site = "a\nb" },
		"a site that is not UTF-8":      func(d *Digest) { d.Site = "\xff" },
		"an empty address":              func(d *Digest) { d.Addr = "" },
		"an address without a port":     func(d *Digest) { d.Addr = "10.0.0.1" },
		"an address without a host":     func(d *Digest) { d.Addr = ":7070" },
		"port 0":                        func(d *Digest) { d.Addr = "h:0" },
		"port 65536":                    func(d *Digest) { d.Addr = "h:65536" },
		"an address one byte too long":  func(d *Digest) { d.Addr = strings.Repeat("h", MaxAddrLen-4) + ":7070" },
		"a policy one byte too long":    func(d *Digest) { d.Policy = strings.Repeat("p", MaxPolicyLen+1) },
		"negative procs":                func(d *Digest) { d.Procs = -1 },
		"negative free processors":      func(d *Digest) { d.Free1h = -1 },
		"more free processors than all": func(d *Digest) { d.Free24h = d.Procs + 1 },
		"a negative update time":        func(d *Digest) { d.Updated = -1 },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			d := testDigest("site-a")
			mutate(&d)
			if err := d.Validate(); !errors.Is(err, ErrInvalidDigest) {
				t.Fatalf("Validate = %v, want ErrInvalidDigest", err)
			}
			if _, err := d.MarshalBinary(); !errors.Is(err, ErrInvalidDigest) {
				t.Fatalf("MarshalBinary = %v, want ErrInvalidDigest", err)
			}
		})
	}
}

func TestDigestUnmarshalErrors(t *testing.T) {
	good, err := testDigest("site-a").MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	// Offsets into good: 0 encoding, 1 Version, 2 flags, 3 len(Site).
	tests := map[string]struct {
		data []byte
		want error
	}{
		"nothing":                       {nil, ErrMalformed},
		"encoding version 0":            {with(func(b []byte) []byte { b[0] = 0; return b }), ErrUnknownVersion},
		"a future encoding version":     {with(func(b []byte) []byte { b[0] = 2; return b }), ErrUnknownVersion},
		"encoding version 255":          {[]byte{255}, ErrUnknownVersion},
		"only the encoding version":     {[]byte{digestEncoding}, ErrMalformed},
		"one byte short":                {good[:len(good)-1], ErrMalformed},
		"a trailing byte":               {append(bytes.Clone(good), 0), ErrMalformed},
		"a reserved flag bit":           {with(func(b []byte) []byte { b[2] |= 0x80; return b }), ErrMalformed},
		"a site length past the end":    {with(func(b []byte) []byte { b[3] = 60; return b }), ErrMalformed},
		"a site length over the limit":  {[]byte{1, 1, 0, MaxSiteLen + 1}, ErrMalformed},
		"a varint not in shortest form": {[]byte{1, 1, 0, 0x81, 0x00, 'x'}, ErrMalformed},
		"a varint over 64 bits":         {append([]byte{1, 1, 0}, bytes.Repeat([]byte{0xff}, 11)...), ErrMalformed},
		"a valid encoding of version 0": {with(func(b []byte) []byte { b[1] = 0; return b }), ErrInvalidDigest},
		"procs larger than int32":       {[]byte{1, 1, 0, 1, 'x', 3, 'h', ':', '1', 0, 0x80, 0x80, 0x80, 0x80, 0x08, 0, 0, 0, 0, 0}, ErrMalformed},
		"free processors beyond procs":  {[]byte{1, 1, 0, 1, 'x', 3, 'h', ':', '1', 0, 1, 2, 0, 0, 0, 0}, ErrInvalidDigest},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := testDigest("unchanged")
			err := d.UnmarshalBinary(tc.data)
			if !errors.Is(err, tc.want) {
				t.Fatalf("UnmarshalBinary = %v, want %v", err, tc.want)
			}
			if d != testDigest("unchanged") {
				t.Fatalf("UnmarshalBinary changed its receiver on error: %+v", d)
			}
		})
	}
}

func FuzzDigestUnmarshal(f *testing.F) {
	for _, d := range []Digest{testDigest("site-a"), worstDigest(), {Version: 1, Site: "x", Addr: "h:1"}} {
		b, err := d.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{2, 1, 0})
	f.Add([]byte{1, 1, 0, 0x81, 0x00, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Digest
		if err := d.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownVersion) && !errors.Is(err, ErrInvalidDigest) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		// A decoded digest is valid and its encoding is canonical: it
		// encodes back to exactly the same bytes.
		b, err := d.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded digest %+v does not encode: %v", d, err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", data, b)
		}
		var again Digest
		if err := again.UnmarshalBinary(b); err != nil || again != d {
			t.Fatalf("second round trip: %+v, %v; want %+v", again, err, d)
		}
		if len(b) > MaxDigestSize {
			t.Fatalf("valid digest of %d bytes exceeds MaxDigestSize %d", len(b), MaxDigestSize)
		}
	})
}
