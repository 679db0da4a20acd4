package gex

import (
	"sync/atomic"
	"unsafe"
)

// The CPU implementation of every atomic opcode on every built-in type. Both
// paths of remote atomics run this code on the target location's memory: the
// initiator through its mapping of a neighbourhood peer's segment, or the
// target's AM handler on its own segment. All accesses to a location are
// therefore CPU atomics on that location, coherent with each other whichever
// path an initiator took (GASNet-EX "Remote Atomic Operations": atomicity
// "with respect to all other accesses to the same target location made using
// the same AD").
//
// Go's sync/atomic operations are sequentially consistent, so every operation
// is both an acquire and a release; GEX_FLAG_AD_ACQ/REL need nothing more.
//
// Floating point (as the spec permits): CAS and FCAS compare bit patterns (so
// -0 != +0 and a NaN equals an identical NaN); MIN/MAX follow the spec's C
// expressions ((op0 < op1) ? op0 : op1, so MIN(+0, -0) is -0) except that a
// NaN operand leaves the target unchanged and a NaN target stays NaN;
// arithmetic follows IEEE 754 in Go.

// word is the memory word an atomic operates on.
type word interface{ uint32 | uint64 }

// atomicWord is the method set shared by *atomic.Uint32 and *atomic.Uint64.
type atomicWord[W word] interface {
	Load() W
	Store(W)
	Swap(W) W
	CompareAndSwap(old, new W) bool
	Add(W) W
}

// asWord and fromWord reinterpret a value's bits; sizeof(T) == sizeof(W) is
// guaranteed by atomicApply.
func asWord[W word, T ADType](v T) W { return *(*W)(unsafe.Pointer(&v)) }

func fromWord[T ADType, W word](w W) T { return *(*T)(unsafe.Pointer(&w)) }

// atomicApply performs op on the T at mem[0:sizeof(T)] (aligned, checked by
// the caller) and returns the previous value.
func atomicApply[T ADType](mem []byte, op OP, op1, op2 T, integer bool) T {
	return atomicApplyAt(unsafe.Pointer(unsafe.SliceData(mem)), op, op1, op2, integer)
}

// atomicApplyAt is atomicApply on the T at p.
func atomicApplyAt[T ADType](p unsafe.Pointer, op OP, op1, op2 T, integer bool) T {
	// The commonest operations on concrete atomics (the generic path below
	// calls its word methods through a dictionary, which costs several ns).
	if integer && (op == OPFAdd || op == OPAdd) {
		if unsafe.Sizeof(op1) == 8 {
			d := asWord[uint64](op1)
			return fromWord[T]((*atomic.Uint64)(p).Add(d) - d)
		}
		d := asWord[uint32](op1)
		return fromWord[T]((*atomic.Uint32)(p).Add(d) - d)
	}
	if unsafe.Sizeof(op1) == 4 {
		return applyWord[T, uint32]((*atomic.Uint32)(p), op, op1, op2, integer)
	}
	return applyWord[T, uint64]((*atomic.Uint64)(p), op, op1, op2, integer)
}

func applyWord[T ADType, W word, A atomicWord[W]](a A, op OP, op1, op2 T, integer bool) T {
	switch op {
	case OPGet:
		return fromWord[T](a.Load())
	case OPSet:
		a.Store(asWord[W](op1))
		return 0
	case OPSwap:
		return fromWord[T](a.Swap(asWord[W](op1)))
	case OPCAS, OPFCAS:
		// "With a guarantee to be free of spurious failures": a failed
		// CompareAndSwap means the word changed, so look again.
		want, next := asWord[W](op1), asWord[W](op2)
		for {
			cur := a.Load()
			if cur != want || a.CompareAndSwap(cur, next) {
				return fromWord[T](cur)
			}
		}
	}
	b := op.base()
	if integer {
		var d W
		switch b {
		case OPAdd:
			d = asWord[W](op1)
		case OPSub:
			d = -asWord[W](op1) // two's complement: adding the negation subtracts
		case OPInc:
			d = 1
		case OPDec:
			d = ^W(0)
		}
		if d != 0 || b == OPAdd || b == OPSub {
			return fromWord[T](a.Add(d) - d)
		}
	}
	for {
		cur := a.Load()
		v := fromWord[T](cur)
		var next W
		switch b {
		case OPAdd:
			next = asWord[W](v + op1)
		case OPSub:
			next = asWord[W](v - op1)
		case OPInc:
			next = asWord[W](v + 1)
		case OPDec:
			next = asWord[W](v - 1)
		case OPMult:
			next = asWord[W](v * op1)
		case OPMin:
			next = cur
			if op1 <= v { // !(op0 < op1), NaN aside: equal values (±0) give op1
				next = asWord[W](op1)
			}
		case OPMax:
			next = cur
			if op1 >= v { // !(op0 > op1), NaN aside
				next = asWord[W](op1)
			}
		case OPAnd:
			next = cur & asWord[W](op1)
		case OPOr:
			next = cur | asWord[W](op1)
		case OPXor:
			next = cur ^ asWord[W](op1)
		default:
			panic("gex: atomicApply: opcode " + op.String() + " reached the CPU engine unvalidated")
		}
		if next == cur || a.CompareAndSwap(cur, next) {
			return v
		}
	}
}

// applyBits runs op for data type dt on raw operand bits (the AM path's
// target side) and returns the previous value's bits.
func applyBits(dt DT, mem []byte, op OP, b1, b2 uint64) uint64 {
	switch dt {
	case DTI32:
		return uint64(uint32(atomicApply(mem, op, int32(b1), int32(b2), true)))
	case DTU32:
		return uint64(atomicApply(mem, op, uint32(b1), uint32(b2), true))
	case DTI64:
		return uint64(atomicApply(mem, op, int64(b1), int64(b2), true))
	case DTU64:
		return atomicApply(mem, op, b1, b2, true)
	case DTFLT:
		r := atomicApply(mem, op, fromWord[float32](uint32(b1)), fromWord[float32](uint32(b2)), false)
		return uint64(asWord[uint32](r))
	case DTDBL:
		r := atomicApply(mem, op, fromWord[float64](b1), fromWord[float64](b2), false)
		return asWord[uint64](r)
	}
	panic("gex: applyBits: data type " + dt.String() + " reached the CPU engine unvalidated")
}

// valueBytes views *p as its bytes (the fetch destination on the AM path).
func valueBytes[T ADType](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}
