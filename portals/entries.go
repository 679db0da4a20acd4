package portals

import (
	"strconv"
)

// entry is a list entry (LE, Portals 4.3 §3.11) or match list entry (ME, §3.12). Guarded by
// the physical NI's lock.
type entry struct {
	ni   *logicalNI
	h    Handle
	isME bool
	pt   PTIndex
	list List
	region
	ct      *ctObj
	uid     UID
	opts    EntryOptions
	matchID ProcessID
	bits    MatchBits
	ignore  MatchBits
	minFree uint64
	userPtr uint64

	localOff   uint64 // PTL_ME_MANAGE_LOCAL offset
	linked     bool
	prev, next *entry
	uhRefs     int  // unexpected headers that point into this (overflow) entry
	awaitFree  bool // auto-unlinked overflow entry waiting for its headers to drain (AUTO_FREE)
	zombie     bool // unlinked; handle kept until the next append (Implementation Note 10)
}

// dlist is a doubly linked list threaded through its elements' prev and next fields.
type dlist[T any, P interface {
	*T
	links() (prev, next **T)
}] struct {
	head, tail *T
	n          int
}

func (l *dlist[T, P]) push(x *T) {
	prev, next := P(x).links()
	*prev, *next = l.tail, nil
	if l.tail != nil {
		_, tn := P(l.tail).links()
		*tn = x
	} else {
		l.head = x
	}
	l.tail = x
	l.n++
}

func (l *dlist[T, P]) remove(x *T) {
	prev, next := P(x).links()
	if *prev != nil {
		_, pn := P(*prev).links()
		*pn = *next
	} else {
		l.head = *next
	}
	if *next != nil {
		np, _ := P(*next).links()
		*np = *prev
	} else {
		l.tail = *prev
	}
	*prev, *next = nil, nil
	l.n--
}

// elist is a priority or overflow list.
type elist = dlist[entry, *entry]

func (e *entry) links() (prev, next **entry) { return &e.prev, &e.next }

// uhdr is an unexpected header (Portals 4.3 §2.5, §3.11.2): a message that was delivered into
// an overflow list entry, remembered until a priority append or a search delete matches it.
type uhdr struct {
	op         byte
	initiator  ProcessID
	uid        UID
	bits       MatchBits
	rlength    uint64
	mlength    uint64
	roff       uint64
	hdrData    uint64
	aop        AtomicOp
	dt         Datatype
	ent        *entry
	start      []byte
	prev, next *uhdr
}

// uhList is a portal table entry's unexpected list, in arrival order.
type uhList = dlist[uhdr, *uhdr]

func (u *uhdr) links() (prev, next **uhdr) { return &u.prev, &u.next }

// avail is what the entry can take at offset off (§2.5.1: an offset beyond the end leaves 0).
func (e *entry) avail(off uint64) uint64 {
	if off >= e.length {
		return 0
	}
	return e.length - off
}

// matches is the matching predicate of §3.12 for an incoming request: match bits under the
// ignore mask, match_id with the wildcards, and the fit test of PTL_ME_NO_TRUNCATE. LEs
// (non-matching NIs) match everything (§2.5.1).
func (e *entry) matches(bits MatchBits, src ProcessID, rlength, roff uint64) bool {
	if !e.isME {
		return true
	}
	if (bits^e.bits)&^e.ignore != 0 {
		return false
	}
	if e.ni.logical {
		if e.matchID.Rank != RankAny && e.matchID.Rank != src.Rank {
			return false
		}
	} else {
		if e.matchID.NID != NIDAny && e.matchID.NID != src.NID {
			return false
		}
		if e.matchID.PID != PIDAny && e.matchID.PID != src.PID {
			return false
		}
	}
	if e.opts&NoTruncate != 0 && rlength > 0 {
		off := roff
		if e.opts&ManageLocal != 0 {
			off = e.localOff
		}
		if rlength > e.avail(off) {
			return false
		}
	}
	return true
}

// appendEntry is the common body of PtlLEAppend and PtlMEAppend.
func (ni *logicalNI) appendEntry(e *entry, ptIdx PTIndex, list List, fn string) (Handle, error) {
	pt, err := ni.pt(ptIdx, fn)
	if err != nil {
		return InvalidHandle, err
	}
	if list > OverflowList {
		return InvalidHandle, errf(ErrArgInvalid, fn, "ptl_list "+list.String()+" is neither list")
	}
	if list == PriorityList && pt.opts&PTOnlyUseOnce != 0 && e.opts&UseOnce == 0 {
		return InvalidHandle, errf(ErrArgInvalid, fn, "the portal table entry is PTL_PT_ONLY_USE_ONCE and the entry is persistent")
	}
	if list == PriorityList && pt.opts&PTOnlyTruncate != 0 && e.opts&NoTruncate != 0 {
		return InvalidHandle, errf(ErrArgInvalid, fn, "the portal table entry is PTL_PT_ONLY_TRUNCATE and the entry has PTL_ME_NO_TRUNCATE")
	}
	if pt.lists[list].n >= ni.lim.MaxListSize {
		return InvalidHandle, errf(ErrListTooLong, fn, "the list holds max_list_size "+strconv.Itoa(ni.lim.MaxListSize)+" entries")
	}
	ni.reapZombies()
	slot, gen, ok := ni.ents.alloc(e)
	if !ok {
		return InvalidHandle, errf(ErrNoSpace, fn, "max_entries "+strconv.Itoa(ni.lim.MaxEntries)+" entries are allocated")
	}
	k := kindLE
	if e.isME {
		k = kindME
	}
	e.h = mkHandle(k, ni.p.iface, ni.idx, gen, slot)
	e.pt, e.list = ptIdx, list
	if list == PriorityList {
		// §3.11.2/§3.12.2: search the unexpected list first, as if the entry had been on the
		// priority list when the messages arrived.
		if ni.searchUH(pt, e, SearchDelete, true) {
			return e.h, nil // consumed before linking; AUTO_UNLINK was posted
		}
	}
	e.linked = true
	pt.lists[list].push(e)
	if e.opts&EventLinkDisable == 0 {
		pt.eq.post(&Event{Type: EventLink, UserPtr: e.userPtr, PTIndex: ptIdx, NIFail: NIOK})
	}
	return e.h, nil
}

// searchUH walks the unexpected list with entry e (§3.11.4, §3.12.4). For an append
// (appending true) matching headers become *_OVERFLOW events and are removed; the function
// reports whether e was used up and must not be linked. For a search the 4.3 counting rules
// apply: success += 1 per hit, failure += 1 at the end (or when a use-once search misses).
func (ni *logicalNI) searchUH(pt *ptEntry, e *entry, op SearchOp, appending bool) bool {
	hits := 0
	incUH := appending && e.isME && e.opts&LocalIncUHRLength != 0 && e.opts&ManageLocal != 0 && e.opts&UseOnce == 0
	for u := pt.uh.head; u != nil; {
		next := u.next
		if !e.matches(u.bits, u.initiator, u.rlength, u.roff) {
			u = next
			continue
		}
		hits++
		rlength := u.rlength
		ev := Event{Start: u.start, UserPtr: e.userPtr, HdrData: u.hdrData, MatchBits: u.bits, RLength: u.rlength,
			MLength: u.mlength, RemoteOffset: u.roff, UID: u.uid, Initiator: u.initiator, Type: overflowKind(u.op),
			List: OverflowList, PTIndex: e.pt, NIFail: NIOK, AtomicOp: u.aop, AtomicType: u.dt}
		if !ni.matching {
			ev.MatchBits = 0
		}
		if op == SearchOnly {
			ev.Type = EventSearch
			if e.opts&(EventCommDisable|EventSuccessDisable) == 0 {
				pt.eq.post(&ev)
			}
		} else if e.opts&(EventOverDisable|EventSuccessDisable) == 0 {
			pt.eq.post(&ev)
		}
		if appending {
			if e.opts&EventCTOverflow != 0 {
				e.ct.add(e.ctAmount(u.mlength), 0)
			}
		} else {
			e.ct.add(1, 0)
		}
		if op == SearchDelete {
			ni.dropUH(pt, u)
		}
		if incUH {
			e.localOff += rlength
			if e.minFree > 0 && e.avail(e.localOff) < e.minFree {
				ni.unlinkedBeforeLink(pt, e)
				return true
			}
		}
		if e.opts&UseOnce != 0 {
			if appending {
				ni.unlinkedBeforeLink(pt, e)
				return true
			}
			return true
		}
		u = next
	}
	if !appending {
		// §3.12.4: a final PTL_EVENT_SEARCH with PTL_NI_NO_MATCH ends a persistent search or
		// reports a use-once search that found nothing; the CT failure count says "done".
		if e.opts&EventCommDisable == 0 {
			pt.eq.post(&Event{Type: EventSearch, UserPtr: e.userPtr, PTIndex: e.pt, NIFail: NINoMatch})
		}
		e.ct.add(0, 1)
	}
	return false
}

// unlinkedBeforeLink finishes an append whose entry was used up by unexpected headers: it
// is never linked, PTL_EVENT_AUTO_UNLINK is posted and the handle stays valid (answering
// PTL_IN_USE to Unlink) until the next append.
func (ni *logicalNI) unlinkedBeforeLink(pt *ptEntry, e *entry) {
	if e.opts&EventUnlinkDisable == 0 {
		pt.eq.post(&Event{Type: EventAutoUnlink, UserPtr: e.userPtr, PTIndex: e.pt, NIFail: NIOK})
	}
	e.zombie = true
	ni.zombies = append(ni.zombies, e)
}

func (e *entry) ctAmount(mlength uint64) uint64 {
	if e.opts&EventCTBytes != 0 {
		return mlength
	}
	return 1
}

func overflowKind(op byte) EventKind {
	switch op {
	case opGet:
		return EventGetOverflow
	case opAtomic:
		return EventAtomicOverflow
	case opFetch, opSwap:
		return EventFetchAtomicOverflow
	}
	return EventPutOverflow
}

// dropUH removes a header; the overflow entry it points into may now be free (AUTO_FREE).
func (ni *logicalNI) dropUH(pt *ptEntry, u *uhdr) {
	pt.uh.remove(u)
	ni.nUH--
	e := u.ent
	*u = uhdr{next: ni.uhFree}
	ni.uhFree = u
	e.uhRefs--
	if e.uhRefs == 0 && e.awaitFree {
		e.awaitFree = false
		if e.opts&EventUnlinkDisable == 0 {
			pt.eq.post(&Event{Type: EventAutoFree, UserPtr: e.userPtr, PTIndex: e.pt, NIFail: NIOK})
		}
		e.zombie = true
		ni.zombies = append(ni.zombies, e)
	}
}

// autoUnlink unlinks an entry the NIC used up (use-once or min_free, §3.11.3, §3.12.3),
// posting PTL_EVENT_AUTO_UNLINK after the operation's own event, and PTL_EVENT_AUTO_FREE for
// an overflow entry once no unexpected header refers to it (§3.13.1).
func (ni *logicalNI) autoUnlink(pt *ptEntry, e *entry) {
	pt.lists[e.list].remove(e)
	e.linked = false
	if e.opts&EventUnlinkDisable == 0 {
		pt.eq.post(&Event{Type: EventAutoUnlink, UserPtr: e.userPtr, PTIndex: e.pt, NIFail: NIOK})
	}
	if e.list == OverflowList && e.opts&UnexpectedHdrDisable == 0 {
		if e.uhRefs > 0 {
			e.awaitFree = true
			return
		}
		if e.opts&EventUnlinkDisable == 0 {
			pt.eq.post(&Event{Type: EventAutoFree, UserPtr: e.userPtr, PTIndex: e.pt, NIFail: NIOK})
		}
	}
	e.zombie = true
	ni.zombies = append(ni.zombies, e)
}

// reapZombies releases the handles of entries unlinked by the NIC: by Implementation Note
// 10 they stay usable for Unlink (answering PTL_IN_USE) until the next append.
func (ni *logicalNI) reapZombies() {
	for _, e := range ni.zombies {
		ni.ents.release(e.h.slot())
	}
	clear(ni.zombies)
	ni.zombies = ni.zombies[:0]
}

func (ni *logicalNI) newEntry(isME bool, buf []byte, iov [][]byte, opts EntryOptions, ct CTHandle, uid UID, userPtr uint64, fn string) (*entry, error) {
	e := &entry{ni: ni, isME: isME, uid: uid, opts: opts, userPtr: userPtr}
	if opts >= entryOptionsEnd {
		return nil, errf(ErrArgInvalid, fn, "options "+opts.String()+" hold unknown bits")
	}
	if !isME && opts&meOnlyOptions != 0 {
		return nil, errf(ErrArgInvalid, fn, "options "+(opts&meOnlyOptions).String()+" exist only for MEs")
	}
	if opts&EntryIovec != 0 {
		if len(iov) > ni.lim.MaxIovecs {
			return nil, errf(ErrArgInvalid, fn, "the entry has "+strconv.Itoa(len(iov))+" iovecs, above max_iovecs "+strconv.Itoa(ni.lim.MaxIovecs))
		}
		e.iov = append([][]byte(nil), iov...)
		for _, v := range e.iov {
			e.length += uint64(len(v))
		}
	} else {
		e.buf = buf
		e.length = uint64(len(buf))
	}
	var err error
	if e.ct, err = ni.optCT(ct, fn, "ct_handle"); err != nil {
		return nil, err
	}
	return e, nil
}

// LEAppend implements PtlLEAppend (Portals 4.3 §3.11.2) on a non-matching NI.
func (h NIHandle) LEAppend(pt PTIndex, le *LE, list List, userPtr uint64) (LEHandle, error) {
	const fn = "PtlLEAppend"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return LEHandle(InvalidHandle), err
	}
	defer p.unlockWake()
	if ni.matching {
		return LEHandle(InvalidHandle), errf(ErrArgInvalid, fn, "ni_handle is a matching NI (use MEAppend)")
	}
	if le == nil {
		return LEHandle(InvalidHandle), errf(ErrArgInvalid, fn, "le is nil")
	}
	e, err := ni.newEntry(false, le.Buf, le.Iov, le.Options, le.CT, le.UID, userPtr, fn)
	if err != nil {
		return LEHandle(InvalidHandle), err
	}
	hh, err := ni.appendEntry(e, pt, list, fn)
	return LEHandle(hh), err
}

// MEAppend implements PtlMEAppend (Portals 4.3 §3.12.2) on a matching NI.
func (h NIHandle) MEAppend(pt PTIndex, me *ME, list List, userPtr uint64) (MEHandle, error) {
	const fn = "PtlMEAppend"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return MEHandle(InvalidHandle), err
	}
	defer p.unlockWake()
	e, err := ni.newME(me, userPtr, fn)
	if err != nil {
		return MEHandle(InvalidHandle), err
	}
	hh, err := ni.appendEntry(e, pt, list, fn)
	return MEHandle(hh), err
}

func (ni *logicalNI) newME(me *ME, userPtr uint64, fn string) (*entry, error) {
	if !ni.matching {
		return nil, errf(ErrArgInvalid, fn, "ni_handle is a non-matching NI (use LE functions)")
	}
	if me == nil {
		return nil, errf(ErrArgInvalid, fn, "me is nil")
	}
	e, err := ni.newEntry(true, me.Buf, me.Iov, me.Options, me.CT, me.UID, userPtr, fn)
	if err != nil {
		return nil, err
	}
	e.matchID, e.bits, e.ignore, e.minFree = me.MatchID, me.MatchBits, me.IgnoreBits, me.MinFree
	return e, nil
}

// LESearch implements PtlLESearch (Portals 4.3 §3.11.4).
func (h NIHandle) LESearch(pt PTIndex, le *LE, op SearchOp, userPtr uint64) error {
	const fn = "PtlLESearch"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return err
	}
	defer p.unlockWake()
	if ni.matching {
		return errf(ErrArgInvalid, fn, "ni_handle is a matching NI (use MESearch)")
	}
	if le == nil {
		return errf(ErrArgInvalid, fn, "le is nil")
	}
	e, err := ni.newEntry(false, le.Buf, le.Iov, le.Options, le.CT, le.UID, userPtr, fn)
	if err != nil {
		return err
	}
	return ni.search(e, pt, op, fn)
}

// MESearch implements PtlMESearch (Portals 4.3 §3.12.4); PTL_ME_LOCAL_INC_UH_RLENGTH is
// ignored.
func (h NIHandle) MESearch(pt PTIndex, me *ME, op SearchOp, userPtr uint64) error {
	const fn = "PtlMESearch"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return err
	}
	defer p.unlockWake()
	e, err := ni.newME(me, userPtr, fn)
	if err != nil {
		return err
	}
	return ni.search(e, pt, op, fn)
}

func (ni *logicalNI) search(e *entry, ptIdx PTIndex, op SearchOp, fn string) error {
	pt, err := ni.pt(ptIdx, fn)
	if err != nil {
		return err
	}
	if op > SearchDelete {
		return errf(ErrArgInvalid, fn, "ptl_search_op "+op.String()+" is not a search operation")
	}
	e.pt = ptIdx
	ni.searchUH(pt, e, op, false)
	return nil
}

// Unlink implements PtlLEUnlink (Portals 4.3 §3.11.3): ErrInUse for an entry that the NIC
// already unlinked (until the next append) or an overflow entry with unexpected headers.
func (h LEHandle) Unlink() error { return unlink(Handle(h), kindLE, "PtlLEUnlink") }

// Unlink implements PtlMEUnlink (Portals 4.3 §3.12.3), as LEHandle.Unlink.
func (h MEHandle) Unlink() error { return unlink(Handle(h), kindME, "PtlMEUnlink") }

func unlink(h Handle, k handleKind, fn string) error {
	ni, p, err := lockObj(h, k, fn, "handle")
	if err != nil {
		return err
	}
	defer p.unlockWake()
	e := ni.ents.get(h.slot(), h.gen())
	if e == nil {
		return errf(ErrArgInvalid, fn, "handle names an entry that no longer exists")
	}
	if e.zombie || e.awaitFree {
		return errf(ErrInUse, fn, "the entry was already unlinked by the implementation")
	}
	if e.uhRefs > 0 {
		return errf(ErrInUse, fn, strconv.Itoa(e.uhRefs)+" unexpected headers refer to the overflow entry")
	}
	pt := &ni.pts[e.pt]
	if e.linked {
		pt.lists[e.list].remove(e)
		e.linked = false
	}
	ni.ents.release(h.slot())
	return nil
}
