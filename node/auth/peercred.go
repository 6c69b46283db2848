package auth

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// PeerCred is the AuthInfo of a connection on the node's Unix socket: the
// caller's credentials as the kernel saw them when it connected.
type PeerCred struct {
	credentials.CommonAuthInfo
	PID      int32
	UID, GID uint32
}

// AuthType implements credentials.AuthInfo.
func (PeerCred) AuthType() string { return "peercred" }

// UnixCredentials are the transport credentials of the node's Unix
// socket: no encryption (the kernel carries the bytes), and the caller
// identified by its uid (SO_PEERCRED), the way Docker's and containerd's
// sockets do it.
type UnixCredentials struct{}

// ServerHandshake implements credentials.TransportCredentials.
func (UnixCredentials) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, nil, errors.New("peer credentials need a Unix socket connection")
	}
	pc, err := peerCred(uc)
	if err != nil {
		return nil, nil, err
	}
	pc.CommonAuthInfo = credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}
	return c, pc, nil
}

// ClientHandshake implements credentials.TransportCredentials: a client
// of the socket proves nothing; the kernel does.
func (UnixCredentials) ClientHandshake(_ context.Context, _ string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c, PeerCred{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

// Info implements credentials.TransportCredentials.
func (UnixCredentials) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "peercred"}
}

// Clone implements credentials.TransportCredentials.
func (u UnixCredentials) Clone() credentials.TransportCredentials { return u }

// OverrideServerName implements credentials.TransportCredentials.
func (UnixCredentials) OverrideServerName(string) error { return nil }
