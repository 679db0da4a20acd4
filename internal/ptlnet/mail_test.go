package ptlnet

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/shm"
)

// The ring's mailbox (shm.MsgRing.ReserveMail) carries one-slot eager frames
// (a Portals short put: 40-byte header, 8-byte payload) outside the ring's
// order; these tests check that every message still arrives exactly once
// and in the order sent (Portals 4.3 section 2.7, Ordering (2.7.1, 2.7.2): messages from one
// initiator to one target are delivered in order).

// mailHdr is a header of n bytes carrying sequence number i.
func mailHdr(i, n int) []byte {
	h := make([]byte, n)
	binary.LittleEndian.PutUint64(h, uint64(i))
	return h
}

func mailConn(t *testing.T, a, b *Net) *shmConn {
	t.Helper()
	sc, ok := (*a.routes.Load())[b.ID()].(*shmConn)
	if !ok {
		t.Fatal("no shared-memory connection")
	}
	return sc
}

func lastMail(sc *shmConn) bool {
	sc.txMu.Lock()
	defer sc.txMu.Unlock()
	return sc.lastMail
}

// checkSeq fails unless msgs carry the sequence numbers want, in order.
func checkSeq(t *testing.T, msgs []rec, want ...int) {
	t.Helper()
	if len(msgs) != len(want) {
		t.Fatalf("got %d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if got := int(binary.LittleEndian.Uint64(m.hdr)); got != want[i] {
			t.Fatalf("message %d has sequence number %d, want %d", i, got, want[i])
		}
	}
}

// TestMailboxBeforeRing: a short frame that went to the mailbox is delivered
// before a ring frame sent after it, even when the receiver finds both at
// once.
func TestMailboxBeforeRing(t *testing.T) {
	if shortPut := sOffEager + 40 + 8; shortPut > shm.MailData {
		t.Fatalf("a short put frame (%d bytes) does not fit the mailbox (%d)", shortPut, shm.MailData)
	}
	c := newCollector()
	b := open(t, PIDAny, c.handle)
	a := open(t, PIDAny, func(Peer, []byte, []byte) {})
	if err := a.Send(b.ID(), mailHdr(0, 80), nil); err != nil { // connects
		t.Fatal(err)
	}
	c.wait(t, 1)
	sc := mailConn(t, a, b)
	// b's receive lock held: b takes nothing until both frames are in.
	b.rxMu.Lock()
	err1 := a.Send(b.ID(), mailHdr(1, 40), make([]byte, 8))
	viaMail := lastMail(sc)
	err2 := a.Send(b.ID(), mailHdr(2, 80), make([]byte, 8))
	b.rxMu.Unlock()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !viaMail {
		t.Fatal("the short frame, sent with nothing outstanding, did not go through the mailbox")
	}
	checkSeq(t, c.wait(t, 3), 0, 1, 2)
	time.Sleep(10 * time.Millisecond)
	checkSeq(t, c.wait(t, 3), 0, 1, 2) // once each
}

// TestMailboxNotPastRing: a short frame sent while earlier ring frames are
// still undelivered goes to the ring, not the mailbox, which the receiver
// would take first.
func TestMailboxNotPastRing(t *testing.T) {
	c := newCollector()
	entered, release := make(chan struct{}), make(chan struct{})
	b := open(t, PIDAny, func(src Peer, hdr, payload []byte) {
		if binary.LittleEndian.Uint64(hdr) == 1 {
			close(entered)
			<-release
		}
		c.handle(src, hdr, payload)
	})
	a := open(t, PIDAny, func(Peer, []byte, []byte) {})
	if err := a.Send(b.ID(), mailHdr(0, 80), nil); err != nil {
		t.Fatal(err)
	}
	c.wait(t, 1)
	sc := mailConn(t, a, b)
	if err := a.Send(b.ID(), mailHdr(1, 80), nil); err != nil { // held in b's Handler
		t.Fatal(err)
	}
	<-entered
	if err := a.Send(b.ID(), mailHdr(2, 80), nil); err != nil { // waits in the ring
		t.Fatal(err)
	}
	if err := a.Send(b.ID(), mailHdr(3, 40), make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if lastMail(sc) {
		t.Error("a short frame went to the mailbox with earlier ring frames undelivered")
	}
	close(release)
	checkSeq(t, c.wait(t, 4), 0, 1, 2, 3)
	// Everything delivered: a short frame takes the mailbox again (after at
	// most mailSkipAfterRing that skip the look at the ring's position).
	viaMail := false
	for i := 4; i < 4+mailSkipAfterRing+2 && !viaMail; i++ {
		if err := a.Send(b.ID(), mailHdr(i, 40), make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		viaMail = lastMail(sc)
		c.wait(t, i+1)
	}
	if !viaMail {
		t.Error("no short frame sent with nothing outstanding went through the mailbox")
	}
	msgs := c.wait(t, 0)
	want := make([]int, len(msgs))
	for i := range want {
		want[i] = i
	}
	checkSeq(t, msgs, want...)
}

// TestMailboxMixedOrder: short, two-slot and bulk frames interleaved, in
// round trips and in floods, arrive exactly once each and in order, and
// some of them went through the mailbox.
func TestMailboxMixedOrder(t *testing.T) {
	c := newCollector()
	b := open(t, PIDAny, c.handle)
	a := open(t, PIDAny, func(Peer, []byte, []byte) {})
	const k = 6000
	mailed := 0
	var want []int
	for i := 0; i < k; i++ {
		var err error
		switch {
		case i%97 == 5:
			err = a.Send(b.ID(), mailHdr(i, 40), make([]byte, 3*txBufSize/2)) // bulk
		case i%3 == 1:
			err = a.Send(b.ID(), mailHdr(i, 80), make([]byte, 8)) // two slots
		default:
			err = a.Send(b.ID(), mailHdr(i, 40), make([]byte, 8)) // short put
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, i)
		if i%500 < 50 { // round trips: one message in flight
			c.wait(t, i+1)
		}
		if lastMail(mailConn(t, a, b)) {
			mailed++
		}
	}
	checkSeq(t, c.wait(t, k), want...)
	if mailed < 10 {
		t.Fatalf("only %d frames went through the mailbox", mailed)
	}
	t.Logf("%d of %d frames through the mailbox", mailed, k)
}
