//go:build amd64 && !race

package shm

import (
	"sync/atomic"
	"unsafe"
)

// storeRelease64 stores v into *w with release ordering only: every store the
// caller made before the call is visible to a goroutine (or process) that
// loads v from *w with an atomic load. On amd64 (TSO) a plain store has that
// ordering in hardware, and a call the compiler cannot inline keeps it after
// the caller's earlier stores, which is how the Go runtime implements its
// own StoreRel on amd64. sync/atomic's Store is an XCHG instead: a full
// fence that stalls the writer until every line it wrote has arrived. Only
// for words nobody pairs with a later load of the writer's own (a release
// store lets that load pass it), unless the reader supplies the barrier
// (see MsgRing.Commit and Bell.Sleep). Race-enabled builds
// and other architectures use atomic.Store (release_other.go).
//
//go:noinline
func storeRelease64(w *atomic.Uint64, v uint64) {
	*(*uint64)(unsafe.Pointer(w)) = v
}

// StoreReleaseUintptr stores v into *w with release ordering only (see
// storeRelease64): for a lock word whose unlock must order the holder's
// writes before the next holder's CAS, without a fence.
//
//go:noinline
func StoreReleaseUintptr(w *atomic.Uintptr, v uintptr) {
	*(*uintptr)(unsafe.Pointer(w)) = v
}

// commitStore stores v into *w: a release store (see storeRelease64) if
// rel, else a sequentially consistent one (an XCHG). One call for
// MsgRing.Commit, which then inlines into the sender.
//
//go:noinline
func commitStore(w *atomic.Uint64, v uint64, rel bool) {
	if rel {
		*(*uint64)(unsafe.Pointer(w)) = v
		return
	}
	w.Store(v)
}

// storeRelease32 is storeRelease64 for a 32-bit word.
//
//go:noinline
func storeRelease32(w *atomic.Uint32, v uint32) {
	*(*uint32)(unsafe.Pointer(w)) = v
}

// StoreRelease64 is storeRelease64 for other packages: a release store of a
// word written by one goroutine at a time, read with atomic loads.
//
//go:noinline
func StoreRelease64(w *atomic.Uint64, v uint64) {
	*(*uint64)(unsafe.Pointer(w)) = v
}
