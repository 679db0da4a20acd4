package gex

import "unsafe"

// Built-in reduction operators (GASNet-EX "Collectives Part III.
// Computational"): right[i] = left[i] (+) right[i] over the elements of the
// built-in type dt. Both buffers are the engine's own pooled buffers, which
// are 8-byte aligned, so they are viewed in place as slices of the element
// type.

func reduceBuiltin(dt DT, op OP, left, right []byte) {
	switch dt {
	case DTI32:
		reduceInt(op, view[int32](left), view[int32](right))
	case DTU32:
		reduceInt(op, view[uint32](left), view[uint32](right))
	case DTI64:
		reduceInt(op, view[int64](left), view[int64](right))
	case DTU64:
		reduceInt(op, view[uint64](left), view[uint64](right))
	case DTFLT:
		reduceFloat(op, view[float32](left), view[float32](right))
	case DTDBL:
		reduceFloat(op, view[float64](left), view[float64](right))
	}
}

// view is b as a slice of T; b is aligned for T and its length a multiple of
// T's size (the engine's buffers are).
func view[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

type integer interface {
	~int32 | ~uint32 | ~int64 | ~uint64
}

// reduceArith applies the operators every built-in type has; it reports
// whether op was one of them.
func reduceArith[T integer | float32 | float64](op OP, x, y []T) bool {
	y = y[:len(x)]
	switch op {
	case OPAdd:
		for i := range x {
			y[i] += x[i]
		}
	case OPMult:
		for i := range x {
			y[i] *= x[i]
		}
	case OPMin:
		for i := range x {
			y[i] = min(x[i], y[i])
		}
	case OPMax:
		for i := range x {
			y[i] = max(x[i], y[i])
		}
	default:
		return false
	}
	return true
}

// reduceInt adds the bit-wise operators.
func reduceInt[T integer](op OP, x, y []T) {
	if reduceArith(op, x, y) {
		return
	}
	y = y[:len(x)]
	switch op {
	case OPAnd:
		for i := range x {
			y[i] &= x[i]
		}
	case OPOr:
		for i := range x {
			y[i] |= x[i]
		}
	case OPXor:
		for i := range x {
			y[i] ^= x[i]
		}
	}
}

// reduceFloat: MIN and MAX are Go's min and max (a NaN operand gives NaN;
// min(-0, +0) is -0), which the spec's "Limitations for Built-in Data Types"
// permits. ADD and MULT are commutative in IEEE arithmetic, so y+x is x+y.
func reduceFloat[T float32 | float64](op OP, x, y []T) { reduceArith(op, x, y) }
