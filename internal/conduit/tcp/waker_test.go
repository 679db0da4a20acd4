package tcp

import (
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/conduit"
)

// TestWakerRearmsOnlyReported: Arm arms a socket once and leaves it armed
// over later Arms until its input has been reported (an idle rank that
// wakes every sleepCap makes no epoll_ctl); the report rings the waker's
// bell; the next Arm re-arms it, and the next input rings again. Over a
// mesh of three ranks, so that the socket that rang is told apart from the
// one that did not.
func TestWakerRearmsOnlyReported(t *testing.T) {
	rings := make(chan struct{}, 16)
	trs := meshTransportsWake(t, 3, func(int, *Transport) conduit.Delivery { return func(*conduit.Incoming) {} },
		func(r int) func() {
			if r != 0 {
				return func() {}
			}
			return func() {
				select {
				case rings <- struct{}{}:
				default: // never block the waker's goroutine
				}
			}
		})
	tr := trs[0]
	from1, from2 := tr.peers[1], tr.peers[2]
	h := conduit.Header{Cat: conduit.Short, IsReq: true, Handler: 1}
	send := func(src int) {
		t.Helper()
		if err := trs[src].Send(0, h, nil, 0); err != nil {
			t.Fatal(err)
		}
		trs[src].Poll(false, trs[src].d) // writes it if it was batched
	}
	ring := func(what string) {
		t.Helper()
		select {
		case <-rings:
		case <-time.After(10 * time.Second):
			t.Fatalf("no ring after %s", what)
		}
	}
	for range 3 {
		tr.Arm()
	}
	if !from1.armed.Load() || !from2.armed.Load() {
		t.Fatal("Arm left a socket unarmed")
	}
	for round := range 3 {
		send(1)
		ring("input from rank 1")
		for deadline := time.Now().Add(10 * time.Second); from1.armed.Load(); {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the reported socket still counts as armed", round)
			}
			time.Sleep(time.Millisecond)
		}
		if !from2.armed.Load() {
			t.Fatalf("round %d: the quiet socket lost its arming", round)
		}
		for deadline := time.Now().Add(10 * time.Second); tr.Poll(false, tr.d) == 0; {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the AM that rang was not delivered", round)
			}
		}
		tr.Arm()
		if !from1.armed.Load() {
			t.Fatalf("round %d: Arm did not re-arm the reported socket", round)
		}
	}
	send(2) // armed since the first Arm, never re-armed
	ring("input from rank 2")
}
