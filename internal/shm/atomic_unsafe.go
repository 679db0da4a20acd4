package shm

import (
	"strconv"
	"sync/atomic"
	"unsafe"
)

// addrOf returns the address of b's first byte (0 for a nil slice). It is used
// for alignment checks only; the address is never turned back into a pointer.
func addrOf(b []byte) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

// Uint32At overlays an atomic uint32 on b[off:off+4]. It panics if the word is
// not inside b or not 4-byte aligned in memory: offsets passed here are the
// caller's layout constants, never values read from shared memory.
func Uint32At(b []byte, off int) *atomic.Uint32 {
	if off < 0 || off > len(b)-4 {
		panic("shm: Uint32At: offset " + strconv.Itoa(off) + " outside a " + strconv.Itoa(len(b)) + "-byte slice")
	}
	p := unsafe.Pointer(unsafe.SliceData(b[off:]))
	if uintptr(p)%4 != 0 {
		panic("shm: Uint32At: offset " + strconv.Itoa(off) + " is not 4-byte aligned")
	}
	return (*atomic.Uint32)(p)
}

// Uint64At overlays an atomic uint64 on b[off:off+8]. It panics if the word is
// not inside b or not 8-byte aligned in memory.
func Uint64At(b []byte, off int) *atomic.Uint64 {
	if off < 0 || off > len(b)-8 {
		panic("shm: Uint64At: offset " + strconv.Itoa(off) + " outside a " + strconv.Itoa(len(b)) + "-byte slice")
	}
	p := unsafe.Pointer(unsafe.SliceData(b[off:]))
	if uintptr(p)%8 != 0 {
		panic("shm: Uint64At: offset " + strconv.Itoa(off) + " is not 8-byte aligned")
	}
	return (*atomic.Uint64)(p)
}
