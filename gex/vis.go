package gex

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/gctx"
)

// Vector/Indexed/Strided transfers (VIS), GASNet-EX API v0.18,
// "Vector/Indexed/Strided (VIS)" (gasnet_vis.h), which supersedes parts of the
// GASNet-1 VIS proposal ("UPC memcpy / GASNet VIS extension", v2.0) whose
// vector, indexed and strided (design B) semantics it refers back to.
//
// The local side of every call is Go memory ([]byte slices), the remote side
// is named by owner addresses (Addr, Memvec), as in the RMA calls. Two paths,
// chosen per peer as for RMA (docs/rma.md, docs/vis.md):
//
//   (a) the peer's segment is mapped here: a copy loop over both sides'
//       contiguous runs (adjacent remote runs and collapsible stride levels
//       merged), complete when the call returns;
//   (b) otherwise: the scattered source is packed into Medium AMs with the
//       remote run list in the payload, several in flight, and unpacked and
//       bounds-checked at the target (vis_am.go); gets send the run lists and
//       the target packs the data into Medium replies.
//
// Metadata lifetime (EX VIS: "the metadata arrays passed to Strided variants
// ... are guaranteed to be consumed synchronously before return"): strided
// metadata is always consumed before return; every put consumes all its
// metadata and payload before return on both paths; a vector or indexed get
// on path (b) keeps reading its local destination list (dstlist and the
// slices in it) until the operation completes, as the EX text permits
// ("metadata arrays ... can occur as late as operation completion").

// Memvec is one contiguous remote region (gex_Memvec_t): Len bytes at the
// owner's address Addr.
type Memvec struct {
	Addr Addr
	Len  int
}

// VISMaxPeerCompletion is GEX_VIS_MAX_PEERCOMPLETION, the largest payload of
// a peer-completion notification ("Guaranteed to be at least 127 bytes").
const VISMaxPeerCompletion = 256

// visMaxLevels bounds the stride levels with a count above 1 that one call
// may have (levels with count 1 are dropped first): 33 such levels describe
// at least 2^33 elements, more than any segment holds.
const visMaxLevels = 32

// visAllowed are the flags VIS calls accept (FlagEnableLeafLC only on puts
// in the NB and NBI forms, checked separately).
const visAllowed = FlagImmediate | FlagPeerNeverSelf | FlagPeerNeverNbrhd | FlagSelfSegOffset | FlagPeerSegOffset |
	FlagSelfSegUnknown | FlagSelfSegSome | FlagSelfSegBound | FlagPeerSegUnknown | FlagPeerSegSome | FlagPeerSegBound |
	FlagLCCopyYes | FlagLCCopyNo | FlagEnableLeafLC

type visKind uint8

const (
	visVector visKind = iota
	visIndexed
	visStrided
)

// strideShape is one side of a strided transfer after normalisation: levels
// with count 1 dropped, and leading levels whose stride equals the run so far
// folded into runLen (contiguous runs merged).
type strideShape struct {
	runLen int
	nlev   int
	cnt    [visMaxLevels]int
	str    [visMaxLevels]int
}

// visSide is one side of a VIS transfer, validated: a sequence of contiguous
// runs that its cursor walks in transfer order.
type visSide struct {
	kind   visKind
	remote bool
	bufs   [][]byte // local vector/indexed
	vecs   []Memvec // remote vector
	addrs  []Addr   // remote indexed
	ilen   int      // indexed: bytes per entry
	buf    []byte   // local strided: the buffer
	base   int64    // strided: offset of the base element in buf (local) or its owner address (remote)
	st     strideShape
	adj    uint64 // remote: added to every address (the segment base under FlagPeerSegOffset)
	owner  uint64 // remote, path (a): owner address of mapped[0]
	mapped []byte // remote, path (a): the target's segment mapped here
	total  int    // bytes
	// vector/indexed, set by checkSides in its one pass over the entries:
	// the smallest range holding every non-empty run (owner addresses plus
	// adj for a remote side, this process's addresses for a local one), and
	// whether the runs come in ascending order without overlapping (then
	// they are pairwise disjoint without a sort).
	ext    span
	asc    bool
	paired bool // local vector: entry i has the length of remote entry i (at most copyChunk)
	maxLen int  // local vector: the longest entry
}

// visCursor walks a side's runs.
type visCursor struct {
	s    *visSide
	i    int // vector/indexed: next entry
	off  int64
	done bool
	idx  [visMaxLevels]int // strided odometer
}

func (s *visSide) cursor() visCursor { return visCursor{s: s} }

// nextRun returns the next non-empty run: for a remote side its owner
// address, for a local strided side its offset in buf, for a local
// vector/indexed side its entry index. Adjacent remote vector/indexed runs are
// merged.
func (c *visCursor) nextRun() (a uint64, n int, ok bool) {
	s := c.s
	switch s.kind {
	case visStrided:
		if c.done {
			return 0, 0, false
		}
		a, n = uint64(s.base+c.off), s.st.runLen
		if s.remote {
			a += s.adj
		}
		k := 0
		for ; k < s.st.nlev; k++ {
			c.idx[k]++
			c.off += int64(s.st.str[k])
			if c.idx[k] < s.st.cnt[k] {
				break
			}
			c.off -= int64(s.st.str[k]) * int64(s.st.cnt[k])
			c.idx[k] = 0
		}
		c.done = k == s.st.nlev
		return a, n, true
	case visVector:
		if !s.remote {
			for c.i < len(s.bufs) {
				c.i++
				if len(s.bufs[c.i-1]) > 0 {
					return uint64(c.i - 1), len(s.bufs[c.i-1]), true
				}
			}
			return 0, 0, false
		}
		for c.i < len(s.vecs) && s.vecs[c.i].Len == 0 {
			c.i++
		}
		if c.i == len(s.vecs) {
			return 0, 0, false
		}
		a, n = uint64(s.vecs[c.i].Addr), s.vecs[c.i].Len
		for c.i++; c.i < len(s.vecs); c.i++ {
			v := s.vecs[c.i]
			if v.Len != 0 && uint64(v.Addr) != a+uint64(n) {
				break
			}
			n += v.Len
		}
		return a + s.adj, n, true
	default: // visIndexed
		if c.i >= s.count() || s.ilen == 0 {
			return 0, 0, false
		}
		if !s.remote {
			c.i++
			return uint64(c.i - 1), s.ilen, true
		}
		a, n = uint64(s.addrs[c.i]), s.ilen
		for c.i++; c.i < len(s.addrs) && uint64(s.addrs[c.i]) == a+uint64(n); c.i++ {
			n += s.ilen
		}
		return a + s.adj, n, true
	}
}

func (s *visSide) count() int {
	if s.remote {
		return len(s.addrs)
	}
	return len(s.bufs)
}

// bytes returns the memory of a run nextRun returned: local memory, or the
// mapping of the remote run (path (a)).
func (s *visSide) bytes(a uint64, n int) []byte {
	switch {
	case s.remote:
		off := a - s.owner
		return s.mapped[off : off+uint64(n)]
	case s.kind == visStrided:
		return s.buf[a : a+uint64(n)]
	}
	return s.bufs[a][:n]
}

// next returns the memory of the next run, or nil at the end.
func (c *visCursor) next() []byte {
	a, n, ok := c.nextRun()
	if !ok {
		return nil
	}
	return c.s.bytes(a, n)
}

// visCopy is path (a): it copies src's runs to dst's runs (equal totals).
func visCopy(dst, src *visCursor) {
	var d, s []byte
	for {
		if len(d) == 0 {
			if d = dst.next(); d == nil {
				return
			}
		}
		if len(s) == 0 {
			if s = src.next(); s == nil {
				return
			}
		}
		var n int
		if len(d) <= copyChunk && len(s) <= copyChunk {
			n = copy(d, s)
		} else {
			n = min(len(d), len(s))
			copyMapped(d[:n], s[:n])
		}
		d, s = d[n:], s[n:]
	}
}

// copyRun copies the run src to dst (same length). The chunk sizes of
// fine-grained VIS (8 and 16 bytes, and 4) are fixed-size array assignments,
// a move or two instead of a memmove call; other sizes take copy().
func copyRun(dst, src []byte) {
	switch len(src) {
	case 8:
		*(*[8]byte)(dst) = *(*[8]byte)(src)
	case 16:
		*(*[16]byte)(dst) = *(*[16]byte)(src)
	case 4:
		*(*[4]byte)(dst) = *(*[4]byte)(src)
	default:
		copy(dst, src)
	}
}

// visCopySame is path (a) for the common case of both sides having the same
// run structure (same strided shape after normalisation, or vector/indexed
// lists whose entries pair up one to one): one loop over the pairs, without
// cursors. It reports whether it applied.
func visCopySame(put bool, l, r *visSide) bool {
	switch {
	case l.kind == visStrided:
		if l.st.runLen != r.st.runLen || l.st.nlev != r.st.nlev || l.st.cnt != r.st.cnt || l.st.runLen > copyChunk {
			return false
		}
		lo, ro := l.base, int64(uint64(r.base)+r.adj-r.owner)
		if put {
			stridedCopy(r.mapped, ro, &r.st, l.buf, lo, &l.st)
		} else {
			stridedCopy(l.buf, lo, &l.st, r.mapped, ro, &r.st)
		}
		return true
	case l.kind == visVector && l.paired: // checkSides paired the lists
		base, m := r.adj-r.owner, r.mapped
		vecs := r.vecs[:len(l.bufs)]
		if put {
			for i, b := range l.bufs {
				if len(b) > 0 {
					o := uint64(vecs[i].Addr) + base
					copyRun(m[o:o+uint64(len(b))], b)
				}
			}
		} else {
			for i, b := range l.bufs {
				if len(b) > 0 {
					o := uint64(vecs[i].Addr) + base
					copyRun(b, m[o:o+uint64(len(b))])
				}
			}
		}
		return true
	case l.kind == visIndexed && r.kind == visIndexed && l.ilen == r.ilen && len(l.bufs) == len(r.addrs) && l.ilen <= copyChunk:
		n, base, m := uint64(l.ilen), r.adj-r.owner, r.mapped
		addrs := r.addrs[:len(l.bufs)]
		switch {
		case n == 8 && put:
			for i, b := range l.bufs {
				o := uint64(addrs[i]) + base
				*(*[8]byte)(m[o : o+8]) = *(*[8]byte)(b)
			}
		case n == 8:
			for i, b := range l.bufs {
				o := uint64(addrs[i]) + base
				*(*[8]byte)(b) = *(*[8]byte)(m[o : o+8])
			}
		case put:
			for i, b := range l.bufs {
				o := uint64(addrs[i]) + base
				copyRun(m[o:o+n], b[:n])
			}
		default:
			for i, b := range l.bufs {
				o := uint64(addrs[i]) + base
				copyRun(b[:n], m[o:o+n])
			}
		}
		return true
	}
	return false
}

// stridedCopy copies the runs of the strided pattern ss at src[so:] to those
// of ds at dst[do:] (same run length and counts, checked in bounds): level 0
// is a tight inner loop, the higher levels an odometer.
func stridedCopy(dst []byte, do int64, ds *strideShape, src []byte, so int64, ss *strideShape) {
	n := int64(ss.runLen)
	if ss.nlev == 0 {
		copy(dst[do:do+n], src[so:so+n])
		return
	}
	c0, dstr, sstr := ss.cnt[0], int64(ds.str[0]), int64(ss.str[0])
	var idx [visMaxLevels]int
	for {
		d, s := do, so
		switch n {
		case 8:
			for i := 0; i < c0; i++ {
				*(*[8]byte)(dst[d : d+8]) = *(*[8]byte)(src[s : s+8])
				d, s = d+dstr, s+sstr
			}
		default:
			for i := 0; i < c0; i++ {
				copyRun(dst[d:d+n], src[s:s+n])
				d, s = d+dstr, s+sstr
			}
		}
		k := 1
		for ; k < ss.nlev; k++ {
			idx[k]++
			do += int64(ds.str[k])
			so += int64(ss.str[k])
			if idx[k] < ss.cnt[k] {
				break
			}
			do -= int64(ds.str[k]) * int64(ss.cnt[k])
			so -= int64(ss.str[k]) * int64(ss.cnt[k])
			idx[k] = 0
		}
		if k >= ss.nlev {
			return
		}
	}
}

// visCall is one VIS call as the caller described it.
type visCall struct {
	op     string
	put    bool
	mode   rmaMode
	rank   Rank
	flags  Flags
	local  visSide
	remote visSide
	// strided: the caller's description, normalised per side by vis
	strided  bool
	elemsz   int
	count    []int
	lstrides []int
	rstrides []int
	loff     int
	raddr    Addr
	dstEP    uint16 // the target endpoint's index (set by vis)
}

func (v *visCall) localName() string {
	if v.put {
		return "src"
	}
	return "dst"
}

func (v *visCall) remoteName() string {
	if v.put {
		return "dst"
	}
	return "src"
}

// vis validates a call, picks the path and runs it.
func (tm *TM) vis(v *visCall) (Event, error) {
	c := tm.c
	if err := c.checkRestricted(v.op); err != nil {
		return EventInvalid, c.report(err)
	}
	if bad := v.flags &^ visAllowed; bad != 0 {
		return EventInvalid, c.report(badArg(v.op, "flags %v are not valid for VIS", bad))
	}
	if v.flags&FlagEnableLeafLC != 0 && (!v.put || v.mode == modeBlocking) {
		return EventInvalid, c.report(badArg(v.op, "GEX_FLAG_ENABLE_LEAF_LC is only valid for VIS Put NB and NBI"))
	}
	if v.strided {
		// EX VIS, "Degenerate cases": "If elemsz == 0: the operation is a
		// no-op and all other arguments are ignored"; "If any entry in
		// count[0..stridelevels-1] == 0: the operation is a no-op and tm,
		// rank, srcaddr, dstaddr are ignored ({src,dst}strides must still
		// reference valid arrays)".
		if v.elemsz == 0 {
			return EventInvalid, nil
		}
		if v.elemsz < 0 {
			return EventInvalid, c.report(badArg(v.op, "elemsz %d is negative", v.elemsz))
		}
		if len(v.lstrides) < len(v.count) || len(v.rstrides) < len(v.count) {
			return EventInvalid, c.report(badArg(v.op, "stride arrays (src %d, dst %d entries) must have stridelevels = len(count) = %d entries",
				v.srcStrides(), v.dstStrides(), len(v.count)))
		}
		for k, n := range v.count {
			if n < 0 {
				return EventInvalid, c.report(badArg(v.op, "count[%d] = %d is negative", k, n))
			}
		}
		if slices.Contains(v.count, 0) {
			return EventInvalid, nil
		}
	}
	if err := tm.checkRank(v.op, v.rank); err != nil {
		return EventInvalid, err
	}
	j := tm.jobrank(v.rank)
	if v.flags&FlagPeerNeverSelf != 0 && j == c.rank || v.flags&FlagPeerNeverNbrhd != 0 && c.topo.Nbrhd[j] == c.topo.Nbrhd[c.rank] {
		return EventInvalid, c.report(badArg(v.op, "rank %d contradicts the asserted %v", v.rank, v.flags&(FlagPeerNeverSelf|FlagPeerNeverNbrhd)))
	}
	seg, dstEP, err := tm.targetSeg(v.op, v.rank, j, EPCapabilityVIS)
	if err != nil {
		return EventInvalid, err
	}
	v.dstEP = dstEP
	if seg.Size == 0 {
		return EventInvalid, c.report(badArg(v.op, "rank %d (endpoint %d) has no bound segment known here (publish it with PublishBoundSegment)", v.rank, v.dstEP))
	}
	r, l := &v.remote, &v.local
	r.remote = true
	if v.flags&FlagPeerSegOffset != 0 {
		r.adj = seg.Owner
	}
	if v.strided {
		if err := v.shape(); err != nil {
			return EventInvalid, c.report(err)
		}
	}
	if err := v.checkSides(seg.Owner, seg.Size); err != nil {
		return EventInvalid, c.report(c.withOwnSegHint(err, j, v.remoteBase()))
	}
	if v.flags&FlagSelfSegOffset != 0 {
		if err := c.checkLocalSide(v.op, l); err != nil {
			return EventInvalid, c.report(err)
		}
	}
	if l.total == 0 {
		return EventInvalid, nil // nothing moves: a no-op
	}
	dst := r
	if !v.put {
		dst = l
	}
	if err := checkDisjoint(v.op, dst); err != nil {
		return EventInvalid, c.report(err)
	}
	var pc *visPC
	if v.put {
		if pc = c.vis.armed(); pc != nil && v.flags&FlagImmediate != 0 {
			return EventInvalid, c.report(badArg(v.op, "GEX_FLAG_IMMEDIATE is not permitted while a peer completion handler is armed (EX VIS, \"VIS Put Peer Completion\")"))
		}
	}
	if seg.Local != nil {
		// Path (a): copy loops through the mapping.
		r.owner, r.mapped = seg.Owner, seg.Local
		if err := checkCrossOverlap(v.op, l, r); err != nil {
			return EventInvalid, c.report(err)
		}
		if !visCopySame(v.put, l, r) {
			lc, rc := l.cursor(), r.cursor()
			if v.put {
				visCopy(&rc, &lc)
			} else {
				visCopy(&lc, &rc)
			}
		}
		if pc != nil {
			c.vis.disarm(pc)
			return EventInvalid, c.report(c.sendPC(v.op, j, v.dstEP, pc))
		}
		return EventInvalid, nil
	}
	if pc != nil {
		c.vis.disarm(pc)
	}
	if v.put {
		ev, err := c.visPutAM(v, j, pc)
		return ev, c.report(err)
	}
	ev, err := c.visGetAM(v, j)
	return ev, c.report(err)
}

func (v *visCall) srcStrides() int {
	if v.put {
		return len(v.lstrides)
	}
	return len(v.rstrides)
}

func (v *visCall) dstStrides() int {
	if v.put {
		return len(v.rstrides)
	}
	return len(v.lstrides)
}

// shape normalises both sides of a strided call and computes their extents.
func (v *visCall) shape() error {
	total := uint64(v.elemsz)
	for k, n := range v.count {
		if total > math.MaxInt64/2/uint64(n) {
			return badArg(v.op, "elemsz*count[0..%d] overflows", k)
		}
		total *= uint64(n)
	}
	for _, s := range [2]*visSide{&v.local, &v.remote} {
		s.kind = visStrided
		s.total = int(total)
		strides := v.lstrides
		if s.remote {
			strides = v.rstrides
		}
		st := &s.st
		*st = strideShape{runLen: v.elemsz}
		for k, n := range v.count {
			if n == 1 {
				continue
			}
			if st.nlev == 0 && strides[k] == st.runLen {
				st.runLen *= n // contiguous: fold into the run
				continue
			}
			if st.nlev == visMaxLevels {
				return badArg(v.op, "more than %d stride levels with a count above 1", visMaxLevels)
			}
			st.cnt[st.nlev], st.str[st.nlev] = n, strides[k]
			st.nlev++
		}
	}
	v.local.base = int64(v.loff)
	v.remote.base = int64(v.raddr)
	return nil
}

// extent returns the lowest and one past the highest offset, relative to the
// base element, that a strided side touches.
func (st *strideShape) extent() (lo, hi int64, ok bool) {
	const lim = math.MaxInt64 / 4
	hi = int64(st.runLen)
	for k := 0; k < st.nlev; k++ {
		s, n := int64(st.str[k]), int64(st.cnt[k]-1)
		if s != 0 && (s > lim/n || -s > lim/n) {
			return 0, 0, false
		}
		d := s * n
		if d < 0 {
			lo += d
		} else {
			hi += d
		}
		if lo < -lim || hi > lim {
			return 0, 0, false
		}
	}
	return lo, hi, true
}

// checkSides validates both sides: remote runs inside the target's segment
// [owner, owner+size), local runs inside their buffers, equal totals.
func (v *visCall) checkSides(owner, size uint64) error {
	l, r := &v.local, &v.remote
	ln, rn := v.localName(), v.remoteName()
	adj := r.adj
	outside := func(a, n uint64) bool { return a < owner || a-owner > size || n > size-(a-owner) }
	inSeg := func(what string, i int, a uint64, n uint64) error {
		if outside(a, n) {
			if i >= 0 {
				what += "[" + itoa(i) + "]"
			}
			return badArg(v.op, "%s [%#x, +%d) is outside rank %d's segment [%#x, +%d)", what, a, n, v.rank, owner, size)
		}
		return nil
	}
	if r.kind == visVector && l.kind == visVector && len(r.vecs) == len(l.bufs) {
		return v.checkVectors(owner, size) // the common shape: both lists in one pass
	}
	switch r.kind {
	case visStrided:
		lo, hi, ok := r.st.extent()
		if !ok {
			return badArg(v.op, "%saddr's strided extent overflows", rn)
		}
		a := uint64(r.base) + r.adj
		if outside(a+uint64(lo), uint64(hi-lo)) { // the name is built only on failure: no allocation
			return inSeg(rn+"addr's strided extent", -1, a+uint64(lo), uint64(hi-lo))
		}
		lo, hi, ok = l.st.extent()
		if !ok || int64(v.loff)+lo < 0 || int64(v.loff)+hi > int64(len(l.buf)) {
			return badArg(v.op, "%s's strided extent [%d, %d) relative to %soff %d is outside the %d-byte %s buffer", ln, lo, hi, ln, v.loff, len(l.buf), ln)
		}
		return nil
	case visVector:
		// One pass: lengths, totals, bounds, order and extent.
		total := 0
		ext, prevEnd, asc := span{lo: math.MaxUint64}, uint64(0), true
		for i, m := range r.vecs {
			if m.Len <= 0 {
				if m.Len < 0 {
					return badArg(v.op, "%slist[%d].Len %d is negative or the total overflows", rn, i, m.Len)
				}
				continue
			}
			a := uint64(m.Addr) + adj
			if m.Len > math.MaxInt/2-total {
				return badArg(v.op, "%slist[%d].Len %d is negative or the total overflows", rn, i, m.Len)
			}
			if outside(a, uint64(m.Len)) {
				return inSeg(rn+"list", i, a, uint64(m.Len))
			}
			total += m.Len
			if a < prevEnd {
				asc = false
			}
			prevEnd = a + uint64(m.Len)
			ext.lo, ext.hi = min(ext.lo, a), max(ext.hi, prevEnd)
		}
		r.total, r.ext, r.asc = total, ext, asc
	default:
		if r.ilen < 0 || r.ilen > 0 && len(r.addrs) > math.MaxInt/2/r.ilen {
			return badArg(v.op, "%slen %d is negative or %scount*%slen overflows", rn, r.ilen, rn, rn)
		}
		ext, prevEnd, asc := span{lo: math.MaxUint64}, uint64(0), true
		if n := uint64(r.ilen); n > 0 {
			for i, a := range r.addrs {
				a := uint64(a) + adj
				if outside(a, n) {
					return inSeg(rn+"list", i, a, n)
				}
				if a < prevEnd {
					asc = false
				}
				prevEnd = a + n
				ext.lo, ext.hi = min(ext.lo, a), max(ext.hi, prevEnd)
			}
		}
		r.total, r.ext, r.asc = r.ilen*len(r.addrs), ext, asc
	}
	ext, prevEnd, asc := span{lo: math.MaxUint64}, uint64(0), true
	switch l.kind {
	case visVector:
		total, maxLen := 0, 0
		var vecs []Memvec // the remote entries, when the lists may pair up one to one
		if r.kind == visVector && len(r.vecs) == len(l.bufs) {
			vecs = r.vecs
		}
		paired := vecs != nil
		for i, b := range l.bufs {
			if paired && vecs[i].Len != len(b) {
				paired = false
			}
			if len(b) > 0 {
				p := uint64(addrOf(b))
				if p < prevEnd {
					asc = false
				}
				prevEnd = p + uint64(len(b))
				ext.lo, ext.hi = min(ext.lo, p), max(ext.hi, prevEnd)
				total += len(b)
				maxLen = max(maxLen, len(b))
			}
		}
		l.total, l.ext, l.asc = total, ext, asc
		l.paired, l.maxLen = paired && maxLen <= copyChunk, maxLen
	default:
		if l.ilen < 0 {
			return badArg(v.op, "%slen %d is negative", ln, l.ilen)
		}
		n := uint64(l.ilen)
		for i, b := range l.bufs {
			if len(b) < l.ilen {
				return badArg(v.op, "%slist[%d] has %d bytes, fewer than %slen %d", ln, i, len(b), ln, l.ilen)
			}
			if n > 0 {
				p := uint64(addrOf(b))
				if p < prevEnd {
					asc = false
				}
				prevEnd = p + n
				ext.lo, ext.hi = min(ext.lo, p), max(ext.hi, prevEnd)
			}
		}
		l.total, l.ext, l.asc = l.ilen*len(l.bufs), ext, asc
	}
	if l.total != r.total {
		return badArg(v.op, "the source and destination lists describe different totals (%s %d bytes, %s %d bytes)", ln, l.total, rn, r.total)
	}
	return nil
}

// checkVectors is checkSides for two vector lists of the same length, in
// one pass over both (the same checks, in the same order per entry).
func (v *visCall) checkVectors(owner, size uint64) error {
	l, r := &v.local, &v.remote
	vecs, bufs, adj := r.vecs, l.bufs[:len(r.vecs)], r.adj
	rt, lt, maxLen := 0, 0, 0
	rext, lext := span{lo: math.MaxUint64}, span{lo: math.MaxUint64}
	var rprev, lprev uint64
	rasc, lasc, paired := true, true, true
	for i, m := range vecs {
		b := bufs[i]
		if m.Len != len(b) {
			paired = false
		}
		if m.Len > 0 {
			a := uint64(m.Addr) + adj
			if m.Len > math.MaxInt/2-rt {
				return badArg(v.op, "%slist[%d].Len %d is negative or the total overflows", v.remoteName(), i, m.Len)
			}
			if a < owner || a-owner > size || uint64(m.Len) > size-(a-owner) {
				return badArg(v.op, "%slist[%d] [%#x, +%d) is outside rank %d's segment [%#x, +%d)", v.remoteName(), i, a, m.Len, v.rank, owner, size)
			}
			rt += m.Len
			if a < rprev {
				rasc = false
			}
			rprev = a + uint64(m.Len)
			if a < rext.lo { // predictable branches: ascending lists take this one once...
				rext.lo = a
			}
			if rprev > rext.hi { // ...or always this one
				rext.hi = rprev
			}
		} else if m.Len < 0 {
			return badArg(v.op, "%slist[%d].Len %d is negative or the total overflows", v.remoteName(), i, m.Len)
		}
		if len(b) > 0 {
			p := uint64(addrOf(b))
			if p < lprev {
				lasc = false
			}
			lprev = p + uint64(len(b))
			if p < lext.lo {
				lext.lo = p
			}
			if lprev > lext.hi {
				lext.hi = lprev
			}
			lt += len(b)
			maxLen = max(maxLen, len(b))
		}
	}
	r.total, r.ext, r.asc = rt, rext, rasc
	l.total, l.ext, l.asc = lt, lext, lasc
	l.paired, l.maxLen = paired && maxLen <= copyChunk, maxLen
	if lt != rt {
		return badArg(v.op, "the source and destination lists describe different totals (%s %d bytes, %s %d bytes)", v.localName(), lt, v.remoteName(), rt)
	}
	return nil
}

// checkLocalSide applies FlagSelfSegOffset to every local region.
func (c *Client) checkLocalSide(op string, l *visSide) error {
	if l.kind == visStrided {
		return c.checkLocalInSegment(op, l.buf)
	}
	for _, b := range l.bufs {
		if err := c.checkLocalInSegment(op, b); err != nil {
			return err
		}
	}
	return nil
}

// span is a byte range [lo, hi) in one address space; dst marks a
// destination range.
type span struct {
	lo, hi uint64
	dst    bool
}

// runSpan returns the range of a run of side s in the address space where s
// is compared: the owner's for remote runs on path (b), this process's
// otherwise.
func (s *visSide) runSpan(a uint64, n int, mappedHere bool) span {
	switch {
	case s.remote && !mappedHere:
		return span{a, a + uint64(n), false}
	case s.remote:
		b := s.bytes(a, n)
		p := uint64(addrOf(b))
		return span{p, p + uint64(n), false}
	case s.kind == visStrided:
		p := uint64(addrOf(s.buf)) + a
		return span{p, p + uint64(n), false}
	}
	p := uint64(addrOf(s.bufs[a]))
	return span{p, p + uint64(n), false}
}

// checkDisjoint rejects a destination whose runs overlap each other (EX VIS:
// "if any destination location overlaps ... another destination location,
// then behavior is undefined"; gexgo diagnoses it). Runs in ascending order
// are checked in one pass; other orders are sorted (and allocate).
func checkDisjoint(op string, d *visSide) error {
	what := "dst"
	if !d.remote {
		what = "dst (local)"
	}
	if d.kind == visStrided && stridedDisjoint(&d.st) || d.kind != visStrided && d.asc {
		return nil // strided: provably disjoint; vector/indexed: ascending (checkSides)
	}
	cur := d.cursor()
	var prev uint64
	first := true
	for {
		a, n, ok := cur.nextRun()
		if !ok {
			return nil
		}
		sp := d.runSpan(a, n, false)
		if !first && sp.lo < prev {
			break // not ascending: sort below
		}
		prev, first = sp.hi, false
	}
	const maxRuns = 1 << 22
	var spans []span
	cur = d.cursor()
	for {
		a, n, ok := cur.nextRun()
		if !ok {
			break
		}
		if len(spans) == maxRuns {
			return badArg(op, "%s has more than %d runs in a pattern not provably disjoint", what, maxRuns)
		}
		spans = append(spans, d.runSpan(a, n, false))
	}
	slices.SortFunc(spans, func(x, y span) int { return cmpU64(x.lo, y.lo) })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return badArg(op, "%s regions overlap (EX VIS: a destination location overlapping another destination location)", what)
		}
	}
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// stridedDisjoint reports whether a strided side's runs are provably
// disjoint: with levels sorted by |stride|, each stride is at least the
// extent of the levels below it.
func stridedDisjoint(st *strideShape) bool {
	var abs [visMaxLevels]int64
	var cnt [visMaxLevels]int64
	for k := 0; k < st.nlev; k++ {
		s := int64(st.str[k])
		if s < 0 {
			s = -s
		}
		abs[k], cnt[k] = s, int64(st.cnt[k])
	}
	// insertion sort: at most visMaxLevels entries
	for i := 1; i < st.nlev; i++ {
		for k := i; k > 0 && abs[k] < abs[k-1]; k-- {
			abs[k], abs[k-1] = abs[k-1], abs[k]
			cnt[k], cnt[k-1] = cnt[k-1], cnt[k]
		}
	}
	ext := int64(st.runLen)
	for k := 0; k < st.nlev; k++ {
		if abs[k] < ext {
			return false
		}
		ext = abs[k]*(cnt[k]-1) + ext // bounded: extent() checked overflow
	}
	return true
}

// checkCrossOverlap rejects, on path (a), a destination run that overlaps a
// source run (EX VIS: "if any destination location overlaps a source
// location ... behavior is undefined"). The common case — disjoint bounding
// ranges — costs one pass over each side.
func checkCrossOverlap(op string, l, r *visSide) error {
	lb, rb := bounds(l), bounds(r)
	if lb.hi <= rb.lo || rb.hi <= lb.lo {
		return nil
	}
	var spans []span
	for _, s := range [2]*visSide{l, r} {
		cur := s.cursor()
		for {
			a, n, ok := cur.nextRun()
			if !ok {
				break
			}
			sp := s.runSpan(a, n, true)
			sp.dst = s.remote
			spans = append(spans, sp)
		}
	}
	// which side is the destination is encoded by the caller's choice of put
	// or get; any overlap between the two sides involves a destination.
	slices.SortFunc(spans, func(x, y span) int { return cmpU64(x.lo, y.lo) })
	var hi [2]uint64 // highest end seen per side (0: local, 1: remote)
	for _, sp := range spans {
		side, other := 0, 1
		if sp.dst {
			side, other = 1, 0
		}
		if sp.lo < hi[other] {
			return badArg(op, "source and destination regions overlap (EX VIS: a destination location overlapping a source location)")
		}
		hi[side] = max(hi[side], sp.hi)
	}
	return nil
}

// bounds is the smallest range holding every run of s (in this process).
func bounds(s *visSide) span {
	switch {
	case s.kind == visStrided:
		lo, hi, _ := s.st.extent() // checked by checkSides
		p := uint64(s.base)
		if s.remote {
			p = uint64(addrOf(s.mapped)) + (uint64(s.base) + s.adj - s.owner)
		} else {
			p += uint64(addrOf(s.buf))
		}
		return span{p + uint64(lo), p + uint64(hi), false}
	case s.remote:
		return mappedSpan(s, s.ext) // computed by checkSides
	}
	return s.ext
}

// mappedSpan translates a remote owner-address range into this process's
// mapping of the segment.
func mappedSpan(s *visSide, b span) span {
	if b.hi == 0 {
		return b
	}
	base := uint64(addrOf(s.mapped)) - s.owner
	return span{b.lo + base, b.hi + base, false}
}

func boundsSlow(s *visSide) span {
	b := span{lo: math.MaxUint64}
	cur := s.cursor()
	for {
		a, n, ok := cur.nextRun()
		if !ok {
			return b
		}
		sp := s.runSpan(a, n, true)
		b.lo, b.hi = min(b.lo, sp.lo), max(b.hi, sp.hi)
	}
}

// ---- peer completion -------------------------------------------------------

// visPC is an armed peer-completion notification.
type visPC struct {
	g       uintptr
	handler AMIndex
	payload []byte
}

// visState is the client's VIS bookkeeping.
type visState struct {
	armedN atomic.Int32 // goroutines with a handler armed (fast path: 0)
	mu     sync.Mutex   // guards pc
	pc     map[uintptr]*visPC
	ops    opTable[visOp, *visOp]
	tok    Token     // token of a peer-completion handler (request handlers run one at a time)
	hdr    sync.Pool // *[]byte scratch for run headers
}

// armed returns the calling goroutine's armed notification, or nil.
func (s *visState) armed() *visPC {
	if s.armedN.Load() == 0 {
		return nil
	}
	g := gctx.ID()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pc[g]
}

// disarm removes pc (it was consumed by an initiated put).
func (s *visState) disarm(pc *visPC) {
	s.mu.Lock()
	if s.pc[pc.g] == pc {
		delete(s.pc, pc.g)
		s.armedN.Add(-1)
	}
	s.mu.Unlock()
}

// VISSetPeerCompletionHandler implements gex_VIS_SetPeerCompletionHandler:
// it arms a notification for the next VIS Put that the calling goroutine
// successfully initiates through any TM of this client and that moves at
// least one byte. When that put's data is in the target's segment, handler
// (a 0-argument Medium Reply handler registered at the target) runs at the
// target with payload. handler 0 disarms. payload is copied here (at most
// VISMaxPeerCompletion bytes); flags must be 0. Gets neither use nor consume
// the arming. The put may not pass FlagImmediate.
//
// Go has no threads: "the current thread" of the spec is the calling
// goroutine, as for NBI access regions (docs/vis.md).
func (c *Client) VISSetPeerCompletionHandler(handler AMIndex, payload []byte, flags Flags) error {
	const op = "VISSetPeerCompletionHandler"
	if err := checkZeroFlags(op, flags); err != nil {
		return err
	}
	if len(payload) > VISMaxPeerCompletion {
		return badArg(op, "nbytes %d exceeds GEX_VIS_MAX_PEERCOMPLETION (%d)", len(payload), VISMaxPeerCompletion)
	}
	s := &c.vis
	g := gctx.ID()
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.pc[g]
	if handler == 0 {
		if old != nil {
			delete(s.pc, g)
			s.armedN.Add(-1)
		}
		return nil
	}
	if s.pc == nil {
		s.pc = map[uintptr]*visPC{}
	}
	if old == nil {
		s.armedN.Add(1)
	}
	s.pc[g] = &visPC{g: g, handler: handler, payload: append([]byte(nil), payload...)}
	return nil
}

// ---- public API ------------------------------------------------------------

// VectorPutBlocking implements gex_VIS_VectorPutBlocking: the bytes of the
// local regions src, in order, are written to the remote regions dst of
// rank, in order (the lists may differ in count and lengths; the totals must
// match). It returns at remote completion.
func (tm *TM) VectorPutBlocking(rank Rank, dst []Memvec, src [][]byte, flags Flags) error {
	_, err := tm.vis(&visCall{op: "VectorPutBlocking", put: true, mode: modeBlocking, rank: rank, flags: flags,
		remote: visSide{kind: visVector, vecs: dst}, local: visSide{kind: visVector, bufs: src}})
	return err
}

// VectorPutNBI implements gex_VIS_VectorPutNBI (completion: NBITest/NBIWait
// with ECPut, or the open access region).
func (tm *TM) VectorPutNBI(rank Rank, dst []Memvec, src [][]byte, flags Flags) error {
	_, err := tm.vis(&visCall{op: "VectorPutNBI", put: true, mode: modeNBI, rank: rank, flags: flags,
		remote: visSide{kind: visVector, vecs: dst}, local: visSide{kind: visVector, bufs: src}})
	return err
}

// VectorPutNB implements gex_VIS_VectorPutNB.
func (tm *TM) VectorPutNB(rank Rank, dst []Memvec, src [][]byte, flags Flags) (Event, error) {
	return tm.vis(&visCall{op: "VectorPutNB", put: true, mode: modeNB, rank: rank, flags: flags,
		remote: visSide{kind: visVector, vecs: dst}, local: visSide{kind: visVector, bufs: src}})
}

// VectorGetBlocking implements gex_VIS_VectorGetBlocking: the bytes of rank's
// regions src, in order, are read into the local regions dst, in order.
func (tm *TM) VectorGetBlocking(dst [][]byte, rank Rank, src []Memvec, flags Flags) error {
	_, err := tm.vis(&visCall{op: "VectorGetBlocking", mode: modeBlocking, rank: rank, flags: flags,
		remote: visSide{kind: visVector, vecs: src}, local: visSide{kind: visVector, bufs: dst}})
	return err
}

// VectorGetNBI implements gex_VIS_VectorGetNBI. On path (b), dst (the list
// and its slices) is read until completion.
func (tm *TM) VectorGetNBI(dst [][]byte, rank Rank, src []Memvec, flags Flags) error {
	_, err := tm.vis(&visCall{op: "VectorGetNBI", mode: modeNBI, rank: rank, flags: flags,
		remote: visSide{kind: visVector, vecs: src}, local: visSide{kind: visVector, bufs: dst}})
	return err
}

// VectorGetNB implements gex_VIS_VectorGetNB. On path (b), dst (the list and
// its slices) is read until completion.
func (tm *TM) VectorGetNB(dst [][]byte, rank Rank, src []Memvec, flags Flags) (Event, error) {
	return tm.vis(&visCall{op: "VectorGetNB", mode: modeNB, rank: rank, flags: flags,
		remote: visSide{kind: visVector, vecs: src}, local: visSide{kind: visVector, bufs: dst}})
}

// IndexedPutBlocking implements gex_VIS_IndexedPutBlocking: the first srclen
// bytes of each src[i], in order, are written to the dstlen-byte regions at
// the addresses dst of rank, in order (len(dst)*dstlen ==
// len(src)*srclen).
func (tm *TM) IndexedPutBlocking(rank Rank, dst []Addr, dstlen int, src [][]byte, srclen int, flags Flags) error {
	_, err := tm.vis(&visCall{op: "IndexedPutBlocking", put: true, mode: modeBlocking, rank: rank, flags: flags,
		remote: visSide{kind: visIndexed, addrs: dst, ilen: dstlen}, local: visSide{kind: visIndexed, bufs: src, ilen: srclen}})
	return err
}

// IndexedPutNBI implements gex_VIS_IndexedPutNBI.
func (tm *TM) IndexedPutNBI(rank Rank, dst []Addr, dstlen int, src [][]byte, srclen int, flags Flags) error {
	_, err := tm.vis(&visCall{op: "IndexedPutNBI", put: true, mode: modeNBI, rank: rank, flags: flags,
		remote: visSide{kind: visIndexed, addrs: dst, ilen: dstlen}, local: visSide{kind: visIndexed, bufs: src, ilen: srclen}})
	return err
}

// IndexedPutNB implements gex_VIS_IndexedPutNB.
func (tm *TM) IndexedPutNB(rank Rank, dst []Addr, dstlen int, src [][]byte, srclen int, flags Flags) (Event, error) {
	return tm.vis(&visCall{op: "IndexedPutNB", put: true, mode: modeNB, rank: rank, flags: flags,
		remote: visSide{kind: visIndexed, addrs: dst, ilen: dstlen}, local: visSide{kind: visIndexed, bufs: src, ilen: srclen}})
}

// IndexedGetBlocking implements gex_VIS_IndexedGetBlocking: the srclen-byte
// regions at the addresses src of rank, in order, are read into the first
// dstlen bytes of each dst[i], in order.
func (tm *TM) IndexedGetBlocking(dst [][]byte, dstlen int, rank Rank, src []Addr, srclen int, flags Flags) error {
	_, err := tm.vis(&visCall{op: "IndexedGetBlocking", mode: modeBlocking, rank: rank, flags: flags,
		remote: visSide{kind: visIndexed, addrs: src, ilen: srclen}, local: visSide{kind: visIndexed, bufs: dst, ilen: dstlen}})
	return err
}

// IndexedGetNBI implements gex_VIS_IndexedGetNBI. On path (b), dst is read
// until completion.
func (tm *TM) IndexedGetNBI(dst [][]byte, dstlen int, rank Rank, src []Addr, srclen int, flags Flags) error {
	_, err := tm.vis(&visCall{op: "IndexedGetNBI", mode: modeNBI, rank: rank, flags: flags,
		remote: visSide{kind: visIndexed, addrs: src, ilen: srclen}, local: visSide{kind: visIndexed, bufs: dst, ilen: dstlen}})
	return err
}

// IndexedGetNB implements gex_VIS_IndexedGetNB. On path (b), dst is read
// until completion.
func (tm *TM) IndexedGetNB(dst [][]byte, dstlen int, rank Rank, src []Addr, srclen int, flags Flags) (Event, error) {
	return tm.vis(&visCall{op: "IndexedGetNB", mode: modeNB, rank: rank, flags: flags,
		remote: visSide{kind: visIndexed, addrs: src, ilen: srclen}, local: visSide{kind: visIndexed, bufs: dst, ilen: dstlen}})
}

// StridedPutBlocking implements gex_VIS_StridedPutBlocking with the EX
// metadata convention: elements of elemsz contiguous bytes, stridelevels =
// len(count) levels, level 0 varying fastest; the element with indices
// (i0, ..., iL-1) is at base + sum(ik*strides[k]) on each side. Strides may
// be negative or zero (zero only on the source: sources may overlap). The
// local base element starts at src[srcoff]; every byte the pattern touches
// must lie in src. Metadata is consumed before return.
func (tm *TM) StridedPutBlocking(rank Rank, dst Addr, dststrides []int, src []byte, srcoff int, srcstrides []int, elemsz int, count []int, flags Flags) error {
	_, err := tm.vis(&visCall{op: "StridedPutBlocking", put: true, mode: modeBlocking, rank: rank, flags: flags, strided: true,
		raddr: dst, rstrides: dststrides, local: visSide{buf: src}, loff: srcoff, lstrides: srcstrides, elemsz: elemsz, count: count})
	return err
}

// StridedPutNBI implements gex_VIS_StridedPutNBI.
func (tm *TM) StridedPutNBI(rank Rank, dst Addr, dststrides []int, src []byte, srcoff int, srcstrides []int, elemsz int, count []int, flags Flags) error {
	_, err := tm.vis(&visCall{op: "StridedPutNBI", put: true, mode: modeNBI, rank: rank, flags: flags, strided: true,
		raddr: dst, rstrides: dststrides, local: visSide{buf: src}, loff: srcoff, lstrides: srcstrides, elemsz: elemsz, count: count})
	return err
}

// StridedPutNB implements gex_VIS_StridedPutNB.
func (tm *TM) StridedPutNB(rank Rank, dst Addr, dststrides []int, src []byte, srcoff int, srcstrides []int, elemsz int, count []int, flags Flags) (Event, error) {
	return tm.vis(&visCall{op: "StridedPutNB", put: true, mode: modeNB, rank: rank, flags: flags, strided: true,
		raddr: dst, rstrides: dststrides, local: visSide{buf: src}, loff: srcoff, lstrides: srcstrides, elemsz: elemsz, count: count})
}

// StridedGetBlocking implements gex_VIS_StridedGetBlocking (as
// StridedPutBlocking, the local base element at dst[dstoff]).
func (tm *TM) StridedGetBlocking(dst []byte, dstoff int, dststrides []int, rank Rank, src Addr, srcstrides []int, elemsz int, count []int, flags Flags) error {
	_, err := tm.vis(&visCall{op: "StridedGetBlocking", mode: modeBlocking, rank: rank, flags: flags, strided: true,
		raddr: src, rstrides: srcstrides, local: visSide{buf: dst}, loff: dstoff, lstrides: dststrides, elemsz: elemsz, count: count})
	return err
}

// StridedGetNBI implements gex_VIS_StridedGetNBI.
func (tm *TM) StridedGetNBI(dst []byte, dstoff int, dststrides []int, rank Rank, src Addr, srcstrides []int, elemsz int, count []int, flags Flags) error {
	_, err := tm.vis(&visCall{op: "StridedGetNBI", mode: modeNBI, rank: rank, flags: flags, strided: true,
		raddr: src, rstrides: srcstrides, local: visSide{buf: dst}, loff: dstoff, lstrides: dststrides, elemsz: elemsz, count: count})
	return err
}

// StridedGetNB implements gex_VIS_StridedGetNB.
func (tm *TM) StridedGetNB(dst []byte, dstoff int, dststrides []int, rank Rank, src Addr, srcstrides []int, elemsz int, count []int, flags Flags) (Event, error) {
	return tm.vis(&visCall{op: "StridedGetNB", mode: modeNB, rank: rank, flags: flags, strided: true,
		raddr: src, rstrides: srcstrides, local: visSide{buf: dst}, loff: dstoff, lstrides: dststrides, elemsz: elemsz, count: count})
}
