//go:build !linux

package auth

import (
	"errors"
	"net"
)

func peerCred(*net.UnixConn) (PeerCred, error) {
	return PeerCred{}, errors.New("identifying callers on the local socket needs Linux (SO_PEERCRED)")
}
