package gex

import (
	"encoding/binary"
)

// One-sided RMA, GASNet-EX "Extended API" (gex_RMA_*). Two paths, chosen per
// peer:
//
//   (a) the peer's segment is mapped here (self and neighbourhood peers): a
//       put or get is a copy through the mapping, complete when the call
//       returns. The target sees a put's bytes through any later
//       synchronisation from this rank (an AM, an atomic, a barrier), because
//       those publish with release stores that order the copy before them.
//       Its common case, every spec-shaped call with flags 0, is the fast
//       path of rma_fast_unsafe.go; rma below is everything else.
//   (b) otherwise: the reference protocol over AMs (rma_am.go), chunked to the
//       AM limits, with every chunk's remote completion acknowledged.
//
// Local completion of puts always happens inside the initiation call (path
// (a) copies directly; path (b) copies each chunk into a shared-memory
// payload buffer during injection), so lc_opt events are EventInvalid and
// EventDefer/EventGroup leave nothing outstanding.

type rmaMode uint8

// lcKind classifies an lc_opt argument without holding on to it, so a
// caller's *Event never escapes through the general path.
type lcKind uint8

const (
	lcNow   lcKind = iota // nil or EventNow
	lcDefer               // EventDefer
	lcGroup               // EventGroup
	lcEvent               // a pointer to the caller's Event
)

func lcKindOf(lc *Event) lcKind {
	switch lc {
	case nil, EventNow:
		return lcNow
	case EventDefer:
		return lcDefer
	case EventGroup:
		return lcGroup
	}
	return lcEvent
}

const (
	modeBlocking rmaMode = iota
	modeNBI
	modeNB
)

// rmaAllowed are the flags RMA calls accept.
const rmaAllowed = FlagImmediate | FlagPeerNeverSelf | FlagPeerNeverNbrhd | FlagSelfSegOffset | FlagPeerSegOffset |
	FlagSelfSegUnknown | FlagSelfSegSome | FlagSelfSegBound | FlagPeerSegUnknown | FlagPeerSegSome | FlagPeerSegBound |
	FlagLCCopyYes | FlagLCCopyNo

// rmaSpec is one RMA call as the caller described it.
type rmaSpec struct {
	op    string
	put   bool
	mode  rmaMode
	rank  Rank
	raddr Addr
	local []byte
	lc    lcKind // which lc_opt the caller passed; the pointer itself stays with the caller
	flags Flags
	dstEP uint16 // the target endpoint's index (set by rma)
}

// segView is a rank's segment as seen from this process: owner address, size,
// and the local mapping (nil where it is not mapped).
type segView struct {
	owner uint64
	size  uint64
	local []byte
}

// copyChunk bounds the pieces copyMapped copies at a time. Go's memmove
// switches to non-temporal stores for copies of 1 MiB and more, which on
// shared-memory mappings runs at a third of the speed of cached copies of
// 256 KiB pieces (measured with gexbench flood: ~3.4 vs ~11 GB/s).
const copyChunk = 256 << 10

// copyMapped copies src to dst (equal lengths) in pieces below memmove's
// non-temporal threshold.
func copyMapped(dst, src []byte) {
	for len(src) > copyChunk {
		copy(dst[:copyChunk], src[:copyChunk])
		dst, src = dst[copyChunk:], src[copyChunk:]
	}
	copy(dst, src)
}

// PutBlocking implements gex_RMA_PutBlocking: it returns once src is in the
// target's segment at dest (remote completion).
//
// Its 8-byte mapped fast path inlines into the caller (blocking8,
// rma_fast_unsafe.go); every other call goes to putAny.
func (tm *TM) PutBlocking(rank Rank, dest Addr, src []byte, flags Flags) error {
	return tm.blocking8(src, rank, dest, nil, flags, (*TM).gate8, (*TM).map8, put8Fin, (*TM).putBlockingSlow)
}

// putBlockingSlow is PutBlocking's general path in blocking8's argument
// order; putNBISlow is PutNBI's.
func (tm *TM) putBlockingSlow(src []byte, rank Rank, dest Addr, lc *Event, flags Flags) error {
	_, err := tm.putAny(modeBlocking, rank, dest, src, lc, flags)
	return err
}

func (tm *TM) putNBISlow(src []byte, rank Rank, dest Addr, lc *Event, flags Flags) error {
	_, err := tm.putAny(modeNBI, rank, dest, src, lc, flags)
	return err
}

// PutNBI implements gex_RMA_PutNBI. lc is nil/EventNow, EventDefer or
// EventGroup; completion is tracked by NBITest/NBIWait(ECPut) or the open
// access region. With lc nil its 8-byte mapped fast path inlines into the
// caller as PutBlocking's does.
func (tm *TM) PutNBI(rank Rank, dest Addr, src []byte, lc *Event, flags Flags) error {
	return tm.blocking8(src, rank, dest, lc, flags, (*TM).gate8, (*TM).map8, put8Fin, (*TM).putNBISlow)
}

// PutNB implements gex_RMA_PutNB: the returned root event completes at remote
// completion. lc is nil/EventNow, EventDefer, or a pointer to an Event that
// receives the local-completion leaf event.
func (tm *TM) PutNB(rank Rank, dest Addr, src []byte, lc *Event, flags Flags) (Event, error) {
	return tm.put(modeNB, rank, dest, src, lc, flags)
}

// GetBlocking implements gex_RMA_GetBlocking: it returns once dst holds the
// bytes at src in the target's segment.
//
// Its 8-byte mapped fast path inlines into the caller (blocking8,
// rma_fast_unsafe.go); every other call goes to getAny.
func (tm *TM) GetBlocking(dst []byte, rank Rank, src Addr, flags Flags) error {
	return tm.blocking8(dst, rank, src, nil, flags, (*TM).gate8, (*TM).map8, get8Fin, (*TM).getBlockingSlow)
}

// getBlockingSlow is GetBlocking's general path, getNBISlow GetNBI's (lc
// is nil).
func (tm *TM) getBlockingSlow(dst []byte, rank Rank, src Addr, _ *Event, flags Flags) error {
	_, err := tm.getAny(modeBlocking, dst, rank, src, flags)
	return err
}

func (tm *TM) getNBISlow(dst []byte, rank Rank, src Addr, _ *Event, flags Flags) error {
	_, err := tm.getAny(modeNBI, dst, rank, src, flags)
	return err
}

// GetNBI implements gex_RMA_GetNBI (completion: NBITest/NBIWait(ECGet) or the
// open access region). Its 8-byte mapped fast path inlines into the caller
// as GetBlocking's does.
func (tm *TM) GetNBI(dst []byte, rank Rank, src Addr, flags Flags) error {
	return tm.blocking8(dst, rank, src, nil, flags, (*TM).gate8, (*TM).map8, get8Fin, (*TM).getNBISlow)
}

// GetNB implements gex_RMA_GetNB.
func (tm *TM) GetNB(dst []byte, rank Rank, src Addr, flags Flags) (Event, error) {
	return tm.get(modeNB, dst, rank, src, flags)
}

// putOps and getOps name the calls by mode.
var (
	putOps = [...]string{modeBlocking: "PutBlocking", modeNBI: "PutNBI", modeNB: "PutNB"}
	getOps = [...]string{modeBlocking: "GetBlocking", modeNBI: "GetNBI", modeNB: "GetNB"}
)

// put is the body of PutNB (which the compiler inlines into its callers,
// so that a put costs one call into gex; PutBlocking and PutNBI inline the
// 8-byte fast path whole, blocking8 in rma_fast_unsafe.go): the
// mapped fast path of an 8-byte put (rma_fast_unsafe.go) here, every other
// length in putAny, else the general path. Nosplit, and with no value live
// across a call (each call is the last thing on its path, with put's own
// arguments), so that the 8-byte path has no stack check, no spill and no
// frame beyond the callees' argument area (docs/rma.md, "Third pass"); the
// linker checks that put's frame fits the nosplit limit, and the callees
// are ordinary functions that check the stack themselves.
//
//go:nosplit
func (tm *TM) put(mode rmaMode, rank Rank, dest Addr, src []byte, lc *Event, flags Flags) (Event, error) {
	if len(src) != 8 {
		return tm.putAny(mode, rank, dest, src, lc, flags)
	}
	if p := tm.mappedAt(rank, dest, 8); p != nil && flags == 0 {
		// The restricted-context check in an if of its own branches on
		// the loads themselves (in the && chain the compiler builds a
		// bool first).
		if !tm.c.mayBeRestricted() && (lc == nil || fastLC(mode, lc)) {
			if put8(p, src) {
				return Event{}, nil
			}
		}
	}
	return tm.putSlow(mode, rank, dest, src, lc, flags)
}

// putAny is put for every length but 8, and the general path of
// PutBlocking and PutNBI (blocking8: every length but 8, every lc_opt but
// nil, every call the inlined checks refused): the mapped fast path with a
// copy of any length, else the general path. (Not nosplit as getAny is:
// measured, that made 16-128 B puts 0.5-2.6 ns slower; docs/rma.md,
// "Fourth pass".)
//
//go:noinline
func (tm *TM) putAny(mode rmaMode, rank Rank, dest Addr, src []byte, lc *Event, flags Flags) (Event, error) {
	if p := tm.mappedAt(rank, dest, len(src)); p != nil && flags == 0 {
		if !tm.c.mayBeRestricted() && (lc == nil || fastLC(mode, lc)) {
			if len(src) == 8 {
				if put8(p, src) { // an 8-byte put with an lc_opt (PutNBI, put)
					return Event{}, nil
				}
			} else if copyTo(p, src) {
				return Event{}, nil
			}
		}
	}
	return tm.putSlow(mode, rank, dest, src, lc, flags)
}

// putSlow is put's general path, out of line so that the fast path needs
// no stack frame for it.
//
//go:noinline
func (tm *TM) putSlow(mode rmaMode, rank Rank, dest Addr, src []byte, lc *Event, flags Flags) (Event, error) {
	ev, err := tm.rma(&rmaSpec{op: putOps[mode], put: true, mode: mode, rank: rank, raddr: dest, local: src, lc: lcKindOf(lc), flags: flags})
	if err == nil && mode == modeNB && lcKindOf(lc) == lcEvent {
		*lc = EventInvalid // local completion happened during the call
	}
	return ev, err
}

// fastLC reports whether the non-nil lc_opt lc is valid for a put of mode
// (NOTE 2a/2b) with nothing to do beyond the copy: EventNow and EventDefer
// always, EventGroup for NBI, and for NB a caller's *Event, which receives
// EventInvalid (local completion is the copy itself).
func fastLC(mode rmaMode, lc *Event) bool {
	switch lc {
	case EventNow, EventDefer:
		return true
	case EventGroup:
		return mode == modeNBI
	}
	if mode != modeNB {
		return false
	}
	*lc = EventInvalid
	return true
}

// get is the body of GetNB, as put is of PutNB
// (nosplit, no value live across a call: see put).
//
//go:nosplit
func (tm *TM) get(mode rmaMode, dst []byte, rank Rank, src Addr, flags Flags) (Event, error) {
	if len(dst) != 8 {
		return tm.getAny(mode, dst, rank, src, flags)
	}
	if p := tm.mappedAt(rank, src, 8); p != nil && flags == 0 {
		if !tm.c.mayBeRestricted() {
			if get8(dst, p) {
				return Event{}, nil
			}
		}
	}
	return tm.getSlow(mode, dst, rank, src, flags)
}

// getAny is get for every length but 8 and the general path of
// GetBlocking and GetNBI, as putAny is put's. Nosplit as put is (no stack
// check on the mapped paths; copyMapped and the general path check the
// stack themselves): 16-512 B gets 0.6-0.9 ns faster (docs/rma.md, "Fourth
// pass").
//
//go:noinline
//go:nosplit
func (tm *TM) getAny(mode rmaMode, dst []byte, rank Rank, src Addr, flags Flags) (Event, error) {
	if p := tm.mappedAt(rank, src, len(dst)); p != nil && flags == 0 {
		if !tm.c.mayBeRestricted() {
			if copyFrom(dst, p) {
				return Event{}, nil
			}
		}
	}
	return tm.getSlow(mode, dst, rank, src, flags)
}

// getSlow is get's general path, out of line as putSlow is.
//
//go:noinline
func (tm *TM) getSlow(mode rmaMode, dst []byte, rank Rank, src Addr, flags Flags) (Event, error) {
	return tm.rma(&rmaSpec{op: getOps[mode], mode: mode, rank: rank, raddr: src, local: dst, flags: flags})
}

// checkValSize validates the nbytes of a value-based call.
func checkValSize(op string, nbytes int) error {
	if nbytes < 1 || nbytes > 8 {
		return badArg(op, "nbytes %d out of range [1, 8] (sizeof gex_RMA_Value_t)", nbytes)
	}
	return nil
}

// GetBlockingVal implements gex_RMA_GetBlockingVal: the nbytes (1..8) at src,
// read as an unsigned integer in this machine's byte order. Nosplit as put
// is (no stack check on the mapped path).
//
//go:nosplit
func (tm *TM) GetBlockingVal(rank Rank, src Addr, nbytes int, flags Flags) (uint64, error) {
	if p := tm.mappedAt(rank, src, nbytes); p != nil && flags == 0 && uint(nbytes-1) < 8 {
		if !tm.c.mayBeRestricted() {
			return getValAt(p, nbytes), nil
		}
	}
	if err := checkValSize("GetBlockingVal", nbytes); err != nil {
		return 0, err
	}
	buf := new([8]byte)
	_, err := tm.rma(&rmaSpec{op: "GetBlockingVal", mode: modeBlocking, rank: rank, raddr: src, local: valBytes(buf, 0, nbytes), flags: flags})
	if err != nil {
		return 0, err
	}
	return binary.NativeEndian.Uint64(buf[:]), nil
}

// valBytes stores value in buf in this machine's byte order and returns the
// nbytes that hold its low-order part (gex_RMA_Value_t semantics); a get into
// that slice leaves buf holding the value read.
func valBytes(buf *[8]byte, value uint64, nbytes int) []byte {
	binary.NativeEndian.PutUint64(buf[:], value)
	if littleEndian {
		return buf[:nbytes]
	}
	return buf[8-nbytes:]
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// putValOps names the Put*Val calls by mode.
var putValOps = [...]string{modeBlocking: "PutBlockingVal", modeNBI: "PutNBIVal", modeNB: "PutNBVal"}

// putVal is the shared body of the Put*Val forms; the NB form's event is
// stored in *ev (left as it is, EventInvalid, on the mapped path). It
// returns only an error, and takes no name, so that the wrappers stay cheap
// enough to inline into the GASNet-1 layer's value calls (package gasnet) -
// one call deep there as here.
//
//go:nosplit
func (tm *TM) putVal(mode rmaMode, rank Rank, dest Addr, value uint64, nbytes int, flags Flags, ev *Event) error {
	if p := tm.mappedAt(rank, dest, nbytes); p != nil && flags == 0 && uint(nbytes-1) < 8 {
		if !tm.c.mayBeRestricted() {
			putValAt(p, value, nbytes)
			return nil
		}
	}
	op := putValOps[mode]
	if err := checkValSize(op, nbytes); err != nil {
		return err
	}
	buf := new([8]byte)
	e, err := tm.rma(&rmaSpec{op: op, put: true, mode: mode, rank: rank, raddr: dest, local: valBytes(buf, value, nbytes), flags: flags})
	if ev != nil {
		*ev = e
	}
	return err
}

// PutBlockingVal implements gex_RMA_PutBlockingVal: writes the low nbytes
// (1..8) of value at dest, in this machine's byte order.
func (tm *TM) PutBlockingVal(rank Rank, dest Addr, value uint64, nbytes int, flags Flags) error {
	return tm.putVal(modeBlocking, rank, dest, value, nbytes, flags, nil)
}

// PutNBIVal implements gex_RMA_PutNBIVal.
func (tm *TM) PutNBIVal(rank Rank, dest Addr, value uint64, nbytes int, flags Flags) error {
	return tm.putVal(modeNBI, rank, dest, value, nbytes, flags, nil)
}

// PutNBVal implements gex_RMA_PutNBVal.
func (tm *TM) PutNBVal(rank Rank, dest Addr, value uint64, nbytes int, flags Flags) (ev Event, err error) {
	err = tm.putVal(modeNB, rank, dest, value, nbytes, flags, &ev)
	return
}

// checkLC applies the lc_opt rules of NOTE 2a (NBI) and 2b (NB).
func (s *rmaSpec) checkLC() error {
	if !s.put || s.lc == lcNow || s.lc == lcDefer {
		return nil
	}
	switch s.mode {
	case modeNBI:
		if s.lc != lcGroup {
			return badArg(s.op, "lc_opt must be EventNow, EventDefer or EventGroup for an NBI put")
		}
	case modeNB:
		if s.lc == lcGroup {
			return badArg(s.op, "lc_opt EventGroup is not permitted for an NB put (use EventNow, EventDefer or an *Event)")
		}
	}
	return nil
}

// rma validates a call, picks the path and runs it.
func (tm *TM) rma(s *rmaSpec) (Event, error) {
	c := tm.c
	tm.fast.fill(c, tm.direct, tm.size) // later calls may take the fast path
	if c.slowHook != nil {
		c.slowHook(s.op)
	}
	if err := c.checkRestricted(s.op); err != nil {
		return EventInvalid, c.report(err)
	}
	if err := tm.checkRank(s.op, s.rank); err != nil {
		return EventInvalid, err
	}
	if bad := s.flags &^ rmaAllowed; bad != 0 {
		return EventInvalid, c.report(badArg(s.op, "flags %v are not valid for RMA", bad))
	}
	if err := s.checkLC(); err != nil {
		return EventInvalid, c.report(err)
	}
	n := len(s.local)
	if n == 0 {
		return EventInvalid, nil // zero-length transfers are no-ops
	}
	j := tm.jobrank(s.rank)
	if s.flags&FlagPeerNeverSelf != 0 && j == c.rank || s.flags&FlagPeerNeverNbrhd != 0 && c.topo.Nbrhd[j] == c.topo.Nbrhd[c.rank] {
		return EventInvalid, c.report(badArg(s.op, "rank %d contradicts the asserted %v", s.rank, s.flags&(FlagPeerNeverSelf|FlagPeerNeverNbrhd)))
	}
	if s.flags&FlagSelfSegOffset != 0 {
		if err := c.checkLocalInSegment(s.op, s.local); err != nil {
			return EventInvalid, c.report(err)
		}
	}
	seg, dstEP, err := tm.targetSeg(s.op, s.rank, j, EPCapabilityRMA)
	if err != nil {
		return EventInvalid, err
	}
	s.dstEP = dstEP
	if seg.Size == 0 && dstEP != 0 && s.flags&FlagPeerSegOffset == 0 {
		// Not published here: the target endpoint checks the range.
		ev, err := c.rmaAM(s, j, uint64(s.raddr))
		return ev, c.report(err)
	}
	raddr := s.raddr
	if s.flags&FlagPeerSegOffset != 0 {
		raddr += Addr(seg.Owner)
	}
	if seg.Size == 0 {
		return EventInvalid, c.report(badArg(s.op, "rank %d has no bound segment", s.rank))
	}
	if raddr < Addr(seg.Owner) || uint64(raddr-Addr(seg.Owner)) > seg.Size || uint64(n) > seg.Size-uint64(raddr-Addr(seg.Owner)) {
		return EventInvalid, c.report(badArg(s.op, "remote range [%#x, +%d) is outside rank %d's segment [%#x, +%d)%s", uintptr(raddr), n, s.rank, seg.Owner, seg.Size, c.ownSegHint(j, uint64(raddr))))
	}
	off := uint64(raddr - Addr(seg.Owner))
	if seg.Local != nil {
		// Path (a): a copy through the mapping.
		remote := seg.Local[off : off+uint64(n)]
		if overlaps(s.local, remote) {
			return EventInvalid, c.report(badArg(s.op, "source and destination overlap (GASNet-EX \"Extended API\", NOTE 5)"))
		}
		if s.put {
			copyMapped(remote, s.local)
		} else {
			copyMapped(s.local, remote)
		}
		return EventInvalid, nil
	}
	ev, err := c.rmaAM(s, j, uint64(raddr))
	return ev, c.report(err)
}

// checkLocalInSegment implements the SELF_SEG_OFFSET rule for slices: a Go
// slice already names its memory, so the flag asserts that it lies in this
// rank's bound segment, which is checked.
func (c *Client) checkLocalInSegment(op string, b []byte) error {
	seg := c.ep.seg.Load()
	if seg == nil {
		return badArg(op, "GEX_FLAG_SELF_SEG_OFFSET given but no segment is attached")
	}
	if len(b) > 0 {
		base := addrOf(seg.mem)
		p := addrOf(b)
		if p < base || p-base > uintptr(len(seg.mem)) || uintptr(len(b)) > uintptr(len(seg.mem))-(p-base) {
			return badArg(op, "GEX_FLAG_SELF_SEG_OFFSET given but the local buffer is not inside the bound segment")
		}
	}
	return nil
}
