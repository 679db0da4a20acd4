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
