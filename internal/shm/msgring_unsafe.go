package shm

import (
	"sync/atomic"
	"unsafe"
)

// Slot addressing of a MsgRing without bounds checks: positions are masked,
// so a slot is always one of the nslots slots newMsgRing found inside b,
// and a message's slots never run past the last one (Peek clamps a count
// that would).

func (q *MsgRing) slotPtr(pos uint64) unsafe.Pointer {
	return unsafe.Add(q.slots, (pos&q.mask)*MsgSlotSize)
}

// wordAt returns the message word of the slot at pos (8-byte aligned: the
// slots are 64-byte aligned).
func (q *MsgRing) wordAt(pos uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(q.slotPtr(pos))
}

// clearWord zeroes the message word of the slot at pos, so that whatever
// data a message left there never reads as the tag of a later one.
func (q *MsgRing) clearWord(pos uint64) {
	*(*uint64)(q.slotPtr(pos)) = 0
}

// data returns the data of the k-slot message starting at pos: len == cap,
// so appending cannot spill past its last slot.
func (q *MsgRing) data(pos, k uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(q.slotPtr(pos), mrMsgHeader)), k*MsgSlotSize-mrMsgHeader)
}
