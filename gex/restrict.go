package gex

import (
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/gctx"
)

// GASNet-EX "Calls from restricted context": inside an AM handler, while
// holding a handler-safe lock, and between an AM Prepare and its Commit, only a
// short list of calls is permitted. In C these are properties of the calling
// thread; here they are properties of the calling goroutine, identified by
// gctx.ID.
//
// A gset is a multiset of goroutine IDs: a goroutine is added once per nested
// context it enters (a handler that takes an HSL is in the set twice). The
// common query "is the caller in the set?" costs one atomic load when the set
// is empty and a scan of a few words otherwise.
type gset struct {
	n     atomic.Int32
	slots [32]atomic.Uintptr

	mu       sync.Mutex // guards overflow
	overflow map[uintptr]int
}

func (s *gset) add(g uintptr) {
	s.n.Add(1)
	for i := range s.slots {
		if s.slots[i].Load() == 0 && s.slots[i].CompareAndSwap(0, g) {
			return
		}
	}
	s.mu.Lock()
	if s.overflow == nil {
		s.overflow = map[uintptr]int{}
	}
	s.overflow[g]++
	s.mu.Unlock()
}

func (s *gset) remove(g uintptr) {
	for i := range s.slots {
		if s.slots[i].Load() == g {
			s.slots[i].Store(0)
			s.n.Add(-1)
			return
		}
	}
	s.mu.Lock()
	if s.overflow[g] > 0 {
		s.overflow[g]--
		if s.overflow[g] == 0 {
			delete(s.overflow, g)
		}
		s.n.Add(-1)
	}
	s.mu.Unlock()
}

func (s *gset) has(g uintptr) bool { return s.n.Load() != 0 && s.hasSlow(g) }

// hasSlow is has for a set that is not empty (out of line, so that the
// common query inlines to one load).
func (s *gset) hasSlow(g uintptr) bool {
	for i := range s.slots {
		if s.slots[i].Load() == g {
			return true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overflow[g] > 0
}

// hslHolders is the set of goroutines holding any HSL. It is the one piece of
// process-wide mutable state in gex: HSLs (gex_HSL_t) are process-wide objects
// not tied to a client, and "while holding an HSL" restricts a goroutine for
// every client in the process.
var hslHolders gset

// mayBeRestricted reports cheaply whether the caller might be in restricted
// context (false means certainly not): five loads and one branch, the whole
// restricted-context check of the RMA fast paths and of the atomics'
// other than integer FADD/ADD (those use restrictedA/B).
func (c *Client) mayBeRestricted() bool {
	return c.handlerG[0].Load()|c.handlerG[1].Load()|c.handlerG[2].Load()|
		uintptr(uint32(c.prepareG.n.Load())|uint32(hslHolders.n.Load())) != 0 // one branch
}

// restrictedA and restrictedB split mayBeRestricted's words in two (the
// request and reply handler words; the held-AM handler word, the Prepare
// and HSL counts): the caller is certainly not in restricted context when
// both are 0. Tested with two nested ifs, the check is two short chains of
// dependent loads instead of one long one, which is what counts before a
// locked instruction (it waits for every earlier branch to resolve).
func (c *Client) restrictedA() uintptr { return c.handlerG[0].Load() | c.handlerG[1].Load() }

func (c *Client) restrictedB() uintptr {
	return c.handlerG[2].Load() | uintptr(uint32(c.prepareG.n.Load())|uint32(hslHolders.n.Load()))
}

// checkRestricted returns a restrictedError if the caller may not make a
// communicating call now. op names the API for the message.
func (c *Client) checkRestricted(op string) error {
	if c.handlerG[0].Load() == 0 && c.handlerG[1].Load() == 0 && c.handlerG[2].Load() == 0 && c.prepareG.n.Load() == 0 && hslHolders.n.Load() == 0 {
		return nil
	}
	return c.checkRestrictedSlow(op)
}

func (c *Client) checkRestrictedSlow(op string) error {
	g := gctx.ID()
	switch {
	case c.handlerG[0].Load() == g || c.handlerG[1].Load() == g || c.handlerG[2].Load() == g:
		return &restrictedError{op: op, why: "inside an AM handler"}
	case hslHolders.has(g):
		return &restrictedError{op: op, why: "while holding a handler-safe lock (HSL)"}
	case c.prepareG.has(g):
		return &restrictedError{op: op, why: "between an AM Prepare and its Commit"}
	}
	return nil
}
