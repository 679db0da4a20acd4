package gex

import (
	"unsafe"

	"github.com/gexgo/gexgo/internal/conduit"
)

// Remote atomics, GASNet-EX "Remote Atomic Operations" (gasnet_ratomic.h).
//
// Implementation (see atomic_unsafe.go): a target location in a segment
// mapped here (self and neighbourhood peers) is operated on directly with CPU
// atomics; any other target is operated on by the target's AM handler, which
// runs the same CPU atomics on its own memory and replies with the fetched
// value (one Short request, one Medium reply). Because both paths end in CPU
// atomics on the location itself, a domain whose team spans both kinds of
// peer stays coherent without choosing one implementation for the whole
// domain; the FAVOR_* hints therefore change nothing.

// ADType is the set of Go types an atomic domain can operate on, one per
// built-in data type.
type ADType interface {
	int32 | uint32 | int64 | uint64 | float32 | float64
}

// dtOf returns the built-in data type of T.
func dtOf[T ADType]() DT {
	var z T
	switch any(z).(type) {
	case int32:
		return DTI32
	case uint32:
		return DTU32
	case int64:
		return DTI64
	case uint64:
		return DTU64
	case float32:
		return DTFLT
	}
	return DTDBL
}

// AD is an atomic domain (gex_AD_t) over data type T.
type AD[T ADType] struct {
	c       *Client
	tm      *TM
	dt      DT
	ops     OP
	flags   Flags
	integer bool
	fast    fastMap // the fast path's segment table (rma_fast_unsafe.go)
	cdata   cdata
	dead    bool
}

const adFavor = FlagADFavorMyRank | FlagADFavorMyNbrhd | FlagADFavorRemote

// ADCreate implements gex_AD_Create: a domain for the operations ops (an OR
// of OP* constants) on data type dt, whose Go type T must match (DTI32 ↔
// int32, DTU32 ↔ uint32, DTI64 ↔ int64, DTU64 ↔ uint64, DTFLT ↔ float32,
// DTDBL ↔ float64). Collective over tm; it does not communicate. flags may
// hold one of the FlagADFavor* hints.
func ADCreate[T ADType](tm *TM, dt DT, ops OP, flags Flags) (*AD[T], error) {
	const op = "ADCreate"
	if tm == nil {
		return nil, badArg(op, "tm is nil")
	}
	c := tm.c
	if err := c.checkRestricted(op); err != nil {
		return nil, err
	}
	want := dtOf[T]()
	switch {
	case dt != want:
		return nil, c.report(badArg(op, "dt %v does not match the Go type parameter (%v)", dt, want))
	case ops == 0:
		return nil, c.report(badArg(op, "ops is empty"))
	case ops&^opAtomic != 0:
		return nil, c.report(badArg(op, "ops %v are not valid for atomics (USER and USER_NC are for reductions)", ops&^opAtomic))
	case !dt.isInteger() && ops&(opBitwise|opFBitwise) != 0:
		return nil, c.report(badArg(op, "bit-wise ops %v are not valid for the floating-point type %v", ops&(opBitwise|opFBitwise), dt))
	case flags&^adFavor != 0:
		return nil, c.report(badArg(op, "flags %v not accepted (only GEX_FLAG_AD_FAVOR_*)", flags&^adFavor))
	case flags&(flags-1) != 0:
		return nil, c.report(badArg(op, "flags %v: the GEX_FLAG_AD_FAVOR_* hints are mutually exclusive", flags))
	}
	switch {
	case tm.pair:
		return nil, c.report(badArg(op, "tm is a TM-pair (TMPair), which is not valid for atomic domains"))
	case tm.destroyed.Load():
		return nil, c.report(badArg(op, "tm was destroyed"))
	}
	if err := tm.ep.needCap(op, EPCapabilityAD); err != nil {
		return nil, err
	}
	tm.ads.Add(1)
	ad := &AD[T]{c: c, tm: tm, dt: dt, ops: ops, flags: flags, integer: dt.isInteger()}
	ad.fast.fill(c, tm.direct, tm.size)
	return ad, nil
}

// Destroy implements gex_AD_Destroy. Every operation on the domain must have
// completed everywhere before any rank calls it (the spec's precondition).
func (ad *AD[T]) Destroy() error {
	if ad.dead {
		return badArg("AD.Destroy", "the domain was already destroyed")
	}
	ad.dead = true
	ad.fast.clear() // every later call takes do, which reports it
	ad.tm.ads.Add(-1)
	return nil
}

// QueryFlags implements gex_AD_QueryFlags.
func (ad *AD[T]) QueryFlags() Flags { return ad.flags }

// QueryTM implements gex_AD_QueryTM.
func (ad *AD[T]) QueryTM() *TM { return ad.tm }

// QueryDT implements gex_AD_QueryDT.
func (ad *AD[T]) QueryDT() DT { return ad.dt }

// QueryOps implements gex_AD_QueryOps.
func (ad *AD[T]) QueryOps() OP { return ad.ops }

// SetCData implements gex_AD_SetCData.
func (ad *AD[T]) SetCData(v any) { ad.cdata.set(v) }

// QueryCData implements gex_AD_QueryCData.
func (ad *AD[T]) QueryCData() any { return ad.cdata.get() }

const adOpAllowed = FlagImmediate | FlagADMyRank | FlagADMyNbrhd | FlagADAcq | FlagADRel | FlagRankIsJobrank | FlagPeerSegOffset

// OpNB implements gex_AD_OpNB_[DATATYPE]: performs op atomically on the T at
// (rank, addr) with operands op1 (and op2 for CAS/FCAS). For fetching ops
// (FADD…FXOR, GET, SWAP, FCAS) the previous value is written to *result,
// which must be non-nil, by the time the event completes. A target whose
// segment is mapped here completes during the call (EventInvalid).
func (ad *AD[T]) OpNB(result *T, rank Rank, addr Addr, op OP, op1, op2 T, flags Flags) (Event, error) {
	if ad.addOp(result, addr, op, flags) {
		if p := ad.fast.mapped(rank, addr, int(unsafe.Sizeof(op1))); p != nil {
			if c := ad.c; c.restrictedA() == 0 {
				if c.restrictedB() == 0 {
					if old := ad.faddAt(p, op1); op == OPFAdd {
						*result = old
					}
					return Event{}, nil
				}
			}
		}
	} else if ad.otherOp(result, addr, op, flags) {
		if p := ad.fast.mapped(rank, addr, int(unsafe.Sizeof(op1))); p != nil {
			if !ad.c.mayBeRestricted() {
				if old := atomicApplyAt(p, op, op1, op2, ad.integer); op&opResult != 0 {
					*result = old
				}
				return Event{}, nil
			}
		}
	}
	return ad.do("OpNB", modeNB, result, rank, addr, op, op1, op2, flags)
}

// OpNBI implements gex_AD_OpNBI_[DATATYPE]: as OpNB with implicit-event
// completion, checked with NBITest/NBIWait: ECPut for OPSet, ECGet for OPGet,
// ECRMW for everything else.
func (ad *AD[T]) OpNBI(result *T, rank Rank, addr Addr, op OP, op1, op2 T, flags Flags) error {
	if ad.addOp(result, addr, op, flags) {
		if p := ad.fast.mapped(rank, addr, int(unsafe.Sizeof(op1))); p != nil {
			if c := ad.c; c.restrictedA() == 0 {
				if c.restrictedB() == 0 {
					if old := ad.faddAt(p, op1); op == OPFAdd {
						*result = old
					}
					return nil
				}
			}
		}
	} else if ad.otherOp(result, addr, op, flags) {
		if p := ad.fast.mapped(rank, addr, int(unsafe.Sizeof(op1))); p != nil {
			if !ad.c.mayBeRestricted() {
				if old := atomicApplyAt(p, op, op1, op2, ad.integer); op&opResult != 0 {
					*result = old
				}
				return nil
			}
		}
	}
	_, err := ad.do("OpNBI", modeNBI, result, rank, addr, op, op1, op2, flags)
	return err
}

// The mapped fast paths of OpNB and OpNBI (rma_fast_unsafe.go) are written
// out in each (a shared generic body would cost a second call: the
// compiler does not inline a generic method of this size). Both take the
// common case - no flags, an opcode of the domain's set, an aligned target
// (checked on the owner's address, as do does; segments are page-aligned
// in every process, so the mapping is aligned too) in a segment mapped
// here (a direct team, a live domain: Destroy withdraws the table; the
// range inside the segment), the caller not in restricted context - and
// leave every other call, errors included, to do. The commonest opcodes,
// integer FADD and ADD, are one locked add, with nothing stored and no call
// before it (a locked instruction waits for every earlier store to drain
// and every earlier instruction to retire); every other opcode calls the
// CPU engine (atomicApplyAt).

func (ad *AD[T]) do(name string, mode rmaMode, result *T, rank Rank, addr Addr, op OP, op1, op2 T, flags Flags) (Event, error) {
	c, tm := ad.c, ad.tm
	if !ad.dead {
		ad.fast.fill(c, tm.direct, tm.size) // later calls may take the fast path
	}
	if c.slowHook != nil {
		c.slowHook(name)
	}
	if c.mayBeRestricted() {
		if err := c.checkRestricted(name); err != nil {
			return EventInvalid, err
		}
	}
	// Validate (GASNet-EX "Semantics of gex_AD_Op*()").
	var j int
	switch {
	case ad.dead:
		return EventInvalid, c.report(badArg(name, "the atomic domain was destroyed"))
	case op == 0 || op&(op-1) != 0:
		return EventInvalid, c.report(badArg(name, "opcode %v must be a single GEX_OP_* value", op))
	case op&ad.ops == 0:
		return EventInvalid, c.report(badArg(name, "opcode %v is not in the domain's set %v", op, ad.ops))
	case flags&^adOpAllowed != 0:
		return EventInvalid, c.report(badArg(name, "flags %v are not valid for atomics", flags&^adOpAllowed))
	case flags&FlagADMyRank != 0 && flags&FlagADMyNbrhd != 0:
		return EventInvalid, c.report(badArg(name, "GEX_FLAG_AD_MY_RANK and GEX_FLAG_AD_MY_NBRHD are mutually exclusive"))
	case op&opResult != 0 && result == nil:
		return EventInvalid, c.report(badArg(name, "result is nil for the fetching opcode %v", op))
	}
	if flags&FlagRankIsJobrank != 0 {
		r, err := tm.TranslateJobrankToRank(rank)
		if err != nil {
			return EventInvalid, err
		}
		if r == RankInvalid {
			return EventInvalid, c.report(badArg(name, "jobrank %d is not a member of the domain's team", rank))
		}
		rank = r
	}
	if err := tm.checkRank(name, rank); err != nil {
		return EventInvalid, err
	}
	j = tm.jobrank(rank)
	switch {
	case flags&FlagADMyRank != 0 && rank != tm.rank:
		return EventInvalid, c.report(badArg(name, "GEX_FLAG_AD_MY_RANK asserted but rank %d is not the caller's rank %d", rank, tm.rank))
	case flags&FlagADMyNbrhd != 0 && c.topo.Nbrhd[j] != c.topo.Nbrhd[c.rank]:
		return EventInvalid, c.report(badArg(name, "GEX_FLAG_AD_MY_NBRHD asserted but rank %d is not in the caller's neighbourhood", rank))
	}
	seg, dstEP, err := tm.targetSeg(name, rank, j, EPCapabilityAD)
	if err != nil {
		return EventInvalid, err
	}
	if flags&FlagPeerSegOffset != 0 {
		addr += Addr(seg.Owner)
	}
	size := uint64(unsafe.Sizeof(op1))
	if uint64(addr)%size != 0 {
		return EventInvalid, c.report(badArg(name, "target address %#x is not aligned to its %d-byte type %v", uintptr(addr), size, ad.dt))
	}
	if seg.Size == 0 || addr < Addr(seg.Owner) || uint64(addr-Addr(seg.Owner)) > seg.Size || size > seg.Size-uint64(addr-Addr(seg.Owner)) {
		return EventInvalid, c.report(badArg(name, "target [%#x, +%d) is outside rank %d's segment [%#x, +%d)%s", uintptr(addr), size, rank, seg.Owner, seg.Size, c.ownSegHint(j, uint64(addr))))
	}
	off := uint64(addr - Addr(seg.Owner))
	if seg.Local != nil {
		old := atomicApply(seg.Local[off:off+size], op, op1, op2, ad.integer)
		if op&opResult != 0 {
			*result = old
		}
		return EventInvalid, nil
	}
	return atomicAM(c, name, mode, ad.dt, j, dstEP, uint64(addr), op, asBits(op1), asBits(op2), result, flags&FlagImmediate != 0)
}

// asBits returns v's bit pattern, zero-extended to 64 bits.
func asBits[T ADType](v T) uint64 {
	if unsafe.Sizeof(v) == 4 {
		return uint64(asWord[uint32](v))
	}
	return asWord[uint64](v)
}

// ecOfAtomic is the NBI category of an atomic opcode.
func ecOfAtomic(op OP) EC {
	switch op {
	case OPSet:
		return ECPut
	case OPGet:
		return ECGet
	}
	return ECRMW
}

// atomicAM runs an atomic on a target whose segment is not mapped: one Short
// request to the target's handler (hAtomicReq), answered through the same
// reply path as a get chunk (hGetRep) with the fetched value as payload.
func atomicAM[T ADType](c *Client, name string, mode rmaMode, dt DT, j int, dstEP uint16, addr uint64, op OP, b1, b2 uint64, result *T, immediate bool) (Event, error) {
	var dst []byte
	if op&opResult != 0 {
		dst = valueBytes(result)
	}
	id, o := c.startOp(j, 1, 8, dst, mode, ecOfAtomic(op))
	ev := o.ev // the reply may complete and release o while Send waits
	h := conduit.Header{Cat: conduit.Short, IsReq: true, Handler: uint8(hAtomicReq), NArgs: 10, EP: dstEP}
	h.Args[0], h.Args[1] = int32(uint32(addr)), int32(uint32(addr>>32))
	h.Args[2], h.Args[3] = int32(op), int32(dt)
	h.Args[4], h.Args[5] = int32(uint32(b1)), int32(uint32(b1>>32))
	h.Args[6], h.Args[7] = int32(uint32(b2)), int32(uint32(b2>>32))
	h.Args[8], h.Args[9] = id, int32(o.gen)
	var sf conduit.SendFlags
	if immediate {
		sf = conduit.Immediate
	}
	if err := c.cd.Send(j, h, nil, sf); err != nil {
		return abandonOp(c, &c.ops, name, id, o, mode, err)
	}
	if mode == modeNB {
		return ev.handle(), nil
	}
	return EventInvalid, nil
}
