package auth

import (
	"fmt"
	"net"
	"syscall"
)

func peerCred(c *net.UnixConn) (PeerCred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return PeerCred{}, err
	}
	var uc *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		uc, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return PeerCred{}, err
	}
	if serr != nil {
		return PeerCred{}, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return PeerCred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}, nil
}
