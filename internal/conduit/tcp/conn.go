package tcp

import (
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

// sendBufferFull reports whether n more bytes might not fit in c's kernel
// send buffer now (FlagImmediate's backpressure): the bytes queued (SIOCOUTQ)
// plus n exceed half of SO_SNDBUF. Linux reports SO_SNDBUF doubled to cover
// its bookkeeping, and counts that bookkeeping against it, so half is what
// payload can be relied on to fit without the write blocking.
func sendBufferFull(c net.Conn, n int) bool {
	queued, size, ok := sendQueue(c)
	return ok && queued+n > size/2
}

// sendQueued reports whether c's kernel send queue still holds bytes: then a
// small frame can wait to be batched with the next ones without adding much
// to its latency.
func sendQueued(c net.Conn) bool {
	queued, _, ok := sendQueue(c)
	return ok && queued > 0
}

// sendQueue returns the bytes in c's kernel send queue (SIOCOUTQ) and its
// SO_SNDBUF.
func sendQueue(c net.Conn) (queued, size int, ok bool) {
	sc, isSys := c.(syscall.Conn)
	if !isSys {
		return 0, 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	rc.Control(func(fd uintptr) {
		var err1, err2 error
		queued, err1 = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		size, err2 = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		ok = err1 == nil && err2 == nil
	})
	return queued, size, ok
}
