package portals

import "sync/atomic"

// ctIndex finds a live CT from its handle without the NI lock, for the calls that only read
// a counter (PtlCTGet, PtlCTWait, Portals 4.3 §3.14.5-6): each lock and unlock of the NI is
// a locked instruction, and the message rate's loop waits on a CT before every put. It is a
// copy-on-grow array of the CTs of one physical NI, at slot*4 + logical NI; written under
// the NI lock (CTAlloc, CTFree), read with atomics. A CT found there is live if its handle
// (generation included) is the one asked for and it is not freed (CTFree and NIFini set
// freed under the lock before the slot can be reused).
type ctIndex struct {
	tbl atomic.Pointer[[]atomic.Pointer[ctObj]]
}

func ctIndexOf(h Handle) int { return int(h.slot())<<2 | h.niIndex() }

// publish records c under its handle; with p.mu held.
func (x *ctIndex) publish(c *ctObj) {
	i := ctIndexOf(Handle(c.h))
	var cur []atomic.Pointer[ctObj]
	if t := x.tbl.Load(); t != nil {
		cur = *t
	}
	if i >= len(cur) {
		grown := make([]atomic.Pointer[ctObj], max(2*len(cur), i+1, 64))
		for j := range cur {
			grown[j].Store(cur[j].Load())
		}
		x.tbl.Store(&grown)
		cur = grown
	}
	cur[i].Store(c)
}

// forget clears c's entry; with p.mu held, after c.freed is set.
func (x *ctIndex) forget(c *ctObj) {
	if t := x.tbl.Load(); t != nil {
		if i := ctIndexOf(Handle(c.h)); i < len(*t) {
			(*t)[i].CompareAndSwap(c, nil)
		}
	}
}

// liveCT returns the live CT that h names, or nil when it cannot tell without the lock (the
// caller then takes the locked path, which also reports the error).
func liveCT(h CTHandle) *ctObj {
	hh := Handle(h)
	if !initialized() || !hh.valid() || hh.kind() != kindCT {
		return nil
	}
	p := lib.phys[hh.iface()].Load()
	if p == nil {
		return nil
	}
	t := p.cts.tbl.Load()
	if t == nil {
		return nil
	}
	i := ctIndexOf(hh)
	if i >= len(*t) {
		return nil
	}
	c := (*t)[i].Load()
	if c == nil || c.h != h || c.freed.Load() {
		return nil
	}
	return c
}
