//go:build !amd64 || race

package shm

import "sync/atomic"

// storeRelease64 stores v into *w so that every store made before it is
// visible to whoever loads v from *w (see release_unsafe.go).
func storeRelease64(w *atomic.Uint64, v uint64) { w.Store(v) }

// StoreReleaseUintptr stores v into *w with (at least) release ordering.
func StoreReleaseUintptr(w *atomic.Uintptr, v uintptr) { w.Store(v) }

func commitStore(w *atomic.Uint64, v uint64, rel bool) { w.Store(v) }

func storeRelease32(w *atomic.Uint32, v uint32) { w.Store(v) }

// StoreRelease64 stores v into *w with (at least) release ordering.
func StoreRelease64(w *atomic.Uint64, v uint64) { w.Store(v) }
