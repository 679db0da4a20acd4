package gex

import "unsafe"

// bytesOf is s's memory as bytes (the typed helpers hand it to the spec
// calls, which take []byte). It allocates nothing.
func bytesOf[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}
