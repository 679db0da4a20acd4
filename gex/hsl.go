package gex

import (
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/gctx"
)

// HSL is a handler-safe lock (gex_HSL_t; GASNet-1 "Handler-Safe Locks"). The
// zero value is an unlocked lock (GEX_HSL_INITIALIZER). It may be taken inside
// AM handlers; while a goroutine holds it, that goroutine may not communicate,
// poll, or wait (such calls return an error wrapping ErrRestricted). HSLs must
// not be held across a call that could run handlers.
type HSL struct {
	mu     sync.Mutex
	holder atomic.Uintptr
}

// Init implements gex_HSL_Init: it resets h to the unlocked state. It must not
// be called on a locked HSL.
func (h *HSL) Init() {
	if h.holder.Load() != 0 {
		panic("gex: HSL.Init of a locked HSL")
	}
	*h = HSL{}
}

// Destroy implements gex_HSL_Destroy. Destroying a locked HSL is an error
// (fatal in GASNet, a panic here).
func (h *HSL) Destroy() {
	if h.holder.Load() != 0 {
		panic("gex: HSL.Destroy of a locked HSL")
	}
}

// Lock implements gex_HSL_Lock: it blocks until the lock is acquired.
func (h *HSL) Lock() {
	g := gctx.ID()
	if h.holder.Load() == g {
		panic("gex: HSL.Lock: this goroutine already holds the HSL (HSLs are not recursive)")
	}
	h.mu.Lock()
	h.holder.Store(g)
	hslHolders.add(g)
}

// TryLock implements gex_HSL_Trylock: it reports whether the lock was acquired
// (the spec's zero return is true here).
func (h *HSL) TryLock() bool {
	if !h.mu.TryLock() {
		return false
	}
	g := gctx.ID()
	h.holder.Store(g)
	hslHolders.add(g)
	return true
}

// Unlock implements gex_HSL_Unlock. Unlocking an HSL the calling goroutine
// does not hold is a fatal error, as in GASNet.
func (h *HSL) Unlock() {
	g := gctx.ID()
	if h.holder.Load() != g {
		panic("gex: HSL.Unlock of an HSL not held by this goroutine")
	}
	h.holder.Store(0)
	hslHolders.remove(g)
	h.mu.Unlock()
}
