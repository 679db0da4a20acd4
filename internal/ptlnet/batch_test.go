package ptlnet

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestBatch: with Config.Batch, shared-memory messages (from another Net of this process)
// and messages to oneself go to Batch.Handle, each between a Batch.Begin and its Batch.End
// in one goroutine, in order; the plain Handler gets none of them; a Batch missing a
// function is refused.
func TestBatch(t *testing.T) {
	var inRun atomic.Bool
	var begins, ends, outside, plain atomic.Int64
	var got []byte // under the run (Handle calls are serialized)
	b := &Batch{
		Begin: func() {
			if inRun.Swap(true) {
				outside.Add(1) // Begin inside a run
			}
			begins.Add(1)
		},
		End: func() {
			if !inRun.Swap(false) {
				outside.Add(1) // End without Begin
			}
			ends.Add(1)
		},
		Handle: func(_ Peer, hdr, _ []byte) {
			if !inRun.Load() {
				outside.Add(1)
			}
			got = append(got, hdr[0])
		},
	}
	var done atomic.Int64
	inner := b.Handle
	b.Handle = func(p Peer, hdr, pl []byte) { inner(p, hdr, pl); done.Add(1) }
	n, err := Open(Config{PID: PIDAny, NoTCP: true, Batch: b}, func(Peer, []byte, []byte) { plain.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	other := open(t, PIDAny, func(Peer, []byte, []byte) {})
	const k = 200
	for i := 0; i < k; i++ {
		src := n
		if i%2 == 1 {
			src = other
		}
		if err := src.Send(n.ID(), []byte{byte(i)}, []byte("p")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for done.Load() < k {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages handled after 60 s", done.Load(), k)
		}
		n.Poll()
		time.Sleep(time.Millisecond)
	}
	n.Close()
	if plain.Load() != 0 || outside.Load() != 0 {
		t.Fatalf("%d messages to the plain Handler, %d calls outside a Begin/End run", plain.Load(), outside.Load())
	}
	if begins.Load() == 0 || begins.Load() != ends.Load() {
		t.Fatalf("Begin %d times, End %d times", begins.Load(), ends.Load())
	}
	// per source, in order
	var last [2]int
	last[0], last[1] = -2, -1
	for _, h := range got {
		s := int(h) % 2
		if int(h) != last[s]+2 {
			t.Fatalf("message %d after %d from the same source", h, last[s])
		}
		last[s] = int(h)
	}
	for _, bad := range []*Batch{{Begin: func() {}, End: func() {}}, {Begin: func() {}, Handle: b.Handle}, {End: func() {}, Handle: b.Handle}} {
		if n, err := Open(Config{PID: PIDAny, NoTCP: true, Batch: bad}, func(Peer, []byte, []byte) {}); err == nil {
			n.Close()
			t.Errorf("Open accepted a Batch missing a function")
		}
	}
}
