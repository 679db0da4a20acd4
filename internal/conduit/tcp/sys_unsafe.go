package tcp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// iovMax is the largest number of iovecs one writev(2) takes (IOV_MAX).
const iovMax = 1024

// writeMax is the most bytes one writev(2) offers the kernel: a 1 MiB Long
// (gex's RMA chunk) with its header goes in one call. With CUBIC (the
// conduit's congestion control) writes of up to 1 MiB beat writes of 64 KiB
// by 27-43% on the 4 MiB floods, quiet or loaded (docs/tcp.md, third
// campaign); under BBR's pacing the two were alike.
const writeMax = 1<<20 + frameMaxHead

// writev writes the buffers of vec (at most iovMax of them, empty ones
// skipped) to the non-blocking socket fd with one writev(2), building the
// iovec array in iov (which must have room for iovMax entries). It returns
// the bytes written; the caller advances vec. It does not allocate.
func writev(fd int, vec [][]byte, iov []unix.Iovec) (int, error) {
	k, total := 0, 0
	for _, b := range vec {
		if len(b) == 0 {
			continue
		}
		if k == len(iov) || total >= writeMax {
			break
		}
		b = b[:min(len(b), writeMax-total)]
		total += len(b)
		iov[k].Base = &b[0]
		iov[k].SetLen(len(b))
		k++
	}
	if k == 0 {
		return 0, nil
	}
	n, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(k))
	clear(iov[:k]) // drop the references to callers' payloads
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// readNB is read(2) on the non-blocking socket fd without the runtime's
// system-call bookkeeping (it never blocks, so the processor need not be
// handed off): the poll loop's hottest call.
func readNB(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// ppoll is ppoll(2) on fds with timeout ts (no signal mask), without
// allocating. It may block, so it goes through the runtime's system-call
// bookkeeping.
func ppoll(fds []unix.PollFd, ts *unix.Timespec) {
	if len(fds) == 0 {
		return
	}
	unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(ts)), 0, 0, 0)
}

// epollWaitNB is epoll_pwait(2) on epfd with no timeout and no signal mask
// (it never sleeps, so it skips the runtime's system-call bookkeeping, as
// readNB does), into ev. It returns the number of events.
func epollWaitNB(epfd int, ev []unix.EpollEvent) (int, error) {
	if len(ev) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&ev[0])), uintptr(len(ev)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
