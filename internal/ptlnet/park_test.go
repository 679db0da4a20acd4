package ptlnet

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestParkWhilePolling: while an application goroutine polls inline, the progress goroutine
// parks (and the poller handles what arrives); after PollStop the progress goroutine alone
// delivers, with no Poll at all; and a poller that just goes away without PollStop is taken
// over within the park's bound. Nothing is lost or handled twice on the way.
func TestParkWhilePolling(t *testing.T) {
	var got atomic.Int64
	var byPoll atomic.Bool // set while the test goroutine polls
	var polled atomic.Int64
	n := open(t, PIDAny, func(Peer, []byte, []byte) {
		got.Add(1)
		if byPoll.Load() {
			polled.Add(1)
		}
	})
	src := open(t, PIDAny, func(Peer, []byte, []byte) {})
	waitFor := func(want int64, what string) {
		deadline := time.Now().Add(60 * time.Second)
		for got.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d messages handled after 60 s", what, got.Load(), want)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	sent := int64(0)
	send := func(k int) {
		for i := 0; i < k; i++ {
			if err := src.Send(n.ID(), []byte("h"), []byte("p")); err != nil {
				t.Fatal(err)
			}
			sent++
		}
	}
	for round := 0; round < 3; round++ {
		// Poll inline until the progress goroutine has parked, then send: the poller
		// handles the messages.
		byPoll.Store(true)
		deadline := time.Now().Add(60 * time.Second)
		for !n.parked.Load() {
			n.Poll()
			if time.Now().After(deadline) {
				t.Fatal("the progress goroutine did not park while Poll was called")
			}
		}
		before := polled.Load()
		send(50)
		for got.Load() < sent {
			n.Poll()
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of %d messages handled by polling", round, got.Load(), sent)
			}
		}
		// Mostly the poller's (a park that times out meanwhile lets the progress
		// goroutine in: not an error).
		t.Logf("round %d: %d of 50 handled by the poller", round, polled.Load()-before)
		byPoll.Store(false)
		if round%2 == 0 {
			n.PollStop() // a wait about to block
		} // else: the poller just stops; the park ends by itself
		send(50)
		waitFor(sent, "after the poller stopped")
	}
	if g := got.Load(); g != sent {
		t.Fatalf("handled %d messages, sent %d", g, sent)
	}
}
