package tcp

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// setNoDelay turns Nagle's algorithm off: AMs are latency-bound.
func setNoDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}

// takeFD returns a duplicate of c's socket descriptor, non-blocking and
// close-on-exec, and closes c: from then on the transport reads and writes
// the socket itself with non-blocking system calls from the goroutine that
// polls, outside Go's network poller (no reader goroutine, no hand-off).
func takeFD(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		c.Close()
		return -1, fmt.Errorf("tcp: %T is not a socket", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		c.Close()
		return -1, err
	}
	fd := -1
	cerr := rc.Control(func(s uintptr) {
		fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	})
	c.Close()
	if cerr != nil {
		return -1, cerr
	}
	if err != nil {
		return -1, fmt.Errorf("tcp: duplicating the socket: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// tuneSocket sets TCP_NODELAY; the congestion control cc, if not "" (a
// kernel without it keeps its default unless required); and, if
// bufSize > 0, SO_SNDBUF and SO_RCVBUF (bufSize <= 0 leaves the kernel's
// autotuning on; see docs/tcp.md for the measurements behind the defaults).
func tuneSocket(fd, bufSize, notSentLowat int, cc string, required bool) error {
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fmt.Errorf("tcp: setting TCP_NODELAY: %w", err)
	}
	if cc != "" {
		if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc); err != nil && required {
			return fmt.Errorf("tcp: setting the congestion control %q (TCP_CONGESTION): %w", cc, err)
		}
	}
	if notSentLowat > 0 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, notSentLowat); err != nil {
			return fmt.Errorf("tcp: setting TCP_NOTSENT_LOWAT: %w", err)
		}
	}
	if bufSize > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, bufSize); err != nil {
			return fmt.Errorf("tcp: setting SO_SNDBUF: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, bufSize); err != nil {
			return fmt.Errorf("tcp: setting SO_RCVBUF: %w", err)
		}
	}
	return nil
}

// congestion returns the congestion control of socket fd.
func congestion(fd int) (string, error) {
	return unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
}

// sendBufferFull reports whether n more bytes might not fit in socket fd's
// kernel send buffer now (FlagImmediate's backpressure): the bytes queued
// (SIOCOUTQ) plus n exceed half of SO_SNDBUF. Linux reports SO_SNDBUF doubled
// to cover its bookkeeping, and counts that bookkeeping against it, so half is
// what payload can be relied on to fit without the write blocking. With
// TCP_NOTSENT_LOWAT (notSentLowat > 0) the socket also takes no more while
// that many bytes wait unsent (SIOCOUTQNSD), as poll(2) reports it.
func sendBufferFull(fd, n, notSentLowat int) bool {
	queued, err1 := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	size, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if err1 == nil && err2 == nil && queued+n > size/2 {
		return true
	}
	if notSentLowat > 0 {
		unsent, err := unix.IoctlGetInt(fd, unix.SIOCOUTQNSD)
		return err == nil && unsent >= notSentLowat
	}
	return false
}
