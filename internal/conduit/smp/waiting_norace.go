//go:build !race

package smp

import (
	"sync/atomic"
	"unsafe"
)

// ringWaiting reports whether inbound ring qi may hold an AM: a look at the
// ring without its consumer lock (shm.MsgRing.Waiting), one load of the
// head and one of a slot word, cheap enough for every poll.
func (c *Conduit) ringWaiting(qi int) bool { return c.inbound[qi].Waiting() }

// addOutside adds n to a counter of AMs taken outside the rings' slots
// (Conduit.outside), written by one consumer at a time and read by the
// progress watch: a plain add (the watch reads a count, never data
// through it), where an atomic one would be a locked instruction and
// shm.StoreRelease64 a call per drain.
func addOutside(w *atomic.Uint64, n int) { *(*uint64)(unsafe.Pointer(w)) += uint64(n) }
