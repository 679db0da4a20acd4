package smp

import (
	"testing"

	"github.com/gexgo/gexgo/internal/shm"
)

// TestFenceChoice: a producer commits to a peer's rings with a release store
// only when both its own process and the peer (its region header word) use
// the membarrier; every other combination keeps the seq-cst commit.
func TestFenceChoice(t *testing.T) {
	heap := shm.NewHeap()
	rb := shm.MsgRingBytes(64)
	for _, tc := range []struct{ self, peer, want bool }{
		{true, true, true}, {true, false, false}, {false, true, false}, {false, false, false},
	} {
		reg, err := heap.Create("fence", offRings+2*rb)
		if err != nil {
			t.Fatal(err)
		}
		b := reg.Bytes()
		if tc.peer {
			shm.Uint32At(b, offFenced).Store(fencedYes)
		}
		var pr peer
		for i := range pr.ring {
			if pr.ring[i], err = shm.InitMsgRing(b[offRings+i*rb:offRings+(i+1)*rb], 64); err != nil {
				t.Fatal(err)
			}
		}
		c := &Conduit{fenced: tc.self}
		c.attachFence(&pr, b)
		for i, q := range pr.ring {
			if q.ReleaseCommit() != tc.want {
				t.Errorf("self fenced %v, peer fenced %v: ring %d release commit %v, want %v",
					tc.self, tc.peer, i, q.ReleaseCommit(), tc.want)
			}
		}
	}
}
