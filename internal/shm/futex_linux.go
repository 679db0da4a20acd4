package shm

import (
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futex(2) operations. The non-private forms are used on purpose: the words
// live in MAP_SHARED memory used by several processes (and, for the loop
// conduit, in ordinary heap memory, where they work too).
const (
	futexWait = 0 // FUTEX_WAIT
	futexWake = 1 // FUTEX_WAKE
)

// FutexWait sleeps while *addr == val, for at most timeout (<= 0: no timeout).
// It works across processes on MAP_SHARED memory and on heap memory. It may
// return early (spurious wake-up, signal, *addr != val on entry): callers
// re-check their condition in a loop. EINTR, EAGAIN and ETIMEDOUT are not
// errors; any other failure means a broken invariant (a bad address) and
// panics.
//
// This file and the *_unsafe.go files are the only ones that use package
// unsafe: the pointer-to-uintptr conversions must be written in the syscall
// expression itself (unsafe.Pointer rule 4).
func FutexWait(addr *atomic.Uint32, val uint32, timeout time.Duration) {
	futexWaitTimedOut(addr, val, timeout)
}

// futexWaitTimedOut is FutexWait reporting whether the wait ended because
// the timeout expired (ETIMEDOUT).
func futexWaitTimedOut(addr *atomic.Uint32, val uint32, timeout time.Duration) bool {
	var errno unix.Errno
	if timeout > 0 {
		ts := unix.NsecToTimespec(int64(timeout))
		_, _, errno = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait,
			uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
	} else {
		_, _, errno = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait,
			uintptr(val), 0, 0, 0)
	}
	switch errno {
	case 0, unix.EINTR, unix.EAGAIN:
	case unix.ETIMEDOUT:
		return true
	default:
		panic("shm: futex wait: " + errno.Error())
	}
	return false
}

// FutexWake wakes up to n waiters sleeping on addr (n <= 0: none; n is capped
// at MaxInt32, "all").
func FutexWake(addr *atomic.Uint32, n int) {
	futexWakeN(addr, n)
}

// futexWakeN is FutexWake returning the number of waiters woken.
func futexWakeN(addr *atomic.Uint32, n int) int {
	if n <= 0 {
		return 0
	}
	if n > math.MaxInt32 {
		n = math.MaxInt32
	}
	woken, _, errno := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake,
		uintptr(n), 0, 0, 0)
	if errno != 0 {
		panic("shm: futex wake: " + errno.Error())
	}
	return int(woken)
}
