package smp

import "unsafe"

// addrOf returns the address of b's first byte: a segment's owner address,
// published to peers as a number (never dereferenced by them).
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
