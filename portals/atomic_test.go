package portals

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"unsafe"
)

type integer interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

// refInt is the reference meaning of each operation on integers (Portals 4.3 §3.15.4),
// written with Go's typed arithmetic, independent of the engine's byte-level code.
func refInt[T integer](op AtomicOp, t, s, o T) T {
	b := func(x bool) T {
		if x {
			return 1
		}
		return 0
	}
	switch op {
	case OpMin, OpMax, OpSum, OpProd, OpDiff, OpSwap:
		return refArith(op, t, s)
	case OpLOr:
		return b(t != 0 || s != 0)
	case OpLAnd:
		return b(t != 0 && s != 0)
	case OpLXor:
		return b((t != 0) != (s != 0))
	case OpBOr:
		return t | s
	case OpBAnd:
		return t & s
	case OpBXor:
		return t ^ s
	case OpMSwap:
		return t&^o | s&o
	}
	if cond(op, o, t) {
		return s
	}
	return t
}

func cond[T integer | float32 | float64](op AtomicOp, o, t T) bool {
	switch op {
	case OpCSwap:
		return o == t
	case OpCSwapNE:
		return o != t
	case OpCSwapLE:
		return o <= t
	case OpCSwapLT:
		return o < t
	case OpCSwapGE:
		return o >= t
	case OpCSwapGT:
		return o > t
	}
	panic(op)
}

// refArith is MIN, MAX, SUM, PROD, DIFF (target − initiator) and SWAP on ordered types.
func refArith[T integer | float32 | float64](op AtomicOp, t, s T) T {
	switch op {
	case OpMin:
		return min(t, s)
	case OpMax:
		return max(t, s)
	case OpSum:
		return t + s
	case OpProd:
		return t * s
	case OpDiff:
		return t - s
	}
	return s
}

func refFloat[T float32 | float64](op AtomicOp, t, s, o T) T {
	switch op {
	case OpMin, OpMax, OpSum, OpProd, OpDiff, OpSwap:
		return refArith(op, t, s)
	}
	if cond(op, o, t) {
		return s
	}
	return t
}

func refComplex[T complex64 | complex128](op AtomicOp, t, s, o T) T {
	switch op {
	case OpSum:
		return t + s
	case OpProd:
		return t * s
	case OpDiff:
		return t - s
	case OpSwap:
		return s
	case OpCSwap:
		if o == t {
			return s
		}
	case OpCSwapNE:
		if o != t {
			return s
		}
	}
	return t
}

func bytesOf[T any](v []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

// caseFor builds target, source and operand items of type T from small integers and the
// reference result.
func caseFor[T any](vals [5]float64, conv func(float64) T, ref func(op AtomicOp, t, s, o T) T, op AtomicOp, n int) (tb, sb, ob, want []byte) {
	tv := []T{conv(vals[0]), conv(vals[1])}[:n]
	sv := []T{conv(vals[2]), conv(vals[3])}[:n]
	ov := []T{conv(vals[4])}
	w := make([]T, n)
	for i := range w {
		w[i] = ref(op, tv[i], sv[i], ov[0])
	}
	return bytes.Clone(bytesOf(tv)), bytes.Clone(bytesOf(sv)), bytes.Clone(bytesOf(ov)), bytes.Clone(bytesOf(w))
}

func atomicCase(op AtomicOp, dt Datatype, vals [5]float64, n int) (tb, sb, ob, want []byte) {
	switch dt {
	case Int8:
		return caseFor(vals, func(f float64) int8 { return int8(f) }, refInt[int8], op, n)
	case Uint8:
		return caseFor(vals, func(f float64) uint8 { return uint8(int64(f)) }, refInt[uint8], op, n)
	case Int16:
		return caseFor(vals, func(f float64) int16 { return int16(f) }, refInt[int16], op, n)
	case Uint16:
		return caseFor(vals, func(f float64) uint16 { return uint16(int64(f)) }, refInt[uint16], op, n)
	case Int32:
		return caseFor(vals, func(f float64) int32 { return int32(f) }, refInt[int32], op, n)
	case Uint32:
		return caseFor(vals, func(f float64) uint32 { return uint32(int64(f)) }, refInt[uint32], op, n)
	case Int64:
		return caseFor(vals, func(f float64) int64 { return int64(f) }, refInt[int64], op, n)
	case Uint64:
		return caseFor(vals, func(f float64) uint64 { return uint64(int64(f)) }, refInt[uint64], op, n)
	case Float:
		return caseFor(vals, func(f float64) float32 { return float32(f) }, refFloat[float32], op, n)
	case Double:
		return caseFor(vals, func(f float64) float64 { return f }, refFloat[float64], op, n)
	case FloatComplex:
		return caseFor(vals, func(f float64) complex64 { return complex(float32(f), float32(f/2)) }, refComplex[complex64], op, n)
	case DoubleComplex:
		return caseFor(vals, func(f float64) complex128 { return complex(f, f/2) }, refComplex[complex128], op, n)
	case LongDouble, LongDoubleComplex:
		parts := 1
		if dt == LongDoubleComplex {
			parts = 2
		}
		enc := func(vs []float64) []byte {
			b := make([]byte, 16*len(vs))
			for i, v := range vs {
				float64ToExt80(b[16*i:], v)
			}
			return b
		}
		var tv, sv, ov, w []float64
		for i := 0; i < n; i++ {
			if parts == 1 {
				tv, sv = append(tv, vals[i]), append(sv, vals[2+i])
				w = append(w, refFloat(op, vals[i], vals[2+i], vals[4]))
			} else {
				a, b, o := complex(vals[i], vals[i]/2), complex(vals[2+i], vals[2+i]/2), complex(vals[4], vals[4]/2)
				r := refComplex(op, a, b, o)
				tv, sv, w = append(tv, real(a), imag(a)), append(sv, real(b), imag(b)), append(w, real(r), imag(r))
			}
		}
		ov = []float64{vals[4]}
		if parts == 2 {
			ov = append(ov, vals[4]/2)
		}
		return enc(tv), enc(sv), enc(ov), enc(w)
	}
	panic(dt)
}

func TestExt80(t *testing.T) {
	b := make([]byte, 16)
	for _, f := range []float64{0, 1, -1, 0.5, 3.25, 1e300, -1e-300, math.MaxFloat64, math.SmallestNonzeroFloat64 * 4, math.Inf(1)} {
		float64ToExt80(b, f)
		if g := ext80ToFloat64(b); g != f {
			t.Fatalf("%v -> %x -> %v", f, b, g)
		}
	}
	// 1.0 in x87 extended: mantissa 0x8000000000000000, exponent 16383
	float64ToExt80(b, 1)
	if binary.LittleEndian.Uint64(b) != 1<<63 || binary.LittleEndian.Uint16(b[8:]) != 16383 {
		t.Fatalf("1.0 = %x", b)
	}
}

// TestAtomicsAll runs every operation on every datatype (19 × 14) through the right call
// (PtlAtomic, PtlFetchAtomic, PtlSwap) against the reference, on a matching physical NI
// talking to itself and between two NIs; illegal combinations are refused with
// PTL_ARG_INVALID at the call.
func TestAtomicsAll(t *testing.T) {
	for _, pair := range []bool{false, true} {
		n := 1
		if pair {
			n = 2
		}
		e := newEnv(t, niKinds[1], n, nil)
		tgt := n - 1
		q := must(e.ni[tgt].EQAlloc(16))
		pt := must(e.ni[tgt].PTAlloc(0, q, PTAny))
		tbuf := make([]byte, 128)
		e.appendEntry(tgt, pt, anyME(tbuf, EventLinkDisable|EventCommDisable), PriorityList, 0)
		qI := must(e.ni[0].EQAlloc(16))
		src := make([]byte, 128)
		res := make([]byte, 128)
		smd := must(e.ni[0].MDBind(MD{Buf: src, EQ: qI, Options: MDEventSendDisable}))
		rmd := must(e.ni[0].MDBind(MD{Buf: res, EQ: qI, Options: MDEventSendDisable}))
		legal := 0
		for op := AtomicOp(0); op < numAtomicOps; op++ {
			for dt := Datatype(0); dt < numDatatypes; dt++ {
				items := 2
				if op != OpSwap && isSwapOp(op) {
					items = 1
				}
				sz := uint64(dt.Size())
				length := sz * uint64(items)
				for _, vals := range [][5]float64{{7, -3, 5, 9, 7}, {2, 12, -6, 1, 4}} {
					if !Legal(op, dt) {
						var err error
						if isSwapOp(op) {
							err = Swap(rmd, 0, smd, 0, length, e.ids[tgt], pt, 0, 8, 0, 0, make([]byte, sz), op, dt)
						} else {
							err = FetchAtomic(rmd, 0, smd, 0, length, e.ids[tgt], pt, 0, 8, 0, 0, op, dt)
							wantCode(t, Atomic(smd, 0, length, NoAckReq, e.ids[tgt], pt, 0, 8, 0, 0, op, dt), ErrArgInvalid)
						}
						wantCode(t, err, ErrArgInvalid)
						continue
					}
					tb, sb, ob, want := atomicCase(op, dt, vals, items)
					copy(tbuf[8:], tb) // the target items are at remote offset 8
					copy(src, sb)
					ok(t, AtomicSync())
					clear(res)
					var err error
					switch {
					case isSwapOp(op):
						err = Swap(rmd, 0, smd, 0, length, e.ids[tgt], pt, 0, 8, 0, 0, ob, op, dt)
					default:
						err = FetchAtomic(rmd, 0, smd, 0, length, e.ids[tgt], pt, 0, 8, 0, 0, op, dt)
					}
					ok(t, err)
					if r := expectKind(t, qI, EventReply); r.NIFail != NIOK || r.MLength != length {
						t.Fatalf("%v %v: reply %+v", op, dt, r)
					}
					if !bytes.Equal(res[:length], tb) {
						t.Fatalf("%v %v: fetched %x want the old %x", op, dt, res[:length], tb)
					}
					ok(t, AtomicSync()) // §3.15.8: the host sees the target's atomics after it
					if !bytes.Equal(tbuf[8:8+length], want) {
						t.Fatalf("%v %v vals %v: target %x want %x", op, dt, vals, tbuf[8:8+length], want)
					}
					// non-fetching PtlAtomic of the same (for the arithmetic ops)
					if !isSwapOp(op) {
						copy(tbuf[8:], tb)
						ok(t, AtomicSync()) // orders this host write before the NIC's (in-process -race)
						ok(t, Atomic(smd, 0, length, AckReqFull, e.ids[tgt], pt, 0, 8, 0, 0, op, dt))
						expectKind(t, qI, EventAck)
						ok(t, AtomicSync()) // §3.15.8: the host sees the target's atomics after it
						if !bytes.Equal(tbuf[8:8+length], want) {
							t.Fatalf("PtlAtomic %v %v: %x want %x", op, dt, tbuf[8:8+length], want)
						}
					} else {
						wantCode(t, Atomic(smd, 0, length, AckReqFull, e.ids[tgt], pt, 0, 8, 0, 0, op, dt), ErrArgInvalid)
					}
					legal++
				}
			}
		}
		if legal != 2*(19*14-legalExcluded()) {
			t.Fatalf("%d legal cases run", legal)
		}
	}
}

func TestAtomicArgs(t *testing.T) {
	e := newEnv(t, niKinds[0], 1, &Limits{MaxAtomicSize: 16})
	md := must(e.ni[0].MDBind(MD{Buf: make([]byte, 64)}))
	id := e.ids[0]
	wantCode(t, Atomic(md, 0, 6, NoAckReq, id, 0, 0, 0, 0, 0, OpSum, Int32), ErrArgInvalid)  // not a multiple
	wantCode(t, Atomic(md, 0, 32, NoAckReq, id, 0, 0, 0, 0, 0, OpSum, Int32), ErrArgInvalid) // > max_atomic_size
	wantCode(t, FetchAtomic(md, 0, md, 0, 32, id, 0, 0, 0, 0, 0, OpSum, Int32), ErrArgInvalid)
	wantCode(t, Swap(md, 0, md, 0, 8, id, 0, 0, 0, 0, 0, []byte{1, 2, 3, 4}, OpCSwap, Int32), ErrArgInvalid) // 2 items
	wantCode(t, Swap(md, 0, md, 0, 4, id, 0, 0, 0, 0, 0, nil, OpCSwap, Int32), ErrArgInvalid)                // no operand
	wantCode(t, Atomic(md, 0, 4, NoAckReq, id, 0, 0, 0, 0, 0, numAtomicOps, Int32), ErrArgInvalid)
	wantCode(t, Atomic(md, 0, 4, NoAckReq, id, 0, 0, 0, 0, 0, OpSum, numDatatypes), ErrArgInvalid)
	wantCode(t, Atomic(md, 0, 4, NoAckReq, id, 0, 0, 0, 0, 0, OpBAnd, Float), ErrArgInvalid)
	md2 := must(e.ni[0].MDBind(MD{Buf: make([]byte, 8), Options: MDUnreliable}))
	wantCode(t, Put(md2, 0, 8, AckReqFull, id, 0, 0, 0, 0, 0), ErrArgInvalid)
	ok(t, Put(md2, 0, 8, NoAckReq, id, 0, 0, 0, 0, 0))
}

// Atomics landing in an overflow entry are not applied (§4.4): the data is deposited for the
// user, and the overflow event carries the operation and datatype.
func TestAtomicOverflow(t *testing.T) {
	e := newEnv(t, niKinds[0], 1, nil)
	q := must(e.ni[0].EQAlloc(16))
	pt := must(e.ni[0].PTAlloc(0, q, PTAny))
	ovf := make([]byte, 16)
	binary.NativeEndian.PutUint64(ovf, 100)
	e.appendEntry(0, pt, anyME(ovf, EventLinkDisable), OverflowList, 0)
	src := make([]byte, 8)
	binary.NativeEndian.PutUint64(src, 5)
	md := must(e.ni[0].MDBind(MD{Buf: src}))
	ok(t, Atomic(md, 0, 8, NoAckReq, e.ids[0], pt, 0, 0, 0, 0, OpSum, Uint64))
	expectKind(t, q, EventAtomic)
	if binary.NativeEndian.Uint64(ovf) != 5 {
		t.Fatal("the overflow buffer holds the operand data")
	}
	e.appendEntry(0, pt, anyME(make([]byte, 8), EventLinkDisable), PriorityList, 0)
	ev := expectKind(t, q, EventAtomicOverflow)
	if ev.AtomicOp != OpSum || ev.AtomicType != Uint64 || ev.MLength != 8 {
		t.Fatalf("%+v", ev)
	}
}

// legalExcluded counts the illegal (op, datatype) pairs of Table 3-4 as reconstructed:
// 6 logical/bitwise ops and MSWAP on 6 floating and complex types, MIN/MAX and the 4
// ordered CSWAPs on the 3 complex types.
func legalExcluded() int { return 7*6 + 6*3 }
