package worker

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCred is the process at the other end of c, a unix socket
// connection, as the kernel saw it connect (SO_PEERCRED): known true.
func peerCred(c net.Conn) (peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{}, fmt.Errorf("peer credentials: %T is not a unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	var (
		cred *unix.Ucred
		gerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	if gerr != nil {
		return peer{}, fmt.Errorf("peer credentials: %w", gerr)
	}
	return peer{uid: int(cred.Uid), pid: int(cred.Pid), known: true}, nil
}
