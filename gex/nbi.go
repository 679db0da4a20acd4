package gex

import (
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/gctx"
)

// Implicit-event (NBI) operations, GASNet-EX "Extended API": gex_NBI_Test,
// gex_NBI_Wait and access regions.
//
// In C, NBI state belongs to the calling thread. gexgo keeps the outstanding
// NBI counts per client and category, shared by all goroutines: NBITest and
// NBIWait therefore synchronise every NBI operation of the client, a superset
// of the caller's own (never less than the spec requires). Access regions are
// per goroutine, as the spec's are per thread.

// nbiState is the client's implicit-event bookkeeping.
type nbiState struct {
	pending [5]atomic.Int64 // outstanding NBI operations by category bit index

	regions atomic.Int32 // number of open access regions (fast path: 0)
	mu      sync.Mutex   // guards open
	open    map[uintptr]*eventState
}

// ecIndex maps a single category to its counter.
func ecIndex(ec EC) int {
	switch ec {
	case ECGet:
		return 0
	case ECPut:
		return 1
	case ECAM:
		return 2
	case ECLC:
		return 3
	}
	return 4 // ECRMW
}

// region returns the access region the calling goroutine has open, or nil.
func (n *nbiState) region() *eventState {
	if n.regions.Load() == 0 {
		return nil
	}
	g := gctx.ID()
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.open[g]
}

// nbiTarget says how an NBI operation of category ec that has not completed
// yet is tracked: inside an open access region it adds a part to the region's
// root event; otherwise it counts in the client's pending NBI operations.
// It returns the state to pass to nbiDone.
func (c *Client) nbiStart(ec EC) (region *eventState) {
	if r := c.nbi.region(); r != nil {
		r.pending.Add(1)
		return r
	}
	c.nbi.pending[ecIndex(ec)].Add(1)
	return nil
}

// nbiDone retires an NBI operation started with nbiStart.
func (c *Client) nbiDone(ec EC, region *eventState, err error) {
	if region != nil {
		region.done(err)
		return
	}
	if err != nil {
		c.logf("NBI %v operation failed: %v", ec, err)
	}
	c.nbi.pending[ecIndex(ec)].Add(-1)
}

func (c *Client) nbiComplete(mask EC) bool {
	for i := 0; i < 5; i++ {
		if mask&(1<<i) != 0 && c.nbi.pending[i].Load() != 0 {
			return false
		}
	}
	return true
}

func checkECMask(op string, mask EC, flags Flags) error {
	if mask == 0 || mask&^ECAll != 0 {
		return badArg(op, "event_mask %#x must be a non-empty OR of GEX_EC_* constants", uint32(mask))
	}
	return checkZeroFlags(op, flags)
}

// NBITest implements gex_NBI_Test: nil if every outstanding NBI operation of
// the categories in mask has completed, ErrNotReady otherwise. Never polls.
func (c *Client) NBITest(mask EC, flags Flags) error {
	if err := checkECMask("NBITest", mask, flags); err != nil {
		return err
	}
	if err := c.checkRestricted("NBITest"); err != nil {
		return err
	}
	if c.nbiComplete(mask) {
		return nil
	}
	return ErrNotReady
}

// NBIWait implements gex_NBI_Wait: polls until every outstanding NBI operation
// of the categories in mask has completed.
func (c *Client) NBIWait(mask EC, flags Flags) error {
	if err := checkECMask("NBIWait", mask, flags); err != nil {
		return err
	}
	if c.nbiComplete(mask) {
		return c.checkRestricted("NBIWait")
	}
	return c.blockUntil("NBIWait", func() bool { return c.nbiComplete(mask) })
}

// NBIBeginAccessRegion implements gex_NBI_BeginAccessRegion: until the
// matching NBIEndAccessRegion, every NBI operation this goroutine initiates
// is collected into one root event instead of the implicit NBI set. Regions do
// not nest: a second Begin on the same goroutine is an error.
func (c *Client) NBIBeginAccessRegion(flags Flags) error {
	if err := checkZeroFlags("NBIBeginAccessRegion", flags); err != nil {
		return err
	}
	if err := c.checkRestricted("NBIBeginAccessRegion"); err != nil {
		return err
	}
	g := gctx.ID()
	c.nbi.mu.Lock()
	defer c.nbi.mu.Unlock()
	if c.nbi.open[g] != nil {
		return badArg("NBIBeginAccessRegion", "an access region is already open on this goroutine (regions do not nest)")
	}
	if c.nbi.open == nil {
		c.nbi.open = map[uintptr]*eventState{}
	}
	c.nbi.open[g] = c.newEvent(1) // the extra part is the region itself, removed at End
	c.nbi.regions.Add(1)
	return nil
}

// NBIEndAccessRegion implements gex_NBI_EndAccessRegion: it closes the
// goroutine's access region and returns a root event that completes when
// every operation initiated inside it has.
func (c *Client) NBIEndAccessRegion(flags Flags) (Event, error) {
	if err := checkZeroFlags("NBIEndAccessRegion", flags); err != nil {
		return EventInvalid, err
	}
	g := gctx.ID()
	c.nbi.mu.Lock()
	s := c.nbi.open[g]
	if s != nil {
		delete(c.nbi.open, g)
		c.nbi.regions.Add(-1)
	}
	c.nbi.mu.Unlock()
	if s == nil {
		return EventInvalid, badArg("NBIEndAccessRegion", "no access region is open on this goroutine")
	}
	ev := s.handle()
	s.done(nil) // the region is closed
	return ev, nil
}
