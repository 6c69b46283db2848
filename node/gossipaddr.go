package node

import (
	"fmt"
	"net"
)

// gossipBind splits a gossip address (gossip.addr, --gossip) into the IP
// the gossip listeners bind and the port, the way Go's own listeners read
// an address: an empty host (":7946") binds every interface (0.0.0.0), and
// a host name binds the first address it resolves to (IPv4 preferred).
func gossipBind(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("gossip address %q: want HOST:PORT or :PORT: %w: %w", addr, ErrInvalidRequest, err)
	}
	if host == "" {
		return "0.0.0.0", port, nil
	}
	if net.ParseIP(host) != nil {
		return host, port, nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return "", "", fmt.Errorf("gossip address %q: host %q does not resolve to an IP address: %w: %v", addr, host, ErrInvalidRequest, err)
	}
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip.String(), port, nil
		}
	}
	return ips[0].String(), port, nil
}
