//go:build !race

package shm

import "testing"

// TestMsgRingWaiting: the lock-free hint sees a committed message, and stops
// seeing it once the consumer has published past it.
func TestMsgRingWaiting(t *testing.T) {
	q, _ := newTestMsgRing(t, 8)
	if q.Waiting() {
		t.Fatal("Waiting on a new ring")
	}
	for i := 0; i < 20; i++ {
		d, tk, ok := q.Reserve(100)
		if !ok {
			t.Fatal("Reserve failed")
		}
		if q.Waiting() {
			t.Fatal("Waiting before the Commit")
		}
		d[0] = 1
		q.Commit(tk)
		if !q.Waiting() {
			t.Fatal("not Waiting after a Commit")
		}
		if _, ok := q.Peek(); !ok {
			t.Fatal("Peek found nothing")
		}
		q.Release()
		if !q.Waiting() {
			t.Fatal("the hint changed before Publish")
		}
		q.Publish()
		if q.Waiting() {
			t.Fatal("Waiting after the message was consumed and published")
		}
	}
}
