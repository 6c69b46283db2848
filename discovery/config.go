package discovery

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
)

// DefaultPort is memberlist's customary gossip port, used for both UDP and
// TCP.
const DefaultPort = 7946

// Profile chooses the memberlist timing preset a Membership starts from.
type Profile int

// Profiles, each one of memberlist's presets.
const (
	// ProfileLAN is memberlist.DefaultLANConfig: probes every second,
	// push/pull every 30 s. The zero Profile, and the default.
	ProfileLAN Profile = iota
	// ProfileWAN is memberlist.DefaultWANConfig: slower probes and longer
	// timeouts for sites far apart.
	ProfileWAN
	// ProfileLocal is memberlist.DefaultLocalConfig: short timeouts for
	// sites on one host, as in tests and e2e.
	ProfileLocal
)

// String returns "lan", "wan", "local" or "unknown".
func (p Profile) String() string {
	switch p {
	case ProfileLAN:
		return "lan"
	case ProfileWAN:
		return "wan"
	case ProfileLocal:
		return "local"
	default:
		return "unknown"
	}
}

// Config configures a Membership. Start from DefaultConfig and set at least
// NodeName. New copies what it needs; changing a Config after New has no
// effect.
type Config struct {
	// NodeName is the site id, and the site's memberlist node name. It must
	// be unique in the federation, 1 to MaxSiteLen bytes. The local digest's
	// Site must equal it (New and Update fill an empty Site with it).
	// Default: "" (must be set).
	NodeName string

	// BindAddr is the IP address the gossip listeners (UDP and TCP) bind
	// to. Default: "0.0.0.0", every interface. Ignored if Transport is set.
	BindAddr string

	// BindPort is the gossip port, for both UDP and TCP. If 0 the operating
	// system assigns one; Membership.LocalAddr reports it. Default:
	// DefaultPort (7946). Ignored if Transport is set.
	BindPort int

	// AdvertiseAddr is the IP address peers are told to reach this site's
	// gossip at, for sites behind NAT or bound to 0.0.0.0. If "" memberlist
	// advertises BindAddr, or a private address of this host when BindAddr
	// is 0.0.0.0. Default: "".
	AdvertiseAddr string

	// AdvertisePort is the gossip port peers are told to use. If 0 it is
	// the bound port, except with a Transport and an AdvertiseAddr, where it
	// must be set. Default: 0.
	AdvertisePort int

	// Seeds are gossip addresses (host:port; a bare host means this site's
	// BindPort) of sites to join through, used by Join when it is given none
	// and by Run to rejoin a site that finds itself alone. Default: none.
	Seeds []string

	// SecretKey, if set, encrypts and authenticates all gossip with
	// AES-GCM (memberlist's gossip encryption). It must be 16, 24 or 32
	// bytes (AES-128, -192, -256), and the same at every site: sites with
	// different keys, or one with a key and one without, cannot talk.
	// Default: nil, no encryption.
	SecretKey []byte

	// OtherKeys are accepted besides SecretKey (which alone encrypts)
	// during a key rotation: memberlist's keyring. Default: none.
	OtherKeys [][]byte

	// Profile chooses memberlist's timing preset. Default: ProfileLAN.
	Profile Profile

	// ProbeInterval, if > 0, overrides the profile's interval between
	// failure-detection probes. Smaller detects failures sooner at the cost
	// of more packets. The probe timeout is cut to half the interval if it
	// is longer. Default: 0, the profile's (1 s for LAN and Local).
	ProbeInterval time.Duration

	// SuspicionMult, if > 0, overrides the profile's suspicion multiplier:
	// a suspect member is declared dead after about
	// SuspicionMult × log10(max(N, 10)) × ProbeInterval. Default: 0, the
	// profile's (4 for LAN, 3 for Local).
	SuspicionMult int

	// PushPullInterval, if > 0, overrides the profile's interval between
	// full state exchanges (push/pull, over TCP) with a random peer. Gossip
	// spreads a new digest in a few rounds but gives up after a bounded
	// number of retransmissions, so a peer may miss it; push/pull repairs
	// that, so this bounds how stale a digest can get. Smaller costs one TCP
	// exchange per interval. Default: 0, the profile's (30 s for LAN, 15 s
	// for Local).
	PushPullInterval time.Duration

	// ReclaimAfter, if > 0, lets a site that was declared Dead rejoin under
	// the same name at another gossip address once it has been dead this
	// long (memberlist's DeadNodeReclaimTime). If 0 such a site is refused
	// until the others forget it; a site that Left may always come back at
	// a new address. Default: 0.
	ReclaimAfter time.Duration

	// UpdateTimeout bounds how long Update waits for the new digest to be
	// handed to the network. If <= 0 Update waits until it is. Default: 5 s.
	UpdateTimeout time.Duration

	// RefreshInterval is how often Run calls Update and, if the site is
	// alone, rejoins Seeds. If <= 0 Run does neither and only waits for its
	// context. Default: 10 s.
	RefreshInterval time.Duration

	// EventBuffer is the capacity of the Events channel. Events that find
	// it full are dropped and counted (Membership.DroppedEvents). If <= 0
	// it is 256. Default: 256.
	EventBuffer int

	// Logger receives memberlist's log lines at their own levels (DEBUG,
	// INFO, WARN, ERR) and this package's. If nil logs are discarded.
	// Default: nil.
	Logger *slog.Logger

	// Transport, if set, replaces memberlist's own UDP/TCP transport on
	// BindAddr:BindPort; wrap NewNetTransport's result in a
	// PartitionTransport to cut links in tests. Memberlist takes ownership
	// once New succeeds, and Shutdown shuts it down; if New fails the caller
	// still owns it. Default: nil.
	Transport memberlist.Transport
}

// DefaultConfig returns the defaults documented on each Config field. Its
// NodeName is empty and must be set.
func DefaultConfig() Config {
	return Config{
		BindAddr:        "0.0.0.0",
		BindPort:        DefaultPort,
		UpdateTimeout:   5 * time.Second,
		RefreshInterval: 10 * time.Second,
		EventBuffer:     256,
	}
}

// DefaultLocalConfig returns DefaultConfig for a site named name on
// 127.0.0.1 with an OS-assigned port, ProfileLocal's fast timers, push/pull
// every 2 s and a digest refresh every second, for tests and e2e.
func DefaultLocalConfig(name string) Config {
	c := DefaultConfig()
	c.NodeName = name
	c.BindAddr = "127.0.0.1"
	c.BindPort = 0
	c.Profile = ProfileLocal
	c.PushPullInterval = 2 * time.Second
	c.RefreshInterval = time.Second
	return c
}

// Validate returns an error wrapping ErrInvalidConfig if c cannot work.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if err := checkText("node name", c.NodeName, 1, MaxSiteLen); err != nil {
		return bad("%v", err)
	}
	if c.Transport == nil && net.ParseIP(c.BindAddr) == nil {
		return bad("bind address %q is not an IP address", c.BindAddr)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		return bad("advertise address %q is not an IP address", c.AdvertiseAddr)
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		return bad("bind port %d", c.BindPort)
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		return bad("advertise port %d", c.AdvertisePort)
	}
	for _, s := range c.Seeds {
		if s == "" {
			return bad("empty seed address")
		}
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		return bad("secret key is %d bytes, want 16, 24 or 32", len(c.SecretKey))
	}
	for _, k := range c.OtherKeys {
		if len(c.SecretKey) == 0 || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
			return bad("other keys need a secret key, and 16, 24 or 32 bytes each")
		}
	}
	if c.Profile < ProfileLAN || c.Profile > ProfileLocal {
		return bad("unknown profile %d", c.Profile)
	}
	if c.ProbeInterval < 0 || c.SuspicionMult < 0 || c.PushPullInterval < 0 || c.ReclaimAfter < 0 {
		return bad("negative probe interval, suspicion multiplier, push/pull interval or reclaim time")
	}
	return nil
}

// memberlistConfig builds memberlist's configuration from c.
func (c Config) memberlistConfig() *memberlist.Config {
	var mc *memberlist.Config
	switch c.Profile {
	case ProfileWAN:
		mc = memberlist.DefaultWANConfig()
	case ProfileLocal:
		mc = memberlist.DefaultLocalConfig()
	default:
		mc = memberlist.DefaultLANConfig()
	}
	mc.Name = c.NodeName
	mc.BindAddr = c.BindAddr
	mc.BindPort = c.BindPort
	mc.AdvertiseAddr = c.AdvertiseAddr
	mc.AdvertisePort = c.AdvertisePort
	if mc.AdvertisePort == 0 {
		// memberlist replaces it with the assigned port when BindPort is
		// 0 and it builds the transport itself.
		mc.AdvertisePort = c.BindPort
	}
	if len(c.SecretKey) > 0 {
		mc.SecretKey = append([]byte(nil), c.SecretKey...)
		if len(c.OtherKeys) > 0 {
			// Validate checked the key sizes, the only error NewKeyring has.
			mc.Keyring, _ = memberlist.NewKeyring(c.OtherKeys, mc.SecretKey)
		}
	}
	if c.ProbeInterval > 0 {
		mc.ProbeInterval = c.ProbeInterval
		// A probe must time out within its interval.
		mc.ProbeTimeout = min(mc.ProbeTimeout, c.ProbeInterval/2)
	}
	if c.SuspicionMult > 0 {
		mc.SuspicionMult = c.SuspicionMult
	}
	if c.PushPullInterval > 0 {
		mc.PushPullInterval = c.PushPullInterval
	}
	mc.DeadNodeReclaimTime = c.ReclaimAfter
	mc.Transport = c.Transport
	return mc
}
