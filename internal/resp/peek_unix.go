//go:build unix

package resp

import (
	"errors"
	"net"
	"syscall"
)

// peekClosed looks at nc's socket without reading from it or waiting: a
// closed connection (the peer's FIN: no bytes and no error) or a failed
// one is closed, and so is one with bytes waiting where nothing was asked
// (unless TLS, whose records a server may send unasked). A read with a
// deadline already past cannot tell: Go answers it with a timeout before
// it looks at the socket.
func peekClosed(nc net.Conn, tlsConn bool) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		case err != nil, n == 0:
			closed = true
		default:
			closed = !tlsConn
		}
		return true
	})
	return err != nil || closed
}
