package shm

import (
	"sync/atomic"
	"unsafe"
)

// Slot addressing for the hot path, without bounds checks: pos is masked, so
// the slot is always one of the nslots slots that newRing checked to lie
// inside q.slots, whatever value pos (read from shared memory) has.

func (q *Ring) slotPtr(pos uint64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(q.slots)), (pos&q.mask)*q.slotSize)
}

// seqAt returns the sequence word of the slot of ticket pos (8-byte aligned:
// the ring is 64-byte aligned and slotSize a multiple of 64).
func (q *Ring) seqAt(pos uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(q.slotPtr(pos))
}

// dataAt returns the data bytes of the slot of ticket pos, len == cap ==
// SlotSize() so that appending cannot spill into the next slot.
func (q *Ring) dataAt(pos uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(q.slotPtr(pos), slotOffData)), q.dataSize)
}
