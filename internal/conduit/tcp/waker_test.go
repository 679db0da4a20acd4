package tcp

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/conduit"
)

// ringingMesh joins three transports in a mesh; ring waits (at most 10 s)
// for a ring of rank 0's waker, failing with what it waited after. Over
// three ranks, so that a socket that rang is told apart from one that did
// not.
func ringingMesh(t *testing.T) (trs []*Transport, ring func(after string)) {
	rings := make(chan struct{}, 16)
	trs = meshTransportsWake(t, 3, func(int, *Transport) conduit.Delivery { return func(*conduit.Incoming) {} },
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
	return trs, func(after string) {
		t.Helper()
		select {
		case <-rings:
		case <-time.After(10 * time.Second):
			t.Fatalf("no ring after %s", after)
		}
	}
}

// TestWakerRearmsOnlyReported: Arm arms a socket once and leaves it armed
// over later Arms until its input has been reported (an idle rank that
// wakes every sleepCap makes no epoll_ctl); the report rings the waker's
// bell; the next Arm re-arms it, and the next input rings again.
func TestWakerRearmsOnlyReported(t *testing.T) {
	trs, ring := ringingMesh(t)
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

// TestWakerSetKeepsOnlySleepySockets: a socket enters the waker's epoll set
// at its first arming; it stays there, disarmed, while the rank sleeps
// between every few messages, and leaves once dropAfter reads have found
// bytes on it since its last arming (an entry in the set puts a sleeper on
// the socket's wait queue, which every arriving segment walks); the next
// Arm adds it back. Read from the kernel's own list of the set,
// /proc/self/fdinfo.
func TestWakerSetKeepsOnlySleepySockets(t *testing.T) {
	trs, ring := ringingMesh(t)
	tr := trs[0]
	s1, s2 := tr.peers[1].sock, tr.peers[2].sock
	inSet := func() map[int]bool {
		t.Helper()
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", tr.w.epfd))
		if err != nil {
			t.Fatal(err)
		}
		m := map[int]bool{}
		for _, line := range strings.Split(string(b), "\n") {
			var fd int
			if _, err := fmt.Sscanf(line, "tfd: %d", &fd); err == nil && fd != tr.w.evfd {
				m[fd] = true
			}
		}
		return m
	}
	// oneAM sends one Short from rank 1 and polls rank 0 until it is
	// delivered: one read that finds bytes. waitRing: first wait for the
	// waker's ring (an event whose bytes are read before the waker looks
	// is not reported).
	oneAM := func(waitRing bool) {
		t.Helper()
		if err := trs[1].Send(0, conduit.Header{Cat: conduit.Short, IsReq: true, Handler: 1}, nil, 0); err != nil {
			t.Fatal(err)
		}
		trs[1].Poll(false, trs[1].d)
		if waitRing {
			ring("input from rank 1")
		}
		for deadline := time.Now().Add(10 * time.Second); tr.Poll(false, tr.d) == 0; {
			if time.Now().After(deadline) {
				t.Fatal("an AM from rank 1 was not delivered")
			}
		}
	}
	if got := inSet(); len(got) != 0 {
		t.Fatalf("before any Arm the set holds sockets %v", got)
	}
	oneAM(false) // a socket out of the set counts nothing
	if got := inSet(); len(got) != 0 {
		t.Fatalf("reads before any Arm put sockets %v in the set", got)
	}
	// A sleepy rank: arm, one AM rings, arm again.
	for round := range 3 {
		tr.Arm()
		if got := inSet(); !got[s1] || !got[s2] || len(got) != 2 {
			t.Fatalf("round %d: after Arm the set holds %v, want sockets %d and %d", round, got, s1, s2)
		}
		oneAM(true)
		for deadline := time.Now().Add(10 * time.Second); tr.peers[1].armed.Load(); {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the reported socket still counts as armed", round)
			}
			time.Sleep(time.Millisecond)
		}
		if got := inSet(); !got[s1] || !got[s2] {
			t.Fatalf("round %d: after one AM the set holds %v, want both sockets kept", round, got)
		}
	}
	// A busy rank: dropAfter reads since the last arming take the socket out.
	for range dropAfter {
		oneAM(false)
	}
	if got := inSet(); got[s1] || !got[s2] {
		t.Fatalf("after %d AMs from rank 1 the set holds %v: want socket %d out, %d in", dropAfter, got, s1, s2)
	}
	tr.Arm()
	if got := inSet(); !got[s1] || !got[s2] {
		t.Fatalf("after the next Arm the set holds %v, want %d and %d", got, s1, s2)
	}
	oneAM(true) // rings
}
