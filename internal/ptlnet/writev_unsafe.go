package ptlnet

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// writev writes the non-empty slices of iov with one writev(2) call, without
// allocating (the iovec array lives on the stack).
func writev(fd int, iov *[3][]byte) (int, error) {
	var v [3]unix.Iovec
	k := 0
	for _, b := range iov {
		if len(b) > 0 {
			v[k].Base = unsafe.SliceData(b)
			v[k].SetLen(len(b))
			k++
		}
	}
	if k == 0 {
		return 0, nil
	}
	r, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&v[0])), uintptr(k))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// readNB is one read(2) of the non-blocking socket fd into b (not empty), as a
// raw system call (it cannot block), as gex's tcp conduit reads: a goroutine that polls
// sockets in a loop through unix.Read enters and leaves the scheduler's
// syscall state each time, which keeps sysmon waking every 20 us and cost
// a context switch or more per round trip (docs/ptlnet.md).
func readNB(fd int, b []byte) (int, error) {
	k, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(k), nil
}
