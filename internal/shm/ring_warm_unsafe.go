package shm

import (
	"sync/atomic"
	"unsafe"
)

// Warm readies the slot the producer's next TryReserve will claim: each 64-byte line of its
// first n bytes (the sequence word's line at least) gets a compare-and-swap of its first word
// with the value it holds, which changes nothing but brings the line into this core's cache
// for writing. The consumer's Release last wrote the slot, so without it the next send takes
// that miss on its own critical path; a producer about to wait (for a reply) calls Warm
// while waiting. It does nothing if the slot is not free. Producer only; safe against
// concurrent producers and the consumer (a compare-and-swap that finds another value fails).
func (q *Ring) Warm(n int) {
	pos := q.tail.Load()
	seq := q.seqAt(pos)
	if !seq.CompareAndSwap(pos, pos) {
		return
	}
	for off := uint64(64); off < uint64(n) && off < q.slotSize; off += 64 {
		w := (*atomic.Uint64)(unsafe.Add(q.slotPtr(pos), off))
		v := w.Load()
		w.CompareAndSwap(v, v)
	}
}
