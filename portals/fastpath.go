package portals

import (
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/ptlnet"
)

// fastIndex finds an object from its handle without the NI lock, for the calls of the hot
// path that need no more than a live object: PtlCTGet and PtlCTWait reading a counter
// (Portals 4.3 §3.14.5-6) and a quiet PtlPut (§3.15.2, below). Each lock and unlock of the
// NI is a locked instruction, and the message rate's loop waits on a CT and puts once per
// message. It is a copy-on-grow array of one physical NI's objects of a kind, at
// slot*4 + logical NI; written under the NI lock (alloc, free), read with atomics. An object
// found there is live if its handle (generation included) is the one asked for and it is
// not freed: the free and NIFini mark it under the lock before the slot can be reused.
type fastIndex[T any] struct {
	tbl atomic.Pointer[[]atomic.Pointer[T]]
}

func fastSlot(h Handle) int { return int(h.slot())<<2 | h.niIndex() }

// publish records o under h; with p.mu held.
func (x *fastIndex[T]) publish(h Handle, o *T) {
	i := fastSlot(h)
	var cur []atomic.Pointer[T]
	if t := x.tbl.Load(); t != nil {
		cur = *t
	}
	if i >= len(cur) {
		grown := make([]atomic.Pointer[T], max(2*len(cur), i+1, 64))
		for j := range cur {
			grown[j].Store(cur[j].Load())
		}
		x.tbl.Store(&grown)
		cur = grown
	}
	cur[i].Store(o)
}

// forget clears h's entry if it still holds o; with p.mu held, after o is marked freed.
func (x *fastIndex[T]) forget(h Handle, o *T) {
	if t := x.tbl.Load(); t != nil {
		if i := fastSlot(h); i < len(*t) {
			(*t)[i].CompareAndSwap(o, nil)
		}
	}
}

// find returns what h's entry holds (the caller checks the handle and liveness), or nil.
func (x *fastIndex[T]) find(h Handle) *T {
	t := x.tbl.Load()
	if t == nil {
		return nil
	}
	i := fastSlot(h)
	if i >= len(*t) {
		return nil
	}
	return (*t)[i].Load()
}

// physOf returns the physical NI of a handle of kind k without the lock, or nil.
func physOf(h Handle, k handleKind) *physNI {
	if !initialized() || !h.valid() || h.kind() != k {
		return nil
	}
	return lib.phys[h.iface()].Load()
}

// liveCT returns the live CT that h names, or nil when it cannot tell without the lock (the
// caller then takes the locked path, which also reports the error).
func liveCT(h CTHandle) *ctObj {
	p := physOf(Handle(h), kindCT)
	if p == nil {
		return nil
	}
	c := p.fastCTs.find(Handle(h))
	if c == nil || c.h != h || c.freed.Load() {
		return nil
	}
	return c
}

// liveEQ is liveCT for EQs (PtlEQGet, PtlEQWait and PtlEQPoll take events without the lock).
func liveEQ(h EQHandle) *eqObj {
	p := physOf(Handle(h), kindEQ)
	if p == nil {
		return nil
	}
	q := p.fastEQs.find(Handle(h))
	if q == nil || q.h != h || q.freed.Load() {
		return nil
	}
	return q
}

// liveMD is liveCT for MDs.
func liveMD(h MDHandle) *mdObj {
	p := physOf(Handle(h), kindMD)
	if p == nil {
		return nil
	}
	m := p.fastMDs.find(Handle(h))
	if m == nil || m.h != h || m.released.Load() {
		return nil
	}
	return m
}

// quietPut is PtlPut or PtlAtomic (Portals 4.3 §3.15.2, §3.15.5) without the NI lock, for
// a put whose SEND posts no event and no count from a contiguous MD to another process: it
// touches nothing the lock guards (the MD's fields, the NI's limits and index are fixed at
// bind and init; the map is published with an atomic). It reports false, having done
// nothing, whenever the locked path is needed: another kind of operation or MD, a target of
// this process, a map not set, or an argument to refuse (the locked path reports it).
func quietPut(a *opArgs) bool {
	if a.op != opPut && a.op != opAtomic {
		return false
	}
	m := liveMD(a.putMD)
	if m == nil || m.eq != nil || m.iov != nil || m.opts&MDEventCTSend != 0 {
		return false
	}
	ni := m.ni
	var dst ptlnet.PhysID
	if !ni.logical {
		dst = ptlnet.PhysID{NID: uint32(a.target.NID), PID: uint32(a.target.PID)}
	} else {
		mp := ni.fastMap.Load()
		if mp == nil || int64(a.target.Rank) >= int64(len(*mp)) {
			return false
		}
		t := (*mp)[a.target.Rank]
		dst = ptlnet.PhysID{NID: uint32(t.NID), PID: uint32(t.PID)}
	}
	if dst == ni.p.self || ni.checkOp(a, m, nil) != "" {
		return false
	}
	hb := hdrPool.Get().(*[hdrLen]byte)
	h := wireHdr(hb[:])
	if a.op == opPut && a.ack == NoAckReq {
		// Nothing comes back: the short header (one ring slot for a small put).
		h = h[:shortPutLen]
		h.shortPut(ni.idx, a.pt, a.bits, a.roff, a.hdrData)
	} else {
		h.request(a.op, ni.idx, a.ack, a.aop, a.dt, a.pt, a.bits, a.roff, a.length, a.putMD, a.userPtr, a.hdrData, 0)
	}
	ni.p.net.Send(dst, h, m.buf[a.putOff:a.putOff+a.length]) // its SEND, failed or not, posts nothing
	hdrPool.Put(hb)
	return true
}
