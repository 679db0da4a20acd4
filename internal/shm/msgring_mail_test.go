package shm

import (
	"encoding/binary"
	"runtime"
	"sync"
	"testing"
)

// TestMsgRingMail: the mailbox holds one message at a time, outside the
// ring's order; Empty sees it; a claimed but uncommitted mailbox is not a
// message; releasing it makes room for the next.
func TestMsgRingMail(t *testing.T) {
	q, b := newTestMsgRing(t, 8)
	if _, ok := q.PeekMail(); ok || !q.Empty() {
		t.Fatal("a new ring's mailbox holds a message")
	}
	d, ok := q.ReserveMail()
	if !ok || len(d) != MailData || cap(d) != MailData {
		t.Fatalf("ReserveMail = %d bytes (cap %d) %v, want %d", len(d), cap(d), ok, MailData)
	}
	if _, ok := q.ReserveMail(); ok {
		t.Fatal("a second ReserveMail claimed the mailbox a first one holds")
	}
	if _, ok := q.PeekMail(); ok || !q.Empty() {
		t.Fatal("a claimed, uncommitted mailbox reads as a message")
	}
	binary.LittleEndian.PutUint64(d, 0xfeedface)
	// The ring works beside it.
	if !sendMsg(q, 7, 20) {
		t.Fatal("Reserve failed beside a claimed mailbox")
	}
	q.CommitMail()
	if q.Empty() {
		t.Fatal("Empty with a committed mailbox")
	}
	m, ok := q.PeekMail()
	if !ok || binary.LittleEndian.Uint64(m) != 0xfeedface {
		t.Fatalf("PeekMail = %v, %v", ok, m)
	}
	if _, ok := q.ReserveMail(); ok {
		t.Fatal("ReserveMail claimed a mailbox that holds a message")
	}
	q.ReleaseMail()
	if _, ok := q.PeekMail(); ok {
		t.Fatal("PeekMail after ReleaseMail")
	}
	if data, ok := q.Peek(); !ok || binary.LittleEndian.Uint32(data[4:]) != 7 {
		t.Fatalf("the ring's message: %v %v", ok, data)
	}
	q.Release()
	q.Publish()
	if !q.Empty() {
		t.Fatal("not Empty after both messages")
	}
	// The failed ReserveMails above left the hint skipping the mailbox
	// for at most mailSkipAfterBusy calls; then it is claimed again.
	skipped := 0
	for {
		if _, ok := q.ReserveMail(); ok {
			break
		}
		if skipped++; skipped > mailSkipAfterBusy {
			t.Fatalf("ReserveMail still fails %d calls after ReleaseMail", skipped)
		}
	}
	if skipped == 0 {
		t.Fatal("ReserveMail after failures did not skip the mailbox")
	}
	// Whatever a peer writes into the mailbox word, PeekMail returns its
	// fixed data or nothing, and does not panic.
	for _, w := range []uint64{1, mrTagBit, ^uint64(0), 0xffff<<32 | mrTagBit} {
		binary.LittleEndian.PutUint64(b[mrOffMail:], w)
		if m, ok := q.PeekMail(); ok != (w&mrTagBit != 0) || ok && len(m) != MailData {
			t.Fatalf("word %#x: PeekMail = %d bytes %v", w, len(m), ok)
		}
	}
}

// TestMsgRingMailConcurrent: producers that try the mailbox first and the
// ring when it is taken, and a consumer draining the mailbox and then the
// ring, deliver every message exactly once.
func TestMsgRingMailConcurrent(t *testing.T) {
	const producers, each = 4, 5000
	q, _ := newTestMsgRing(t, 16)
	var wg sync.WaitGroup
	mailed := make([]int, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := uint64(p*each + i)
				if d, ok := q.ReserveMail(); ok {
					binary.LittleEndian.PutUint64(d, id)
					q.CommitMail()
					mailed[p]++
					continue
				}
				for {
					if d, tk, ok := q.Reserve(8); ok {
						binary.LittleEndian.PutUint64(d, id)
						q.Commit(tk)
						break
					}
					runtime.Gosched()
				}
			}
		}()
	}
	seen := make([]bool, producers*each)
	for got := 0; got < producers*each; {
		take := func(d []byte) {
			id := binary.LittleEndian.Uint64(d)
			if id >= uint64(len(seen)) || seen[id] {
				t.Fatalf("message %d: unknown or delivered twice", id)
			}
			seen[id] = true
			got++
		}
		if d, ok := q.PeekMail(); ok {
			take(d)
			q.ReleaseMail()
		}
		for {
			d, ok := q.Peek()
			if !ok {
				break
			}
			take(d)
			q.Release()
		}
		q.Publish()
		runtime.Gosched()
	}
	wg.Wait()
	if !q.Empty() {
		t.Fatal("not Empty at the end")
	}
	n := 0
	for _, m := range mailed {
		n += m
	}
	t.Logf("%d of %d messages through the mailbox", n, producers*each)
}
