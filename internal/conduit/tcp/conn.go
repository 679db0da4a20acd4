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
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	full := false
	rc.Control(func(fd uintptr) {
		queued, err1 := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		size, err2 := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		full = err1 == nil && err2 == nil && queued+n > size/2
	})
	return full
}

// sendQueued reports whether c's kernel send queue still holds bytes
// (SIOCOUTQ > 0): then a small frame can wait to be batched with the next
// ones without adding to its latency much.
func sendQueued(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	queued := false
	rc.Control(func(fd uintptr) {
		n, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		queued = err == nil && n > 0
	})
	return queued
}
