package shm

import (
	"bytes"
	"testing"
)

// TestRingWarm: Warm changes no byte of the ring, whether the next slot is free or still
// holds a message (ring full), and the queue goes on in order after it.
func TestRingWarm(t *testing.T) {
	q, b := newTestRing(t, 4, 128)
	for round := 0; round < 3; round++ {
		for i := uint64(0); i < 4; i++ {
			before := append([]byte(nil), b...)
			q.Warm(128)
			if !bytes.Equal(before, b) {
				t.Fatalf("round %d: Warm changed the ring's bytes", round)
			}
			if !push(q, uint64(round*10)+i) {
				t.Fatalf("round %d: push %d failed", round, i)
			}
		}
		before := append([]byte(nil), b...)
		q.Warm(1 << 20) // full ring: the next slot holds a message
		if !bytes.Equal(before, b) {
			t.Fatal("Warm on a full ring changed its bytes")
		}
		for i := uint64(0); i < 4; i++ {
			if v, ok := pop(q); !ok || v != uint64(round*10)+i {
				t.Fatalf("round %d: pop %d = %d, %v", round, i, v, ok)
			}
		}
	}
}
