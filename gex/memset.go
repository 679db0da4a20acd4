package gex

import "github.com/gexgo/gexgo/internal/conduit"

// Remote memset (GASNet-1 spec, "gasnet_memset", "gasnet_memset_nb",
// "gasnet_memset_nbi": "the same effect as if the DEST node had executed the
// POSIX call memset(DEST, VAL, NBYTES)"). GASNet-EX has no memset; these are
// the calls the GASNet-1 layer (package gasnet) is built on. The two RMA
// paths apply:
//
//   (a) the peer's segment is mapped here: the bytes are filled through the
//       mapping, complete when the call returns;
//   (b) otherwise: one Short request per chunk of at most memsetChunk bytes
//       names (address, length, value); the target checks the range against
//       its own segment, fills it, and acknowledges with the put
//       acknowledgement (hPutAck) carrying a status. No payload travels and no
//       buffer of the fill's size is ever allocated.
//
// Synchronisation is that of a put: the NB form's event and the NBI form's
// implicit set (ECPut, or the open access region) complete at remote
// completion.

// hMemsetReq is the memset request (Short); args: addr lo, addr hi, nbytes,
// value, op, gen.
const hMemsetReq AMIndex = 7

// memsetChunk bounds the bytes one memset request fills, so that one handler
// runs briefly (a few tens of microseconds).
const memsetChunk = 1 << 20

// memsetAllowed are the flags the memset calls accept.
const memsetAllowed = FlagImmediate | FlagPeerNeverSelf | FlagPeerNeverNbrhd | FlagPeerSegOffset |
	FlagPeerSegUnknown | FlagPeerSegSome | FlagPeerSegBound

// MemsetBlocking implements gasnet_memset: it returns once the nbytes at dest
// in rank's bound segment all hold val.
func (tm *TM) MemsetBlocking(rank Rank, dest Addr, val byte, nbytes uint64, flags Flags) error {
	return tm.memset(modeBlocking, rank, dest, val, nbytes, flags, nil)
}

// MemsetNBI implements gasnet_memset_nbi: synchronised as an NBI put
// (NBITest/NBIWait with ECPut, or the open access region).
func (tm *TM) MemsetNBI(rank Rank, dest Addr, val byte, nbytes uint64, flags Flags) error {
	return tm.memset(modeNBI, rank, dest, val, nbytes, flags, nil)
}

// MemsetNB implements gasnet_memset_nb: the event completes at remote
// completion, as an NB put's does.
func (tm *TM) MemsetNB(rank Rank, dest Addr, val byte, nbytes uint64, flags Flags) (ev Event, err error) {
	err = tm.memset(modeNB, rank, dest, val, nbytes, flags, &ev)
	return
}

// memsetOps names the memset calls by mode.
var memsetOps = [...]string{modeBlocking: "MemsetBlocking", modeNBI: "MemsetNBI", modeNB: "MemsetNB"}

// memset is the body of the memset calls; the NB form's event is stored in
// *evp. (Error-only, no name argument: the wrappers inline into package
// gasnet's, as putVal's do.)
func (tm *TM) memset(mode rmaMode, rank Rank, dest Addr, val byte, n uint64, flags Flags, evp *Event) error {
	ev, err := tm.memsetOp(memsetOps[mode], mode, rank, dest, val, n, flags)
	if evp != nil {
		*evp = ev
	}
	return err
}

func (tm *TM) memsetOp(op string, mode rmaMode, rank Rank, dest Addr, val byte, n uint64, flags Flags) (Event, error) {
	c := tm.c
	if err := c.checkRestricted(op); err != nil {
		return EventInvalid, c.report(err)
	}
	if err := tm.checkRank(op, rank); err != nil {
		return EventInvalid, err
	}
	if bad := flags &^ memsetAllowed; bad != 0 {
		return EventInvalid, c.report(badArg(op, "flags %v are not valid for memset", bad))
	}
	if n == 0 {
		return EventInvalid, nil
	}
	j := tm.jobrank(rank)
	if flags&FlagPeerNeverSelf != 0 && j == c.rank || flags&FlagPeerNeverNbrhd != 0 && c.topo.Nbrhd[j] == c.topo.Nbrhd[c.rank] {
		return EventInvalid, c.report(badArg(op, "rank %d contradicts the asserted %v", rank, flags&(FlagPeerNeverSelf|FlagPeerNeverNbrhd)))
	}
	seg, dstEP, err := tm.targetSeg(op, rank, j, EPCapabilityRMA)
	if err != nil {
		return EventInvalid, err
	}
	if flags&FlagPeerSegOffset != 0 {
		dest += Addr(seg.Owner)
	}
	if seg.Size == 0 {
		return EventInvalid, c.report(badArg(op, "rank %d (endpoint %d) has no bound segment known here", rank, dstEP))
	}
	if dest < Addr(seg.Owner) || uint64(dest-Addr(seg.Owner)) > seg.Size || n > seg.Size-uint64(dest-Addr(seg.Owner)) {
		return EventInvalid, c.report(badArg(op, "remote range [%#x, +%d) is outside rank %d's segment [%#x, +%d)", uintptr(dest), n, rank, seg.Owner, seg.Size))
	}
	if seg.Local != nil {
		off := uint64(dest - Addr(seg.Owner))
		fill(seg.Local[off:off+n], val)
		return EventInvalid, nil
	}
	nchunks := int((n + memsetChunk - 1) / memsetChunk)
	id, rop := c.startOp(j, nchunks, memsetChunk, nil, mode, ECPut)
	ev, gen := rop.ev, int32(rop.gen)
	for i := 0; i < nchunks; i++ {
		a := uint64(dest) + uint64(i)*memsetChunk
		k := min(uint64(memsetChunk), n-uint64(i)*memsetChunk)
		h := conduit.Header{Cat: conduit.Short, IsReq: true, Handler: uint8(hMemsetReq), NArgs: 6, EP: dstEP}
		h.Args[0], h.Args[1], h.Args[2] = int32(uint32(a)), int32(uint32(a>>32)), int32(k)
		h.Args[3], h.Args[4], h.Args[5] = int32(val), id, gen
		var sf conduit.SendFlags
		if i == 0 && flags&FlagImmediate != 0 {
			sf = conduit.Immediate
		}
		if err := c.cd.Send(j, h, nil, sf); err != nil {
			if i == 0 {
				return abandonOp(c, &c.ops, op, id, rop, mode, err)
			}
			ferr := resourceErr(op, "chunk %d of %d: %v", i, nchunks, err)
			for r := i; r < nchunks; r++ {
				c.chunkDone(id, rop, ferr)
			}
			break
		}
	}
	switch mode {
	case modeBlocking:
		return EventInvalid, c.report(ev.handle().Wait())
	case modeNB:
		return ev.handle(), nil
	}
	return EventInvalid, nil
}

// fill sets every byte of b to v: clear for zero, otherwise by doubling
// copies (memmove speed, no buffer beyond b itself).
func fill(b []byte, v byte) {
	if v == 0 {
		clear(b)
		return
	}
	if len(b) == 0 {
		return
	}
	b[0] = v
	for k := 1; k < len(b); k *= 2 {
		copy(b[k:], b[:k])
	}
}

// memsetHandlers is the target side of path (b): the range is checked
// against this rank's segment before anything is written, then filled, then
// acknowledged with a status (non-zero: refused).
func (c *Client) memsetHandlers() []AMEntry {
	return []AMEntry{{Index: hMemsetReq, Flags: FlagAMShort | FlagAMRequest, NArgs: 6, Name: "gex-memset", Fn: func(t *Token, _ []byte, a []AMArg) {
		h := conduit.Header{Cat: conduit.Short, Handler: uint8(hPutAck), NArgs: 3}
		h.Args[0], h.Args[1] = a[4], a[5]
		n := int64(a[2])
		if dst, ok := c.targetRange("memset", t, a[0], a[1], n); ok && n <= memsetChunk {
			fill(dst, byte(a[3]))
		} else {
			h.Args[2] = 1
		}
		c.replyInternal(t, h, nil)
	}}}
}
