//go:build !amd64 && !arm64

package gctx

import "runtime"

// ID returns an identifier of the calling goroutine (see the package doc).
func ID() uintptr {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	// "goroutine 123 [running]:"
	var id uintptr
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uintptr(c-'0')
	}
	return id + 1
}
