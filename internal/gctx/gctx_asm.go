//go:build amd64 || arm64

package gctx

// ID returns an identifier of the calling goroutine (see the package doc).
//
//go:noescape
func ID() uintptr
