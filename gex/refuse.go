package gex

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/internal/conduit"
)

// A refused AM is never a silent drop (docs/am.md, "Refused AMs").
//
// The target re-checks every AM before anything runs (am.go, deliver). What
// it refuses ends the job by default: one line naming the sender, the
// target, the handler and the reason (through Abort, so the launcher prints
// it), as GASNet's checking build does. GEX_AM_REFUSE=drop keeps the older
// behaviour (print, count and drop), for programs that test hostile peers.
//
// An AM for a handler index that is not registered yet may only have
// arrived early: a peer that registered its handlers and sent at once, while
// this rank's receive goroutine ran before this rank's RegisterHandlers. Such
// AMs are held (at most heldMax AMs and heldBytes payload bytes) and
// delivered by the RegisterHandlers that registers their index; they are
// refused when this rank makes its next collective call with the index still
// unregistered, when one has been held for heldWait (a timer sees to it even
// if this rank makes no library call), or when the hold is full.

// EnvAMRefuse selects what a refused AM does: "fatal" (default) or "drop".
const EnvAMRefuse = "GEX_AM_REFUSE"

// Bounds of the hold of AMs that arrived before their handler was registered.
const (
	heldMax   = 256
	heldBytes = 1 << 20
	heldWait  = 2 * time.Second
)

// heldAM is an AM kept until its handler index is registered.
type heldAM struct {
	in      conduit.Incoming // Payload is a copy
	arrived time.Time
}

// holdState is the client's hold; mu guards list and bytes.
type holdState struct {
	mu    sync.Mutex
	list  []heldAM
	bytes int
	n     atomic.Int32 // len(list), read without mu on the polling paths
	drop  bool         // GEX_AM_REFUSE=drop

	run sync.Mutex // one release at a time: guards tok
	tok Token      // the token of released AMs (handler context 2)
}

// hold keeps in for later delivery and reports whether it did (false: the
// hold is full, or in is a Long that must be placed now).
func (c *Client) hold(in *conduit.Incoming) bool {
	h := &c.held
	if in.Cat == conduit.Long && in.Placed {
		return false // its bytes are already in the segment: refuse now
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.list) >= heldMax || h.bytes+len(in.Payload) > heldBytes {
		return false
	}
	cp := *in
	cp.Payload = bytes.Clone(in.Payload)
	h.list = append(h.list, heldAM{in: cp, arrived: time.Now()})
	h.bytes += len(cp.Payload)
	h.n.Store(int32(len(h.list)))
	if len(h.list) == 1 {
		c.armHeldTimer(heldWait)
	}
	return true
}

// armHeldTimer makes the held AMs expire after d even if this rank makes no
// library call (it computes, or waits outside the library).
func (c *Client) armHeldTimer(d time.Duration) {
	time.AfterFunc(d+time.Millisecond, c.expireHeld)
}

// releaseHeld delivers the held AMs whose index is now registered (after
// RegisterHandlers); with refuseRest it refuses the others (at a collective
// call), and with expired those held longer than heldWait.
func (c *Client) releaseHeld(refuseRest bool) {
	h := &c.held
	if h.n.Load() == 0 {
		return
	}
	h.run.Lock()
	defer h.run.Unlock()
	h.mu.Lock()
	var ready, refuse []heldAM
	keep := h.list[:0]
	now := time.Now()
	for _, a := range h.list {
		switch {
		case c.epAt(a.in.EP) != nil && c.epAt(a.in.EP).handlers[a.in.Handler].Load() != nil:
			ready = append(ready, a)
		case refuseRest || now.Sub(a.arrived) >= heldWait:
			refuse = append(refuse, a)
		default:
			keep = append(keep, a)
		}
	}
	h.list = keep
	h.bytes = 0
	for _, a := range keep {
		h.bytes += len(a.in.Payload)
	}
	h.n.Store(int32(len(keep)))
	if len(keep) > 0 && !refuseRest {
		c.armHeldTimer(heldWait - now.Sub(keep[0].arrived))
	}
	h.mu.Unlock()
	for i := range ready {
		c.deliverWith(&ready[i].in, &h.tok)
	}
	for i := range refuse {
		in := &refuse[i].in
		why := "no handler was registered for it before this rank's next collective call"
		if !refuseRest {
			why = fmt.Sprintf("it was held %v and no handler was registered for it", heldWait)
		}
		c.reject(in, "handler index %d is not registered (%s)", in.Handler, why)
	}
}

// expireHeld refuses the AMs held too long; cheap when nothing is held.
func (c *Client) expireHeld() {
	if c.held.n.Load() != 0 {
		c.releaseHeld(false)
	}
}

// refuse ends the job for a refused AM, or (GEX_AM_REFUSE=drop) prints the
// first 20 and drops them. line names the sender, this rank, the handler
// and the reason.
func (c *Client) refuse(line string) {
	if !c.held.drop {
		c.cd.Abort(line)
		return
	}
	if c.rejectLog.Add(1) <= 20 {
		fmt.Fprintf(os.Stderr, "gexgo: rank %d: %s (dropped)\n", c.rank, line)
	}
}
