//go:build race

package smp

import (
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/gctx"
)

// ringWaiting reports whether inbound ring qi may hold an AM. Under the race
// detector it asks as the consumer (a lock-free look at the ring reads slot
// words that producers rewrite without a happens-before edge, see
// shm.MsgRing.Waiting): it takes the ring's consumer lock if free and looks;
// a ring being consumed by another goroutine counts as waiting.
func (c *Conduit) ringWaiting(qi int) bool {
	if !c.own[qi].CompareAndSwap(0, gctx.ID()) {
		return true
	}
	w := !c.inbound[qi].Empty()
	c.own[qi].Store(0)
	return w
}

// addOutside adds n to a counter of AMs taken outside the rings' slots
// (see waiting_norace.go): atomically under the race detector.
func addOutside(w *atomic.Uint64, n int) { w.Add(uint64(n)) }
