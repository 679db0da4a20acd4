package shm

import (
	"encoding/binary"
	"testing"
)

// alignedBytes returns n zero bytes starting on a 64-byte boundary.
func alignedBytes(n int) []byte {
	raw := make([]byte, n+63)
	off := int(-addrOf(raw) & 63)
	return raw[off : off+n : off+n]
}

// newTestRing formats a ring in fresh aligned heap memory.
func newTestRing(t testing.TB, nslots, slotSize int) (*Ring, []byte) {
	t.Helper()
	b := alignedBytes(RingBytes(nslots, slotSize))
	q, err := InitRing(b, nslots, slotSize)
	if err != nil {
		t.Fatalf("InitRing(%d, %d): %v", nslots, slotSize, err)
	}
	return q, b
}

// push writes v into the first 8 data bytes of a new message; false if full.
func push(q *Ring, v uint64) bool {
	d, t, ok := q.TryReserve()
	if !ok {
		return false
	}
	binary.LittleEndian.PutUint64(d, v)
	q.Commit(t)
	return true
}

// pop returns the first 8 data bytes of the next message; false if empty.
func pop(q *Ring) (uint64, bool) {
	d, ok := q.Peek()
	if !ok {
		return 0, false
	}
	v := binary.LittleEndian.Uint64(d)
	q.Release()
	return v, true
}
