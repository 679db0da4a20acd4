package portals

import (
	"encoding/binary"
	"math"
	"sync/atomic"
)

type atomicU64 = atomic.Uint64

// AtomicOp is ptl_op_t (Portals 4.3 §3.15.4).
type AtomicOp uint8

const (
	OpMin     AtomicOp = iota // PTL_MIN
	OpMax                     // PTL_MAX
	OpSum                     // PTL_SUM
	OpProd                    // PTL_PROD
	OpLOr                     // PTL_LOR
	OpLAnd                    // PTL_LAND
	OpBOr                     // PTL_BOR
	OpBAnd                    // PTL_BAND
	OpLXor                    // PTL_LXOR
	OpBXor                    // PTL_BXOR
	OpSwap                    // PTL_SWAP
	OpCSwap                   // PTL_CSWAP
	OpCSwapNE                 // PTL_CSWAP_NE
	OpCSwapLE                 // PTL_CSWAP_LE
	OpCSwapLT                 // PTL_CSWAP_LT
	OpCSwapGE                 // PTL_CSWAP_GE
	OpCSwapGT                 // PTL_CSWAP_GT
	OpMSwap                   // PTL_MSWAP
	OpDiff                    // PTL_DIFF
	numAtomicOps
)

var atomicOpNames = [...]string{"PTL_MIN", "PTL_MAX", "PTL_SUM", "PTL_PROD", "PTL_LOR", "PTL_LAND", "PTL_BOR",
	"PTL_BAND", "PTL_LXOR", "PTL_BXOR", "PTL_SWAP", "PTL_CSWAP", "PTL_CSWAP_NE", "PTL_CSWAP_LE", "PTL_CSWAP_LT",
	"PTL_CSWAP_GE", "PTL_CSWAP_GT", "PTL_MSWAP", "PTL_DIFF"}

func (o AtomicOp) String() string { return enumString(int(o), atomicOpNames[:], "ptl_op_t") }

// Datatype is ptl_datatype_t (Portals 4.3 §3.15.4).
type Datatype uint8

const (
	Int8              Datatype = iota // PTL_INT8_T
	Uint8                             // PTL_UINT8_T
	Int16                             // PTL_INT16_T
	Uint16                            // PTL_UINT16_T
	Int32                             // PTL_INT32_T
	Uint32                            // PTL_UINT32_T
	Int64                             // PTL_INT64_T
	Uint64                            // PTL_UINT64_T
	Float                             // PTL_FLOAT
	FloatComplex                      // PTL_FLOAT_COMPLEX
	Double                            // PTL_DOUBLE
	DoubleComplex                     // PTL_DOUBLE_COMPLEX
	LongDouble                        // PTL_LONG_DOUBLE: x86 80-bit extended in 16 bytes
	LongDoubleComplex                 // PTL_LONG_DOUBLE_COMPLEX: two of them, 32 bytes
	numDatatypes
)

var datatypeNames = [...]string{"PTL_INT8_T", "PTL_UINT8_T", "PTL_INT16_T", "PTL_UINT16_T", "PTL_INT32_T",
	"PTL_UINT32_T", "PTL_INT64_T", "PTL_UINT64_T", "PTL_FLOAT", "PTL_FLOAT_COMPLEX", "PTL_DOUBLE",
	"PTL_DOUBLE_COMPLEX", "PTL_LONG_DOUBLE", "PTL_LONG_DOUBLE_COMPLEX"}

func (d Datatype) String() string { return enumString(int(d), datatypeNames[:], "ptl_datatype_t") }

var datatypeSizes = [...]int{1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16, 16, 32}

// Size is the size in bytes of one item (0 for an unknown datatype).
func (d Datatype) Size() int {
	if int(d) < len(datatypeSizes) {
		return datatypeSizes[d]
	}
	return 0
}

type dtClass uint8

const (
	classInt dtClass = iota
	classFloat
	classComplex
)

func (d Datatype) class() dtClass {
	switch d {
	case Float, Double, LongDouble:
		return classFloat
	case FloatComplex, DoubleComplex, LongDoubleComplex:
		return classComplex
	}
	return classInt
}

func (d Datatype) signed() bool { return d == Int8 || d == Int16 || d == Int32 || d == Int64 }

// isSwapOp: the operations only PtlSwap may carry (§3.15.7).
func isSwapOp(o AtomicOp) bool { return o >= OpSwap && o <= OpMSwap }

// Legal reports whether op may be applied to datatype (Portals 4.3 §3.15.4, Table 3-4 as
// reconstructed in docs/portals.md): bitwise and logical operations and MSWAP only on
// integers; MIN, MAX and the ordered CSWAPs not on complex types; the rest on all types.
func Legal(op AtomicOp, d Datatype) bool {
	if op >= numAtomicOps || d >= numDatatypes {
		return false
	}
	c := d.class()
	switch op {
	case OpLOr, OpLAnd, OpLXor, OpBOr, OpBAnd, OpBXor, OpMSwap:
		return c == classInt
	case OpMin, OpMax, OpCSwapLE, OpCSwapLT, OpCSwapGE, OpCSwapGT:
		return c != classComplex
	}
	return true
}

// legalAtomic adds which function may carry op: PtlAtomic and PtlFetchAtomic the
// arithmetic and logical ones, PtlSwap the swap family (§3.15.5–3.15.7).
func legalAtomic(op AtomicOp, d Datatype, wireOp byte) bool {
	if !Legal(op, d) {
		return false
	}
	if wireOp == opSwap {
		return isSwapOp(op)
	}
	return !isSwapOp(op)
}

var ne = binary.NativeEndian

// applyAtomic applies op element by element: tgt ← f(tgt, src[, operand]); when old is not
// nil it receives the previous contents of tgt. len(tgt) == len(src) is a multiple of the
// item size; operand is one item (swap family). With the NI's lock held, which makes each
// item's update atomic with respect to every other Portals atomic on the NI (§3.15.4).
func applyAtomic(op AtomicOp, d Datatype, tgt, src, operand, old []byte) {
	if old != nil {
		copy(old, tgt)
	}
	sz := d.Size()
	for i := 0; i+sz <= len(tgt); i += sz {
		t, s := tgt[i:i+sz], src[i:i+sz]
		switch d.class() {
		case classInt:
			applyInt(op, d, t, s, operand)
		case classFloat:
			applyFloat(op, d, t, s, operand)
		default:
			h := sz / 2
			var oa, ob []byte
			if len(operand) >= sz {
				oa, ob = operand[:h], operand[h:sz]
			}
			applyComplex(op, d, t[:h], t[h:], s[:h], s[h:], oa, ob)
		}
	}
}

func loadU(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(ne.Uint16(b))
	case 4:
		return uint64(ne.Uint32(b))
	}
	return ne.Uint64(b)
}

func storeU(b []byte, v uint64) {
	switch len(b) {
	case 1:
		b[0] = byte(v)
	case 2:
		ne.PutUint16(b, uint16(v))
	case 4:
		ne.PutUint32(b, uint32(v))
	default:
		ne.PutUint64(b, v)
	}
}

func sext(v uint64, n int) int64 {
	s := 64 - 8*uint(n)
	return int64(v<<s) >> s
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func applyInt(op AtomicOp, d Datatype, t, s, operand []byte) {
	n := len(t)
	tv, sv := loadU(t), loadU(s)
	var ov uint64
	if len(operand) >= n {
		ov = loadU(operand[:n])
	}
	// cmp(a, b) is -1, 0, 1 by the datatype's signedness.
	cmp := func(a, b uint64) int {
		if d.signed() {
			x, y := sext(a, n), sext(b, n)
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}
	r := tv
	switch op {
	case OpMin:
		if cmp(sv, tv) < 0 {
			r = sv
		}
	case OpMax:
		if cmp(sv, tv) > 0 {
			r = sv
		}
	case OpSum:
		r = tv + sv
	case OpProd:
		r = tv * sv
	case OpDiff:
		r = tv - sv
	case OpLOr:
		r = b2u(tv != 0 || sv != 0)
	case OpLAnd:
		r = b2u(tv != 0 && sv != 0)
	case OpLXor:
		r = b2u((tv != 0) != (sv != 0))
	case OpBOr:
		r = tv | sv
	case OpBAnd:
		r = tv & sv
	case OpBXor:
		r = tv ^ sv
	case OpSwap:
		r = sv
	case OpMSwap:
		r = tv&^ov | sv&ov
	default:
		if swapCond(op, cmp(ov, tv)) {
			r = sv
		}
	}
	storeU(t, r)
}

// swapCond is the test of the conditional swaps: operand compared with the target
// (§3.15.7: "PTL_CSWAP_LE ... if the operand is less than or equal to the target").
func swapCond(op AtomicOp, c int) bool {
	switch op {
	case OpCSwap:
		return c == 0
	case OpCSwapNE:
		return c != 0
	case OpCSwapLE:
		return c <= 0
	case OpCSwapLT:
		return c < 0
	case OpCSwapGE:
		return c >= 0
	case OpCSwapGT:
		return c > 0
	}
	return false
}

func loadF(d Datatype, b []byte) float64 {
	switch len(b) {
	case 4:
		return float64(math.Float32frombits(ne.Uint32(b)))
	case 8:
		return math.Float64frombits(ne.Uint64(b))
	}
	return ext80ToFloat64(b)
}

func storeF(b []byte, v float64) {
	switch len(b) {
	case 4:
		ne.PutUint32(b, math.Float32bits(float32(v)))
	case 8:
		ne.PutUint64(b, math.Float64bits(v))
	default:
		float64ToExt80(b, v)
	}
}

func fcmp(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	}
	return 2 // unordered (NaN): no ordered condition holds, and neither does equality
}

func applyFloat(op AtomicOp, d Datatype, t, s, operand []byte) {
	tv, sv := loadF(d, t), loadF(d, s)
	switch op {
	case OpMin:
		if sv < tv {
			storeF(t, sv)
		}
	case OpMax:
		if sv > tv {
			storeF(t, sv)
		}
	case OpSum:
		storeF(t, tv+sv)
	case OpProd:
		storeF(t, tv*sv)
	case OpDiff:
		storeF(t, tv-sv)
	case OpSwap:
		copy(t, s)
	default:
		if len(operand) < len(t) {
			return
		}
		c := fcmp(loadF(d, operand[:len(t)]), tv)
		if c == 2 {
			if op == OpCSwapNE {
				copy(t, s)
			}
			return
		}
		if swapCond(op, c) {
			copy(t, s)
		}
	}
}

func applyComplex(op AtomicOp, d Datatype, tr, ti, sr, si, or, oi []byte) {
	a := complex(loadF(d, tr), loadF(d, ti))
	b := complex(loadF(d, sr), loadF(d, si))
	var r complex128
	switch op {
	case OpSum:
		r = a + b
	case OpProd:
		r = a * b
	case OpDiff:
		r = a - b
	case OpSwap:
		copy(tr, sr)
		copy(ti, si)
		return
	case OpCSwap, OpCSwapNE:
		if or == nil {
			return
		}
		eq := complex(loadF(d, or), loadF(d, oi)) == a
		if eq == (op == OpCSwap) {
			copy(tr, sr)
			copy(ti, si)
		}
		return
	default:
		return
	}
	storeF(tr, real(r))
	storeF(ti, imag(r))
}

// ext80ToFloat64 reads an x86 80-bit extended value (the C long double of x86-64, stored in
// 16 bytes). Arithmetic on long double is done in float64 (documented in docs/portals.md).
func ext80ToFloat64(b []byte) float64 {
	mant := binary.LittleEndian.Uint64(b[0:8])
	se := binary.LittleEndian.Uint16(b[8:10])
	sign := se >> 15
	exp := int(se & 0x7fff)
	var f float64
	switch {
	case exp == 0 && mant == 0:
		f = 0
	case exp == 0x7fff:
		if mant<<1 == 0 {
			f = math.Inf(1)
		} else {
			f = math.NaN()
		}
	default:
		f = math.Ldexp(float64(mant), exp-16383-63)
	}
	if sign != 0 {
		f = -f
	}
	return f
}

func float64ToExt80(b []byte, f float64) {
	var sign uint16
	if math.Signbit(f) {
		sign = 0x8000
		f = -f
	}
	var mant uint64
	var exp uint16
	switch {
	case f == 0:
	case math.IsInf(f, 0):
		exp, mant = 0x7fff, 1<<63
	case math.IsNaN(f):
		exp, mant = 0x7fff, 3<<62
	default:
		fr, e := math.Frexp(f) // f = fr * 2^e, 0.5 <= fr < 1
		mant = uint64(math.Ldexp(fr, 64))
		exp = uint16(e - 1 + 16383)
	}
	binary.LittleEndian.PutUint64(b[0:8], mant)
	binary.LittleEndian.PutUint16(b[8:10], exp|sign)
	for i := 10; i < 16 && i < len(b); i++ {
		b[i] = 0
	}
}
