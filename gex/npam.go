package gex

import (
	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/gctx"
)

// SrcDesc is a prepared negotiated-payload AM (gex_AM_SrcDesc_t, GASNet-EX
// "Negotiated-payload AM APIs"): Prepare returns it, the caller writes the
// payload into Addr(), and exactly one Commit consumes it. Between Prepare and
// Commit the preparing goroutine is in restricted context (no communication),
// and the SrcDesc belongs to that goroutine.
//
// With a nil client buffer the buffer is conduit memory (on the shared-memory
// conduits it is the shared-memory payload buffer itself, so Commit copies
// nothing: GASNET_NATIVE_NP_ALLOC_* behaviour).
type SrcDesc struct {
	c       *Client
	tok     *Token
	p       conduit.Prepared
	buf     []byte
	own     bool // buf is client memory: Commit sends it with a normal Send
	cat     conduit.Category
	isReq   bool
	dst     int
	dstEP   uint16 // destination endpoint index
	srcEP   uint16 // sending endpoint index
	nargs   int
	dest    Addr
	destSet bool
	lc      *Event
	flags   Flags
	g       uintptr
	live    bool
}

// Addr implements gex_AM_SrcDescAddr: the buffer to fill, of length Size().
func (sd *SrcDesc) Addr() []byte { return sd.buf }

// Size implements gex_AM_SrcDescSize.
func (sd *SrcDesc) Size() int { return len(sd.buf) }

// PrepareRequestMedium implements gex_AM_PrepareRequestMedium. clientBuf nil
// asks for a library buffer (then lc must be nil); otherwise clientBuf (of at
// least leastPayload bytes) is the source. The returned SrcDesc's Size is in
// [leastPayload, mostPayload]. With FlagImmediate it returns ErrNoOp when
// resources are short.
func (tm *TM) PrepareRequestMedium(rank Rank, clientBuf []byte, leastPayload, mostPayload int, lc *Event, flags Flags, nargs int) (*SrcDesc, error) {
	if err := tm.checkRank("PrepareRequestMedium", rank); err != nil {
		return nil, err
	}
	dstEP, srcEP, err := tm.amEPs("PrepareRequestMedium", rank)
	if err != nil {
		return nil, err
	}
	return tm.c.prepare("PrepareRequestMedium", nil, tm.jobrank(rank), dstEP, srcEP, conduit.Medium, true, clientBuf, leastPayload, mostPayload, 0, lc, flags, nargs)
}

// PrepareRequestLong implements gex_AM_PrepareRequestLong. dest may be 0 (chosen
// at Commit); if non-zero, Commit must pass the same value.
func (tm *TM) PrepareRequestLong(rank Rank, clientBuf []byte, leastPayload, mostPayload int, dest Addr, lc *Event, flags Flags, nargs int) (*SrcDesc, error) {
	if err := tm.checkRank("PrepareRequestLong", rank); err != nil {
		return nil, err
	}
	dstEP, srcEP, err := tm.amEPs("PrepareRequestLong", rank)
	if err != nil {
		return nil, err
	}
	return tm.c.prepare("PrepareRequestLong", nil, tm.jobrank(rank), dstEP, srcEP, conduit.Long, true, clientBuf, leastPayload, mostPayload, dest, lc, flags, nargs)
}

// PrepareReplyMedium implements gex_AM_PrepareReplyMedium (inside a Request
// handler, at most one Reply).
func (t *Token) PrepareReplyMedium(clientBuf []byte, leastPayload, mostPayload int, lc *Event, flags Flags, nargs int) (*SrcDesc, error) {
	if err := t.checkReply("PrepareReplyMedium"); err != nil {
		return nil, err
	}
	return t.c.prepare("PrepareReplyMedium", t, t.src, t.srcEP, uint16(t.ep.index), conduit.Medium, false, clientBuf, leastPayload, mostPayload, 0, lc, flags, nargs)
}

// PrepareReplyLong implements gex_AM_PrepareReplyLong.
func (t *Token) PrepareReplyLong(clientBuf []byte, leastPayload, mostPayload int, dest Addr, lc *Event, flags Flags, nargs int) (*SrcDesc, error) {
	if err := t.checkReply("PrepareReplyLong"); err != nil {
		return nil, err
	}
	return t.c.prepare("PrepareReplyLong", t, t.src, t.srcEP, uint16(t.ep.index), conduit.Long, false, clientBuf, leastPayload, mostPayload, dest, lc, flags, nargs)
}

func (c *Client) prepare(op string, tok *Token, dst int, dstEP, srcEP uint16, cat conduit.Category, isReq bool, clientBuf []byte, least, most int, dest Addr, lc *Event, flags Flags, nargs int) (*SrcDesc, error) {
	sd, err := c.prepare1(op, tok, dst, dstEP, srcEP, cat, isReq, clientBuf, least, most, dest, lc, flags, nargs)
	return sd, c.report(err)
}

func (c *Client) prepare1(op string, tok *Token, dst int, dstEP, srcEP uint16, cat conduit.Category, isReq bool, clientBuf []byte, least, most int, dest Addr, lc *Event, flags Flags, nargs int) (*SrcDesc, error) {
	if isReq {
		if err := c.checkRestricted(op); err != nil {
			return nil, err
		}
	}
	if nargs < 0 || nargs > MaxArgs {
		return nil, badArg(op, "numargs %d out of range [0, %d]", nargs, MaxArgs)
	}
	if least < 0 || most < least {
		return nil, badArg(op, "leastPayload %d and mostPayload %d must satisfy 0 <= least <= most", least, most)
	}
	if bad := flags &^ (amInjectAllowed | FlagPeerSegOffset | FlagAMPrepareLeastClient | FlagAMPrepareLeastAlloc); bad != 0 || (cat != conduit.Long && flags&FlagPeerSegOffset != 0) {
		return nil, badArg(op, "flags %v are not valid for %s", flags, op)
	}
	if lc == EventDefer || (lc == EventGroup && !isReq) {
		return nil, badArg(op, "lc_opt %s is not permitted here", lcName(lc))
	}
	lim := c.cd.Limits(dst)
	max := lim.MaxMedium
	if cat == conduit.Long && dstEP == 0 {
		max = lim.MaxLong // a Long to another endpoint travels in one buffer
	}
	sd := c.sdPool.Get().(*SrcDesc)
	*sd = SrcDesc{c: c, tok: tok, cat: cat, isReq: isReq, dst: dst, dstEP: dstEP, srcEP: srcEP, nargs: nargs, dest: dest, destSet: dest != 0, lc: lc, flags: flags}
	if clientBuf != nil {
		if least > max {
			c.sdPool.Put(sd)
			return nil, badArg(op, "leastPayload %d exceeds the max payload %d to rank %d", least, max, dst)
		}
		if len(clientBuf) < least {
			c.sdPool.Put(sd)
			return nil, badArg(op, "clientBuf has %d bytes, less than leastPayload %d", len(clientBuf), least)
		}
		sd.own = true
		sd.buf = clientBuf[:min(most, len(clientBuf), max)]
	} else {
		if lc != nil {
			c.sdPool.Put(sd)
			return nil, badArg(op, "lc_opt must be nil when clientBuf is nil")
		}
		if least > lim.MaxAlloc {
			c.sdPool.Put(sd)
			return nil, badArg(op, "leastPayload %d exceeds the max library-allocated payload %d to rank %d (MaxAlloc; see FlagAMPrepareLeastAlloc)", least, lim.MaxAlloc, dst)
		}
		var cflags conduit.SendFlags
		if flags&FlagImmediate != 0 {
			cflags = conduit.Immediate
		}
		p, err := c.cd.Prepare(dst, isReq, cat == conduit.Long, least, min(most, max), cflags)
		if err != nil {
			c.sdPool.Put(sd)
			if err == conduit.ErrWouldBlock {
				return nil, ErrNoOp
			}
			return nil, resourceErr(op, "%v", err)
		}
		sd.p = p
		sd.buf = p.Buf
	}
	sd.g = gctx.ID()
	sd.live = true
	c.prepareG.add(sd.g)
	return sd, nil
}

func lcName(lc *Event) string {
	switch lc {
	case EventNow:
		return "EventNow"
	case EventDefer:
		return "EventDefer"
	case EventGroup:
		return "EventGroup"
	}
	return "*Event"
}

// CommitRequestMedium implements gex_AM_CommitRequestMedium[M]: sends the first
// nbytes of Addr() to handler h.
func (sd *SrcDesc) CommitRequestMedium(h AMIndex, nbytes int, args ...AMArg) error {
	return sd.commit("CommitRequestMedium", conduit.Medium, true, h, nbytes, 0, args)
}

// CommitReplyMedium implements gex_AM_CommitReplyMedium[M].
func (sd *SrcDesc) CommitReplyMedium(h AMIndex, nbytes int, args ...AMArg) error {
	return sd.commit("CommitReplyMedium", conduit.Medium, false, h, nbytes, 0, args)
}

// CommitRequestLong implements gex_AM_CommitRequestLong[M]. dest must equal the
// Prepare's dest if that was non-zero.
func (sd *SrcDesc) CommitRequestLong(h AMIndex, nbytes int, dest Addr, args ...AMArg) error {
	return sd.commit("CommitRequestLong", conduit.Long, true, h, nbytes, dest, args)
}

// CommitReplyLong implements gex_AM_CommitReplyLong[M].
func (sd *SrcDesc) CommitReplyLong(h AMIndex, nbytes int, dest Addr, args ...AMArg) error {
	return sd.commit("CommitReplyLong", conduit.Long, false, h, nbytes, dest, args)
}

func (sd *SrcDesc) commit(op string, cat conduit.Category, isReq bool, h AMIndex, nbytes int, dest Addr, args []AMArg) error {
	err := sd.commit1(op, cat, isReq, h, nbytes, dest, args)
	if err != nil && sd != nil && sd.c != nil {
		sd.c.report(err)
	}
	return err
}

func (sd *SrcDesc) commit1(op string, cat conduit.Category, isReq bool, h AMIndex, nbytes int, dest Addr, args []AMArg) error {
	if sd == nil || !sd.live || sd.g != gctx.ID() {
		return badArg(op, "the SrcDesc is not live on this goroutine (each Prepare is consumed by exactly one Commit on the same goroutine)")
	}
	if sd.cat != cat || sd.isReq != isReq {
		return badArg(op, "the SrcDesc was prepared for a %v %s", sd.cat, reqRepWord(sd.isReq))
	}
	if sd.nargs != len(args) {
		return badArg(op, "%d args given but %d were declared at Prepare", len(args), sd.nargs)
	}
	if nbytes < 0 || nbytes > len(sd.buf) {
		return badArg(op, "nbytes %d out of range [0, %d] (SrcDesc Size)", nbytes, len(sd.buf))
	}
	if cat == conduit.Long && sd.destSet && dest != sd.dest {
		return badArg(op, "dest %#x differs from the %#x given to Prepare", uintptr(dest), uintptr(sd.dest))
	}
	c := sd.c
	s := amSpec{op: op, cat: cat, isReq: isReq, dst: sd.dst, dstEP: sd.dstEP, srcEP: sd.srcEP, h: h, payload: sd.buf[:nbytes], dest: dest, lc: sd.lc, flags: sd.flags &^ (FlagAMPrepareLeastClient | FlagAMPrepareLeastAlloc | FlagImmediate)}
	var hdr conduit.Header
	_, err := c.buildHeader(&s, len(args), &hdr)
	if err != nil {
		return err // the SrcDesc stays live: the caller may Commit again with corrected arguments
	}
	copy(hdr.Args[:], args)
	sd.live = false
	c.prepareG.remove(sd.g)
	if sd.own {
		err = c.cd.Send(sd.dst, hdr, s.payload, 0)
		if err == nil && sd.lc != nil && !isLCSentinel(sd.lc) {
			*sd.lc = EventInvalid
		}
	} else {
		err = c.cd.Commit(&sd.p, hdr, nbytes)
	}
	if err == nil && sd.tok != nil {
		sd.tok.replied = true
	}
	*sd = SrcDesc{}
	c.sdPool.Put(sd)
	if err != nil {
		return resourceErr(op, "%v", err)
	}
	return nil
}
