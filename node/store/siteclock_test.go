package store

import (
	"errors"
	"testing"
	"time"
)

func TestSiteClock(t *testing.T) {
	c := SiteClock{Site: time.Unix(2_000_000_000, 5), Wall: time.Unix(1_900_000_000, 0), Scale: 60}
	if got := c.At(c.Wall.Add(time.Minute)); !got.Equal(c.Site.Add(time.Hour)) {
		t.Errorf("a minute after the reading at 60x: %v, want an hour on", got)
	}
	back, err := ParseSiteClock(c.String())
	if err != nil || !back.Site.Equal(c.Site) || !back.Wall.Equal(c.Wall) || back.Scale != c.Scale {
		t.Errorf("round trip of %q: %+v %v", c.String(), back, err)
	}
	for _, bad := range []string{"", "1 2", "1 2 3 4", "x 2 3", "1 2 0", "1 2 -1", "1 2 NaN", "1 2 +Inf", "1 2.5 3"} {
		if _, err := ParseSiteClock(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseSiteClock(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
}

func FuzzParseSiteClock(f *testing.F) {
	f.Add("2000000000000000005 1900000000000000000 60")
	f.Add("1 2 1e-3")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseSiteClock(s)
		if err != nil {
			return
		}
		if !(c.Scale > 0) {
			t.Fatalf("%q parsed with scale %v", s, c.Scale)
		}
		again, err := ParseSiteClock(c.String())
		if err != nil || !again.Site.Equal(c.Site) || !again.Wall.Equal(c.Wall) || again.Scale != c.Scale {
			t.Fatalf("%q: round trip %+v %v", s, again, err)
		}
	})
}
