package portals

import (
	"math/bits"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gexgo/gexgo/internal/shm"
)

// ---- Portal table entries (Portals 4.3 §3.7) ----

// ptEntry is one portal table entry: its EQ, priority and overflow lists, unexpected
// headers and state. Guarded by the physical NI's lock.
type ptEntry struct {
	alloc   bool
	enabled bool
	opts    PTOptions
	eq      *eqObj
	lists   [2]elist
	uh      uhList
}

// PTAlloc implements PtlPTAlloc (Portals 4.3 §3.7.1): it allocates portal table entry req
// (or the lowest free one for PTAny) with an optional EQ.
func (h NIHandle) PTAlloc(options PTOptions, eq EQHandle, req PTIndex) (PTIndex, error) {
	const fn = "PtlPTAlloc"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	if options&^(PTOnlyUseOnce|PTOnlyTruncate|PTFlowCtrl|PTAllocDisabled) != 0 {
		return 0, errf(ErrArgInvalid, fn, "options "+options.String()+" hold unknown bits")
	}
	q, err := ni.optEQ(eq, fn, "eq_handle")
	if err != nil {
		return 0, err
	}
	if options&PTFlowCtrl != 0 && q == nil {
		return 0, errf(ErrPTEQNeeded, fn, "PTL_PT_FLOWCTRL needs an event queue")
	}
	idx := req
	if req == PTAny {
		idx = PTAny
		for i := range ni.pts {
			if !ni.pts[i].alloc {
				idx = PTIndex(i)
				break
			}
		}
		if idx == PTAny {
			return 0, errf(ErrPTFull, fn, "all "+strconv.Itoa(len(ni.pts))+" portal table entries are allocated")
		}
	} else if int64(req) > int64(ni.lim.MaxPTIndex) {
		return 0, errf(ErrArgInvalid, fn, "pt_index_req "+strconv.FormatUint(uint64(req), 10)+" is above max_pt_index "+strconv.Itoa(ni.lim.MaxPTIndex))
	} else if ni.pts[req].alloc {
		return 0, errf(ErrPTInUse, fn, "pt_index_req "+strconv.FormatUint(uint64(req), 10)+" is allocated")
	}
	pt := &ni.pts[idx]
	*pt = ptEntry{alloc: true, enabled: options&PTAllocDisabled == 0, opts: options, eq: q}
	if q != nil {
		q.attached++
		if options&PTFlowCtrl != 0 {
			// Implementation Note 13: one slot per flow-controlled PT is kept for its
			// PTL_EVENT_PT_DISABLED.
			q.reserved++
			q.grow(1)
		}
	}
	return idx, nil
}

func (ni *logicalNI) pt(idx PTIndex, fn string) (*ptEntry, error) {
	if int64(idx) > int64(ni.lim.MaxPTIndex) || !ni.pts[idx].alloc {
		return nil, errf(ErrArgInvalid, fn, "pt_index "+strconv.FormatUint(uint64(idx), 10)+" is not an allocated portal table entry")
	}
	return &ni.pts[idx], nil
}

// PTFree implements PtlPTFree (Portals 4.3 §3.7.2); ErrPTInUse while list entries or
// unexpected headers are attached.
func (h NIHandle) PTFree(idx PTIndex) error {
	const fn = "PtlPTFree"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	pt, err := ni.pt(idx, fn)
	if err != nil {
		return err
	}
	if pt.lists[0].n+pt.lists[1].n > 0 || pt.uh.n > 0 {
		return errf(ErrPTInUse, fn, "pt_index "+strconv.FormatUint(uint64(idx), 10)+" has list entries or unexpected headers attached")
	}
	if pt.eq != nil {
		pt.eq.attached--
		if pt.opts&PTFlowCtrl != 0 {
			pt.eq.reserved--
		}
	}
	*pt = ptEntry{}
	return nil
}

// PTDisable implements PtlPTDisable (Portals 4.3 §3.7.3): messages arriving afterwards are
// dropped and their initiators see PTL_NI_PT_DISABLED; no PTL_EVENT_PT_DISABLED is posted.
// Messages are processed whole under the NI's lock, so when it returns no message is in
// progress on the entry.
func (h NIHandle) PTDisable(idx PTIndex) error { return h.ptSet(idx, false, "PtlPTDisable") }

// PTEnable implements PtlPTEnable (Portals 4.3 §3.7.4), also after flow control disabled it.
func (h NIHandle) PTEnable(idx PTIndex) error { return h.ptSet(idx, true, "PtlPTEnable") }

func (h NIHandle) ptSet(idx PTIndex, on bool, fn string) error {
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	pt, err := ni.pt(idx, fn)
	if err != nil {
		return err
	}
	pt.enabled = on
	return nil
}

// ---- Memory descriptors (Portals 4.3 §3.10) ----

type mdObj struct {
	region
	ni   *logicalNI
	h    MDHandle
	opts MDOptions
	eq   *eqObj
	ct   *ctObj
	// Operations whose PTL_EVENT_SEND (sends) or PTL_EVENT_REPLY (gets) is not yet
	// delivered (§3.10.4). sends is an atomic so that a put whose SEND posts nothing ends
	// without taking the NI lock again.
	sends    atomic.Int32
	gets     int
	released atomic.Bool // by MDRelease or NIFini, under the NI lock; read by quietPut
}

// MDBind implements PtlMDBind (Portals 4.3 §3.10.3). The descriptor is copied; with
// MDIovec the element list is copied too (the elements' memory is used in place).
func (h NIHandle) MDBind(md MD) (MDHandle, error) {
	const fn = "PtlMDBind"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	if md.Options >= MDIovec<<1 {
		return 0, errf(ErrArgInvalid, fn, "md options "+md.Options.String()+" hold unknown bits")
	}
	o := &mdObj{ni: ni, opts: md.Options}
	if md.Options&MDIovec != 0 {
		if len(md.Iov) > ni.lim.MaxIovecs {
			return 0, errf(ErrArgInvalid, fn, "md has "+strconv.Itoa(len(md.Iov))+" iovecs, above max_iovecs "+strconv.Itoa(ni.lim.MaxIovecs))
		}
		o.iov = append([][]byte(nil), md.Iov...)
		for _, v := range o.iov {
			o.length += uint64(len(v))
		}
	} else {
		o.buf = md.Buf
		o.length = uint64(len(md.Buf))
	}
	if o.eq, err = ni.optEQ(md.EQ, fn, "md eq_handle"); err != nil {
		return 0, err
	}
	if o.ct, err = ni.optCT(md.CT, fn, "md ct_handle"); err != nil {
		return 0, err
	}
	slot, gen, ok := ni.mds.alloc(o)
	if !ok {
		return 0, errf(ErrNoSpace, fn, "max_mds "+strconv.Itoa(ni.lim.MaxMDs)+" MDs are bound")
	}
	o.h = MDHandle(mkHandle(kindMD, p.iface, ni.idx, gen, slot))
	p.fastMDs.publish(Handle(o.h), o)
	if o.eq != nil {
		o.eq.attached++
	}
	return o.h, nil
}

func (ni *logicalNI) md(h MDHandle) *mdObj {
	hh := Handle(h)
	if hh.kind() != kindMD || hh.niIndex() != ni.idx {
		return nil
	}
	return ni.mds.get(hh.slot(), hh.gen())
}

// lockMD checks an MD handle and returns the MD with p.mu held.
func lockMD(h MDHandle, fn, arg string) (*mdObj, *physNI, error) {
	ni, p, err := lockObj(Handle(h), kindMD, fn, arg)
	if err != nil {
		return nil, nil, err
	}
	m := ni.md(h)
	if m == nil {
		p.mu.Unlock()
		return nil, nil, errf(ErrArgInvalid, fn, arg+" names a released MD")
	}
	return m, p, nil
}

// Release implements PtlMDRelease (Portals 4.3 §3.10.4). While an operation on the MD is
// pending (its PTL_EVENT_SEND or PTL_EVENT_REPLY not yet delivered) it returns ErrInUse (the
// spec names no code for this; see docs/portals.md). Acks arriving after the release are
// dropped and counted in PTL_SR_DROP_COUNT.
func (h MDHandle) Release() error {
	const fn = "PtlMDRelease"
	m, p, err := lockMD(h, fn, "md_handle")
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	if n := int(m.sends.Load()) + m.gets; n > 0 {
		return errf(ErrInUse, fn, strconv.Itoa(n)+" operations on the MD are pending")
	}
	if m.eq != nil {
		m.eq.attached--
	}
	m.released.Store(true)
	p.fastMDs.forget(Handle(h), m)
	m.ni.mds.release(Handle(h).slot())
	return nil
}

// ---- Event queues (Portals 4.3 §3.13) ----

// An EQ is a ring of events written by the NIC (one producer: with the NI lock held) and
// taken without the lock by any number of consumers (PtlEQGet, PtlEQWait, PtlEQPoll). Events
// have positions 0, 1, 2, ...; tail is the position of the next event, the ring's head word
// the position of the oldest one (shifted left 2) with two flags: eqDropBit, set when the
// NIC overwrote the oldest event of a full EQ (§3.13.5), so the next take reports
// PTL_EQ_DROPPED with the event that followed the lost one; eqRetiredBit, set when the ring
// was replaced by a larger one. A consumer claims the oldest event with a compare-and-swap
// on the head word, then copies it out of its slot and stores the slot's done word; the NIC
// does not write a slot again before its last event was dropped by the NIC itself or done,
// so a copy never overlaps a write.
type eqObj struct {
	ni       *logicalNI
	h        EQHandle
	ring     atomic.Pointer[eqRing]
	tail     atomic.Uint64 // written under the NI lock
	cap      uint64        // the EQ's size: count at PtlEQAlloc, plus the reserved slots ever added
	reserved int           // slots kept for PTL_EVENT_PT_DISABLED of flow-controlled PTs
	attached int
	freed    atomic.Bool // written under the NI lock
}

// eqRing is an EQ's ring of slots, a power of two at least the EQ's size: position i is in
// slot i&mask (no division per event).
type eqRing struct {
	head  atomic.Uint64 // oldest position<<2 | eqDropBit | eqRetiredBit
	base  uint64        // the oldest position this ring held when made (none before it is in it)
	mask  uint64
	slots []eqSlot
}

type eqSlot struct {
	ev   Event
	done atomic.Uint64                                      // 1 + the position whose event was last taken or dropped
	_    [(128 - (unsafe.Sizeof(Event{})+8)%128) % 128]byte // whole cache lines per slot (a large ring is page-aligned)
}

const (
	eqDropBit    = 1
	eqRetiredBit = 2
)

func newEQRing(size, base uint64) *eqRing {
	n := uint64(1) << bits.Len64(size-1)
	r := &eqRing{base: base, mask: n - 1, slots: make([]eqSlot, n)}
	r.head.Store(base << 2)
	return r
}

// grow makes the EQ k events larger; with p.mu held. When its ring is too small it is
// replaced, the old one retired first (no consumer claims from it afterwards); a consumer
// that claimed from it before copies from it, which the NIC no longer writes.
func (q *eqObj) grow(k int) {
	q.cap += uint64(k)
	old := q.ring.Load()
	if q.cap <= uint64(len(old.slots)) {
		return
	}
	var hw uint64
	for {
		hw = old.head.Load()
		if old.head.CompareAndSwap(hw, hw|eqRetiredBit) {
			break
		}
	}
	h, t := hw>>2, q.tail.Load()
	r := newEQRing(q.cap, h)
	r.head.Store(hw &^ eqRetiredBit)
	for i := h; i < t; i++ {
		r.slots[i&r.mask].ev = old.slots[i&old.mask].ev
	}
	q.ring.Store(r)
}

// full reports whether a flow-controlled PT must treat the EQ as full (§3.13.5: the slots
// reserved for PT_DISABLED do not count as free); with p.mu held.
func (q *eqObj) full() bool {
	h := q.ring.Load().head.Load() >> 2
	return q.tail.Load()-h >= q.cap-uint64(q.reserved)
}

// post appends an event; with p.mu held. When the EQ is full the oldest event is
// overwritten and the next successful EQGet/EQWait/EQPoll returns PTL_EQ_DROPPED (§3.13.5,
// §3.13.7).
func (q *eqObj) post(ev *Event) {
	if s := q.slot(); s != nil {
		*s = *ev
		q.commit()
	}
}

// slot returns the slot of the next event for the NIC to fill, then commit; nil when the
// EQ is gone (nothing to post); with p.mu held.
func (q *eqObj) slot() *Event {
	if q == nil || q.freed.Load() {
		return nil
	}
	r := q.ring.Load()
	t := q.tail.Load()
	for {
		hw := r.head.Load()
		h := hw >> 2
		if t-h < q.cap {
			break
		}
		// Full: the NIC drops the oldest event itself (no consumer can claim it now).
		if r.head.CompareAndSwap(hw, (h+1)<<2|eqDropBit) {
			shm.StoreRelease64(&r.slots[h&r.mask].done, h+1)
			break
		}
	}
	s := &r.slots[t&r.mask]
	if prev := t - uint64(len(r.slots)); t >= uint64(len(r.slots)) && prev >= r.base {
		// The slot's last event left the EQ (t-h < cap ≤ len), but a consumer that
		// claimed it may still be copying it out (without the lock).
		for i := 0; s.done.Load() != prev+1; i++ {
			if i&15 == 15 {
				runtime.Gosched()
			}
		}
	}
	return &s.ev
}

// commit publishes the event filled in at slot(); with p.mu held.
func (q *eqObj) commit() {
	t := q.tail.Load() + 1
	shm.StoreRelease64(&q.tail, t)
	q.ni.p.posted = true
	// Bring the next event's slot into cache now, off the next message's path (the
	// load's value is not used, so it does not hold up what follows).
	r := q.ring.Load()
	_ = r.slots[t&r.mask].done.Load()
}

// take removes the oldest event, with or without p.mu: ok false when there is none;
// ErrEQDropped with it when events were lost since the last take.
func (q *eqObj) take(ev *Event) (ok bool, err error) {
	for {
		r := q.ring.Load()
		hw := r.head.Load()
		if hw&eqRetiredBit != 0 {
			runtime.Gosched() // grow (under the NI lock) is replacing the ring
			continue
		}
		h := hw >> 2
		if h >= q.tail.Load() {
			return false, nil
		}
		if !r.head.CompareAndSwap(hw, (h+1)<<2) {
			continue
		}
		s := &r.slots[h&r.mask]
		*ev = s.ev
		s.ev.Start = nil // the slot keeps no reference to the entry's buffer
		shm.StoreRelease64(&s.done, h+1)
		if hw&eqDropBit != 0 {
			return true, errEQDropped
		}
		return true, nil
	}
}

// EQAlloc implements PtlEQAlloc (Portals 4.3 §3.13.5): an event queue of at least count
// events.
func (h NIHandle) EQAlloc(count uint64) (EQHandle, error) {
	const fn = "PtlEQAlloc"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	if count == 0 || count > 1<<24 {
		return 0, errf(ErrArgInvalid, fn, "count "+strconv.FormatUint(count, 10)+" is not in [1, 2^24]")
	}
	q := &eqObj{ni: ni, cap: count}
	q.ring.Store(newEQRing(count, 0))
	slot, gen, ok := ni.eqs.alloc(q)
	if !ok {
		return 0, errf(ErrNoSpace, fn, "max_eqs "+strconv.Itoa(ni.lim.MaxEQs)+" EQs are allocated")
	}
	q.h = EQHandle(mkHandle(kindEQ, p.iface, ni.idx, gen, slot))
	p.fastEQs.publish(Handle(q.h), q)
	return q.h, nil
}

// optional looks up an optional EQ or CT handle of this NI (0 means none).
func optional[T any](ni *logicalNI, h Handle, k handleKind, tbl *table[T], fn, arg, what string) (*T, error) {
	if h == 0 {
		return nil, nil
	}
	if h.kind() != k || h.iface() != ni.p.iface || h.niIndex() != ni.idx {
		return nil, errf(ErrArgInvalid, fn, arg+" is not one of this NI's "+what+"s")
	}
	o := tbl.get(h.slot(), h.gen())
	if o == nil {
		return nil, errf(ErrArgInvalid, fn, arg+" names a freed "+what)
	}
	return o, nil
}

// lockLive checks a handle of kind k and returns its object with p.mu held.
func lockLive[T any](h Handle, k handleKind, tbl func(*logicalNI) *table[T], fn, arg, what string) (*T, *physNI, error) {
	ni, p, err := lockObj(h, k, fn, arg)
	if err != nil {
		return nil, nil, err
	}
	o := tbl(ni).get(h.slot(), h.gen())
	if o == nil {
		p.mu.Unlock()
		return nil, nil, errf(ErrArgInvalid, fn, arg+" names a "+what)
	}
	return o, p, nil
}

func (ni *logicalNI) optEQ(h EQHandle, fn, arg string) (*eqObj, error) {
	return optional(ni, Handle(h), kindEQ, &ni.eqs, fn, arg, "EQ")
}

func lockEQ(h EQHandle, fn string) (*eqObj, *physNI, error) {
	return lockLive(Handle(h), kindEQ, func(ni *logicalNI) *table[eqObj] { return &ni.eqs }, fn, "eq_handle", "freed EQ")
}

// Free implements PtlEQFree (Portals 4.3 §3.13.6). MDs and portal table entries using the
// EQ must be released first (ErrArgInvalid otherwise).
func (h EQHandle) Free() error {
	const fn = "PtlEQFree"
	q, p, err := lockEQ(h, fn)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	if q.attached > 0 {
		return errf(ErrArgInvalid, fn, "the EQ is still used by "+strconv.Itoa(q.attached)+" MDs or portal table entries")
	}
	q.freed.Store(true)
	p.fastEQs.forget(Handle(h), q)
	q.ni.eqs.release(Handle(h).slot())
	p.wakeLocked()
	return nil
}

// Get implements PtlEQGet (Portals 4.3 §3.13.7): the oldest event, without blocking.
// ErrEQEmpty when there is none; ErrEQDropped comes with a valid event when events were
// lost since the last successful Get.
func (h EQHandle) Get() (Event, error) {
	const fn = "PtlEQGet"
	var ev Event
	q := liveEQ(h)
	if q == nil {
		var p *physNI
		var err error
		if q, p, err = lockEQ(h, fn); err != nil {
			return ev, err
		}
		p.mu.Unlock()
	}
	if ok, derr := q.take(&ev); ok {
		return ev, derr
	}
	q.ni.p.net.Poll()
	if q.freed.Load() {
		return ev, errf(ErrArgInvalid, fn, "eq_handle names a freed EQ")
	}
	if ok, derr := q.take(&ev); ok {
		return ev, derr
	}
	return ev, errEQEmpty
}

// Wait implements PtlEQWait (Portals 4.3 §3.13.8): it blocks until an event arrives.
func (h EQHandle) Wait() (ev Event, err error) {
	if q := liveEQ(h); q != nil {
		_, err = eqWaitOne(q, TimeForever, &ev)
		return ev, err
	}
	ev, _, err = EQPoll([]EQHandle{h}, TimeForever)
	return ev, err
}

// EQPoll implements PtlEQPoll (Portals 4.3 §3.13.9): it returns the oldest event of the
// first EQ in eqs (array order) that has one, and that EQ's index, waiting up to timeout
// (0 polls once; TimeForever never times out). ErrEQEmpty on timeout. All EQs must belong
// to one physical NI (they may belong to different logical NIs of it).
func EQPoll(eqs []EQHandle, timeout time.Duration) (Event, int, error) {
	const fn = "PtlEQPoll"
	var ev Event
	if !initialized() {
		return ev, -1, errf(ErrNoInit, fn, "")
	}
	if len(eqs) == 0 {
		return ev, -1, errf(ErrArgInvalid, fn, "size is 0")
	}
	if len(eqs) == 1 {
		if q0 := liveEQ(eqs[0]); q0 != nil {
			which, err := eqWaitOne(q0, timeout, &ev)
			return ev, which, err
		}
	}
	q0, p, err := lockEQ(eqs[0], fn)
	if err != nil {
		return ev, -1, err
	}
	for i := 1; i < len(eqs); i++ { // lockEQ checked eqs[0]
		hh := Handle(eqs[i])
		if hh.kind() != kindEQ || hh.iface() != p.iface || p.nis[hh.niIndex()] == nil ||
			p.nis[hh.niIndex()].eqs.get(hh.slot(), hh.gen()) == nil {
			p.mu.Unlock()
			return ev, -1, errf(ErrArgInvalid, fn, "eq_handles["+strconv.Itoa(i)+"] is not a live EQ of the physical NI of eq_handles[0]")
		}
	}
	p.mu.Unlock()
	if len(eqs) == 1 {
		which, err := eqWaitOne(q0, timeout, &ev) // freed since liveEQ looked: the try reports it
		return ev, which, err
	}
	which := -1
	var derr error
	err = p.waitFor(timeout, nil, nil, func() (bool, error) {
		for i, h := range eqs {
			hh := Handle(h)
			ni := p.nis[hh.niIndex()]
			if ni == nil {
				return true, errf(ErrArgInvalid, fn, "an EQ's NI was finalized")
			}
			q := ni.eqs.get(hh.slot(), hh.gen())
			if q == nil {
				return true, errf(ErrArgInvalid, fn, "an EQ was freed")
			}
			var ok bool
			if ok, derr = q.take(&ev); ok {
				which = i
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return ev, -1, err
	}
	if which < 0 {
		return ev, -1, errEQEmpty
	}
	return ev, which, derr
}

// eqWaitOne is EQPoll on the one EQ q (found live) into *ev: it takes an event without the NI lock,
// and the spin of the wait tries to take one at each look, as CTWait reads its counter. A
// freed EQ (PtlEQFree or PtlNIFini, which mark it under the lock) is reported by the locked
// try.
func eqWaitOne(q *eqObj, timeout time.Duration, ev *Event) (int, error) {
	const fn = "PtlEQPoll"
	if ok, derr := q.take(ev); ok {
		return 0, derr
	}
	p := q.ni.p
	which := -1
	var derr error
	try := func() bool {
		if q.freed.Load() {
			return false
		}
		ok, err := q.take(ev)
		if ok {
			which, derr = 0, err
		}
		return ok
	}
	err := p.waitFor(timeout, try, nil, func() (bool, error) {
		if q.freed.Load() {
			return true, errf(ErrArgInvalid, fn, "an EQ was freed or its NI finalized")
		}
		return try(), nil
	})
	if err != nil {
		return -1, err
	}
	if which < 0 {
		return -1, errEQEmpty
	}
	return which, derr
}

// ---- Counting events (Portals 4.3 §3.14) ----

type ctObj struct {
	ni    *logicalNI
	h     CTHandle
	succ  atomicU64
	fail  atomicU64
	freed atomic.Bool // written under the NI lock; read without it by a spinning CTWait
}

// add updates the counter (§3.14: modulo 2^64). It is the one place counters change, so
// triggered operations (part 2) hook in here. With p.mu held.
func (c *ctObj) add(s, f uint64) {
	if c == nil || c.freed.Load() {
		return
	}
	if s != 0 {
		c.succ.Add(s)
	}
	if f != 0 {
		c.fail.Add(f)
	}
	c.ni.p.posted = true
}

func (ni *logicalNI) optCT(h CTHandle, fn, arg string) (*ctObj, error) {
	return optional(ni, Handle(h), kindCT, &ni.cts, fn, arg, "CT")
}

func lockCT(h CTHandle, fn string) (*ctObj, *physNI, error) {
	return lockLive(Handle(h), kindCT, func(ni *logicalNI) *table[ctObj] { return &ni.cts }, fn, "ct_handle", "freed CT")
}

// CTAlloc implements PtlCTAlloc (Portals 4.3 §3.14.2): a counter at {0, 0}.
func (h NIHandle) CTAlloc() (CTHandle, error) {
	const fn = "PtlCTAlloc"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	c := &ctObj{ni: ni}
	slot, gen, ok := ni.cts.alloc(c)
	if !ok {
		return 0, errf(ErrNoSpace, fn, "max_cts "+strconv.Itoa(ni.lim.MaxCTs)+" CTs are allocated")
	}
	c.h = CTHandle(mkHandle(kindCT, p.iface, ni.idx, gen, slot))
	p.fastCTs.publish(Handle(c.h), c)
	return c.h, nil
}

// Free implements PtlCTFree (Portals 4.3 §3.14.3). Entries and MDs still naming the CT
// stop counting into it.
func (h CTHandle) Free() error {
	c, p, err := lockCT(h, "PtlCTFree")
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	c.freed.Store(true)
	p.fastCTs.forget(Handle(c.h), c)
	c.ni.cts.release(Handle(h).slot())
	p.wakeLocked()
	return nil
}

// CancelTriggered implements PtlCTCancelTriggered (Portals 4.3 §3.14.4): it deletes the
// triggered operations waiting on the CT. Triggered operations come in part 2, so there are
// none yet; the call checks its handle.
func (h CTHandle) CancelTriggered() error {
	_, p, err := lockCT(h, "PtlCTCancelTriggered")
	if err != nil {
		return err
	}
	p.mu.Unlock()
	return nil
}

// Get implements PtlCTGet (Portals 4.3 §3.14.5).
func (h CTHandle) Get() (CTEvent, error) {
	if c := liveCT(h); c != nil {
		return CTEvent{Success: c.succ.Load(), Failure: c.fail.Load()}, nil
	}
	c, p, err := lockCT(h, "PtlCTGet")
	if err != nil {
		return CTEvent{}, err
	}
	v := CTEvent{Success: c.succ.Load(), Failure: c.fail.Load()}
	p.mu.Unlock()
	return v, nil
}

// Set implements PtlCTSet (Portals 4.3 §3.14.8).
func (h CTHandle) Set(v CTEvent) error {
	c, p, err := lockCT(h, "PtlCTSet")
	if err != nil {
		return err
	}
	c.succ.Store(v.Success)
	c.fail.Store(v.Failure)
	p.posted = true
	p.unlockWake()
	return nil
}

// Inc implements PtlCTInc (Portals 4.3 §3.14.9): only one of the two fields may be non-zero;
// arithmetic is modulo 2^64.
func (h CTHandle) Inc(v CTEvent) error {
	if v.Success != 0 && v.Failure != 0 {
		return errf(ErrArgInvalid, "PtlCTInc", "increment has both success and failure non-zero")
	}
	c, p, err := lockCT(h, "PtlCTInc")
	if err != nil {
		return err
	}
	c.add(v.Success, v.Failure)
	p.unlockWake()
	return nil
}

// Wait implements PtlCTWait (Portals 4.3 §3.14.6): it blocks until success ≥ test or
// failure ≠ 0.
func (h CTHandle) Wait(test uint64) (CTEvent, error) {
	var v CTEvent
	c := liveCT(h)
	p := (*physNI)(nil)
	if c != nil {
		p = c.ni.p
		v = CTEvent{Success: c.succ.Load(), Failure: c.fail.Load()}
	} else {
		var err error
		if c, p, err = lockCT(h, "PtlCTWait"); err != nil {
			return CTEvent{}, err
		}
		v = CTEvent{Success: c.succ.Load(), Failure: c.fail.Load()}
		p.mu.Unlock()
	}
	if v.Success >= test || v.Failure != 0 {
		return v, nil
	}
	v, _, err := ctWaitFor(p, c, []CTHandle{h}, []uint64{test}, TimeForever)
	return v, err
}

// CTPoll implements PtlCTPoll (Portals 4.3 §3.14.7): the first CT (array order) with
// success ≥ its test or failure ≠ 0, waiting up to timeout; ErrCTNoneReached on timeout.
func CTPoll(cts []CTHandle, tests []uint64, timeout time.Duration) (CTEvent, int, error) {
	const fn = "PtlCTPoll"
	if !initialized() {
		return CTEvent{}, -1, errf(ErrNoInit, fn, "")
	}
	if len(cts) == 0 || len(cts) != len(tests) {
		return CTEvent{}, -1, errf(ErrArgInvalid, fn, "size is 0 or ct_handles and tests differ in length")
	}
	c0, p, err := lockCT(cts[0], fn)
	if err != nil {
		return CTEvent{}, -1, err
	}
	p.mu.Unlock()
	return ctWaitFor(p, c0, cts, tests, timeout)
}

// ctWaitFor is CTPoll once cts[0] (c0, of p) is known to be live.
func ctWaitFor(p *physNI, c0 *ctObj, cts []CTHandle, tests []uint64, timeout time.Duration) (CTEvent, int, error) {
	const fn = "PtlCTPoll"
	var v CTEvent
	which := -1
	var peek func() bool
	if len(cts) == 1 {
		// One CT: the spin reads its counter and freed flag, atomics, without the lock,
		// and the wait ends at the first look that sees the counter reached (a CT freed
		// meanwhile was still live at that look, or the locked try reports it).
		peek = func() bool {
			s, f := c0.succ.Load(), c0.fail.Load()
			if (s >= tests[0] || f != 0) && !c0.freed.Load() {
				v, which = CTEvent{s, f}, 0
				return true
			}
			return false
		}
	}
	err := p.waitFor(timeout, peek, nil, func() (bool, error) {
		for i, h := range cts {
			hh := Handle(h)
			var c *ctObj
			if hh.kind() == kindCT && hh.iface() == p.iface {
				if ni := p.nis[hh.niIndex()]; ni != nil {
					c = ni.cts.get(hh.slot(), hh.gen())
				}
			}
			if c == nil {
				return true, errf(ErrArgInvalid, fn, "ct_handles["+strconv.Itoa(i)+"] is not a live CT of the physical NI of ct_handles[0]")
			}
			s, f := c.succ.Load(), c.fail.Load()
			if s >= tests[i] || f != 0 {
				v, which = CTEvent{s, f}, i
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return CTEvent{}, -1, err
	}
	if which < 0 {
		return CTEvent{}, -1, errCTNoneReached
	}
	return v, which, nil
}

// ---- Waiting and progress ----

// wakeLocked wakes every goroutine blocked in waitFor; with p.mu held.
func (p *physNI) wakeLocked() {
	p.posted = false
	if p.seqWatchers.Load() != 0 {
		p.seq.Add(1)
	}
	if p.waiters > 0 {
		close(p.wake)
		p.wake = make(chan struct{})
	}
}

// unlockWake releases p.mu, first waking waiters if an event or counter changed.
func (p *physNI) unlockWake() {
	if p.posted {
		p.wakeLocked()
	}
	p.mu.Unlock()
}

// spinTime is how long a wait polls the transport inline before it blocks: about the
// transport's own polling period, so that a round trip in progress is caught by the spin
// instead of by a sleep and a wake-up on each side.
const spinTime = 50 * time.Microsecond

// goschedEvery+1 is how many runs of 16 polls of a spinning wait go by between two
// runtime.Gosched calls (which let this process's other goroutines in when every P is busy;
// each costs the scheduler's global lock, more than a poll).
const goschedEvery = 7

// waitFor runs try (with p.mu held) until it reports done, polling the transport inline
// (inline progress) for up to spinTime and then blocking until an event or counter changes
// or the timeout passes. The transport's own progress goroutine keeps delivering meanwhile.
// While it spins, peek (if not nil; it runs without the lock) may end the wait at once;
// try runs again only when a wake-up happened since it last ran (every change that can
// complete a wait wakes, as for a blocked waiter), and after every 16th run of 16 polls:
// so the NI lock stays with the NIC, which needs it for each message. Instead of wake-ups,
// ready (if not nil, with peek nil; it runs without the lock) says when try may succeed: the
// spin runs try as soon as ready reports true. It spins with peers reached over TCP too:
// Poll reads their sockets itself (non-blocking read(2) under a per-connection try-lock),
// so a reply needs no netpoller wake-up; the cadence of yields is the shared-memory one
// (runtime.Gosched every goschedEvery+1 runs without a message; the transport's parked
// progress goroutine and TCP readers leave the cores to the two pollers), and the wait still
// blocks after spinTime, PollStop handing the sockets back to the readers (docs/portals.md,
// Round 5).
func (p *physNI) waitFor(timeout time.Duration, peek, ready func() bool, try func() (bool, error)) error {
	var deadline, spinUntil time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	spinning := timeout != 0
	if spinning && peek == nil && ready == nil {
		// This wait looks at p.seq between its locked tries: wake-ups bump it
		// only while such a wait is on (a locked instruction per run of messages).
		p.seqWatchers.Add(1)
		defer p.seqWatchers.Add(-1)
	}
	var seen uint64 // p.seq when try last ran
	for spin := 0; ; spin++ {
		s := p.seq.Load()
		if spinning && spin&15 != 15 && (spin > 0 || peek != nil || ready != nil) &&
			(ready == nil || !ready()) {
			if peek != nil && peek() {
				return nil
			}
			if peek != nil || ready != nil || s == seen {
				// A run of 16 polls, ended early when what the wait looks at
				// changes (peek, ready, or a wake-up for try).
				got, k := false, 0
				for i := 0; i < 16 && !got; i++ {
					k += p.net.Poll()
					switch {
					case peek != nil:
						got = peek()
					case ready != nil:
						got = ready()
					default:
						got = p.seq.Load() != s
					}
				}
				if got && peek != nil {
					return nil
				}
				if k == 0 && !got && spin&goschedEvery == goschedEvery {
					runtime.Gosched()
				}
				if !got || ready == nil {
					continue
				}
				// ready: run try now.
			}
		}
		seen = s
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return errf(ErrArgInvalid, "wait", "the NI was finalized")
		}
		done, err := try()
		if done || err != nil {
			p.mu.Unlock()
			return err
		}
		if timeout == 0 && spin > 0 {
			p.mu.Unlock()
			return nil
		}
		if spinning && spin&15 == 15 && spinUntil.IsZero() {
			// The clock is read only once the wait has lasted 16 runs of polls
			// (every 16th run after that): most waits of a round trip end sooner.
			spinUntil = time.Now().Add(spinTime)
		}
		if timeout == 0 || spinning && (spin&15 != 15 || time.Now().Before(spinUntil)) {
			p.mu.Unlock()
			if p.net.Poll() == 0 && spin&goschedEvery == goschedEvery {
				runtime.Gosched()
			}
			continue
		}
		ch := p.wake
		p.waiters++
		p.mu.Unlock()
		if spinning {
			// This goroutine stops polling: the transport's progress goroutine,
			// parked while it polled, takes over at once.
			p.net.PollStop()
		}
		if timeout < 0 {
			<-ch
		} else {
			d := time.Until(deadline)
			if d <= 0 {
				p.mu.Lock()
				p.waiters--
				p.mu.Unlock()
				return nil
			}
			t := time.NewTimer(d)
			select {
			case <-ch:
			case <-t.C:
			}
			t.Stop()
		}
		p.mu.Lock()
		p.waiters--
		p.mu.Unlock()
		if timeout > 0 && !time.Now().Before(deadline) {
			// one last look before reporting the timeout
			p.mu.Lock()
			done, err := try()
			p.mu.Unlock()
			_ = done
			return err
		}
	}
}
