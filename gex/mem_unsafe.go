package gex

import "unsafe"

// addrOf returns the address of b's first byte (b non-empty).
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := addrOf(a), addrOf(b)
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
