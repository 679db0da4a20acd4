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

// tagAt returns the commit tag of the message starting at ticket pos.
func (q *MsgRing) tagAt(pos uint64) *atomic.Uint32 {
	return (*atomic.Uint32)(q.slotPtr(pos))
}

// word returns the slot count and flags of the message starting at pos
// (read after its tag).
func (q *MsgRing) word(pos uint64) (k uint64, flags uint16) {
	w := *(*uint32)(unsafe.Add(q.slotPtr(pos), 4))
	return uint64(w & 0xffff), uint16(w >> 16)
}

// setWord writes the slot count and flags of the message starting at pos
// (before its Commit).
func (q *MsgRing) setWord(pos, k uint64, flags uint16) {
	*(*uint32)(unsafe.Add(q.slotPtr(pos), 4)) = uint32(k) | uint32(flags)<<16
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
