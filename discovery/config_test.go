package discovery

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestConfigValidate(t *testing.T) {
	tests := map[string]struct {
		edit func(*Config)
		ok   bool
	}{
		"the defaults with a name":        {func(c *Config) {}, true},
		"an OS-assigned port":             {func(c *Config) { c.BindPort = 0 }, true},
		"a 32-byte key":                   {func(c *Config) { c.SecretKey = make([]byte, 32) }, true},
		"no node name":                    {func(c *Config) { c.NodeName = "" }, false},
		"a node name too long":            {func(c *Config) { c.NodeName = strings.Repeat("n", MaxSiteLen+1) }, false},
		"a host name as bind address":     {func(c *Config) { c.BindAddr = "localhost" }, false},
		"a host name as advertise addr":   {func(c *Config) { c.AdvertiseAddr = "example.org" }, false},
		"a port out of range":             {func(c *Config) { c.BindPort = 70000 }, false},
		"a negative advertise port":       {func(c *Config) { c.AdvertisePort = -1 }, false},
		"an empty seed":                   {func(c *Config) { c.Seeds = []string{""} }, false},
		"a 10-byte key":                   {func(c *Config) { c.SecretKey = make([]byte, 10) }, false},
		"an unknown profile":              {func(c *Config) { c.Profile = 7 }, false},
		"a negative probe interval":       {func(c *Config) { c.ProbeInterval = -time.Second }, false},
		"a custom transport ignores bind": {func(c *Config) { c.BindAddr = ""; c.Transport = &PartitionTransport{} }, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := DefaultConfig()
			c.NodeName = "site-a"
			tc.edit(&c)
			err := c.Validate()
			if tc.ok && err != nil {
				t.Fatalf("Validate = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestMemberlistConfig(t *testing.T) {
	c := DefaultLocalConfig("a")
	c.ProbeInterval = 100 * time.Millisecond
	c.SuspicionMult = 7
	c.SecretKey = []byte("0123456789abcdef")
	mc := c.memberlistConfig()
	local := memberlist.DefaultLocalConfig()
	if mc.Name != "a" || mc.BindAddr != "127.0.0.1" || mc.BindPort != 0 {
		t.Errorf("name/bind = %q %q %d", mc.Name, mc.BindAddr, mc.BindPort)
	}
	if mc.ProbeInterval != 100*time.Millisecond || mc.ProbeTimeout != 50*time.Millisecond || mc.SuspicionMult != 7 {
		t.Errorf("probe %v timeout %v suspicion %d", mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult)
	}
	if mc.GossipInterval != local.GossipInterval || mc.PushPullInterval != 2*time.Second {
		t.Errorf("gossip %v push/pull %v: not the local profile with DefaultLocalConfig's push/pull", mc.GossipInterval, mc.PushPullInterval)
	}
	c.SecretKey[0] = 'X'
	if len(mc.SecretKey) != 16 || mc.SecretKey[0] != '0' {
		t.Error("the secret key is not copied")
	}
	lan := DefaultConfig()
	lan.NodeName = "b"
	lan.BindPort = 7000
	if mc := lan.memberlistConfig(); mc.AdvertisePort != 7000 || mc.ProbeInterval != time.Second {
		t.Errorf("LAN: advertise port %d probe %v", mc.AdvertisePort, mc.ProbeInterval)
	}
}

func TestMemberlistLogLevels(t *testing.T) {
	var buf bytes.Buffer
	l := memberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Printf("[DEBUG] memberlist: debug line")
	l.Printf("[INFO] memberlist: info line")
	l.Printf("[WARN] memberlist: warn line")
	l.Printf("[ERR] memberlist: error line")
	l.Printf("untagged line")
	for _, want := range []string{
		`level=DEBUG msg="debug line" component=memberlist`,
		`level=INFO msg="info line"`,
		`level=WARN msg="warn line"`,
		`level=ERROR msg="error line"`,
		`level=DEBUG msg="untagged line"`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}

	buf.Reset()
	quiet := memberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	quiet.Printf("[DEBUG] memberlist: hidden")
	if buf.Len() != 0 {
		t.Errorf("debug line logged at warn level: %s", buf.String())
	}
}
