package gex

import (
	"testing"

	"github.com/gexgo/gexgo/internal/conduit"
)

// waitCounter is a conduit whose PollWait (conduit.Waiter) counts its calls.
type waitCounter struct {
	conduit.Conduit
	waits int
}

func (w *waitCounter) PollWait(repliesOnly bool) int {
	w.waits++
	return w.Conduit.Poll(repliesOnly)
}

// TestWaitPollByMode: a library wait (BlockUntil) past its quick polls calls
// the conduit's PollWait, which may sleep, in the block and spin-block wait
// modes ("yield CPU resources ... while waiting") and only the plain Poll,
// which never sleeps, in the spin mode ("contend aggressively for CPU
// resources while waiting"; gasnet_set_waitmode, spec 3.6.2.1). The user's
// Poll (AMPoll) never calls PollWait.
func TestWaitPollByMode(t *testing.T) {
	lj, err := NewLoopJob(LoopConfig{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, _, _, err := lj.ClientInit(0, "WAITPOLL", 0, WithReceiveGoroutine(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := &waitCounter{Conduit: c.cd}
	c.waiter = w
	for _, m := range []WaitMode{WaitSpin, WaitSpinBlock, WaitBlock} {
		if err := c.SetWaitMode(m); err != nil {
			t.Fatal(err)
		}
		w.waits = 0
		evals := 0
		if err := c.BlockUntil(func() bool { evals++; return evals > quickPolls+20 }); err != nil {
			t.Fatal(err)
		}
		switch {
		case m == WaitSpin && w.waits != 0:
			t.Errorf("wait mode %v: the wait called PollWait %d times (spin: plain Poll only)", m, w.waits)
		case m != WaitSpin && w.waits == 0:
			t.Errorf("wait mode %v: the wait never called PollWait", m)
		}
		w.waits = 0
		for range 10 {
			if err := c.Poll(); err != nil {
				t.Fatal(err)
			}
		}
		if w.waits != 0 {
			t.Errorf("wait mode %v: the user's Poll called PollWait %d times", m, w.waits)
		}
	}
}
