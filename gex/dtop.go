package gex

import "strings"

// DT is a data type code for atomics and reductions (gex_DT_t, GASNet-EX
// "Common types for atomics and reductions"). The values are disjoint
// non-zero bits.
type DT uint32

// Data types. The built-in types are the integer and floating-point ones.
const (
	DTI32  DT = 1 << iota // GEX_DT_I32: int32
	DTU32                 // GEX_DT_U32: uint32
	DTI64                 // GEX_DT_I64: int64
	DTU64                 // GEX_DT_U64: uint64
	DTFLT                 // GEX_DT_FLT: float32
	DTDBL                 // GEX_DT_DBL: float64
	DTUser                // GEX_DT_USER: opaque user-defined type (reductions only)
)

var dtNames = [...]string{"I32", "U32", "I64", "U64", "FLT", "DBL", "USER"}

func (d DT) String() string {
	for i, n := range dtNames {
		if d == 1<<i {
			return "GEX_DT_" + n
		}
	}
	return "DT(" + itoa(int(d)) + ")"
}

// isInteger reports whether d is one of the built-in integer types.
func (d DT) isInteger() bool { return d&(DTI32|DTU32|DTI64|DTU64) != 0 && d&(d-1) == 0 }

// OP is an operation code for atomics and reductions (gex_OP_t). The values
// are disjoint non-zero bits, so a set of operations is their OR.
type OP uint32

// Operation codes.
const (
	OPAdd    OP = 1 << iota // GEX_OP_ADD:  op0 + op1
	OPMult                  // GEX_OP_MULT: op0 * op1
	OPMin                   // GEX_OP_MIN:  min(op0, op1)
	OPMax                   // GEX_OP_MAX:  max(op0, op1)
	OPSub                   // GEX_OP_SUB:  op0 - op1 (atomics only)
	OPInc                   // GEX_OP_INC:  op0 + 1 (atomics only)
	OPDec                   // GEX_OP_DEC:  op0 - 1 (atomics only)
	OPAnd                   // GEX_OP_AND:  op0 & op1 (integers only)
	OPOr                    // GEX_OP_OR:   op0 | op1 (integers only)
	OPXor                   // GEX_OP_XOR:  op0 ^ op1 (integers only)
	OPFAdd                  // GEX_OP_FADD: fetching ADD
	OPFMult                 // GEX_OP_FMULT
	OPFMin                  // GEX_OP_FMIN
	OPFMax                  // GEX_OP_FMAX
	OPFSub                  // GEX_OP_FSUB
	OPFInc                  // GEX_OP_FINC
	OPFDec                  // GEX_OP_FDEC
	OPFAnd                  // GEX_OP_FAND
	OPFOr                   // GEX_OP_FOR
	OPFXor                  // GEX_OP_FXOR
	OPSet                   // GEX_OP_SET:  writes op1
	OPCAS                   // GEX_OP_CAS:  op0 == op1 ? op2 : op0
	OPGet                   // GEX_OP_GET:  fetches op0
	OPSwap                  // GEX_OP_SWAP: writes op1, fetches op0
	OPFCAS                  // GEX_OP_FCAS: fetching CAS
	OPUser                  // GEX_OP_USER: commutative user-defined reduction
	OPUserNC                // GEX_OP_USER_NC: non-commutative user-defined reduction
)

var opNames = [...]string{"ADD", "MULT", "MIN", "MAX", "SUB", "INC", "DEC", "AND", "OR", "XOR",
	"FADD", "FMULT", "FMIN", "FMAX", "FSUB", "FINC", "FDEC", "FAND", "FOR", "FXOR",
	"SET", "CAS", "GET", "SWAP", "FCAS", "USER", "USER_NC"}

// String spells a single opcode as the spec does ("GEX_OP_FADD"), and a set
// as an OR of them.
func (o OP) String() string {
	if o == 0 {
		return "0"
	}
	var parts []string
	for i := 0; i < 32; i++ {
		if o&(1<<i) == 0 {
			continue
		}
		if i < len(opNames) {
			parts = append(parts, "GEX_OP_"+opNames[i])
		} else {
			parts = append(parts, "bit"+itoa(i))
		}
	}
	return strings.Join(parts, "|")
}

const (
	opArith       = OPAdd | OPMult | OPMin | OPMax | OPSub | OPInc | OPDec
	opBitwise     = OPAnd | OPOr | OPXor
	opNonFetching = opArith | opBitwise
	opFetching    = opNonFetching << 10 // FADD..FXOR, in the same order
	opFBitwise    = opBitwise << 10
	opAccessors   = OPSet | OPCAS | OPGet | OPSwap | OPFCAS
	opAtomic      = opNonFetching | opFetching | opAccessors
	opResult      = opFetching | OPGet | OPSwap | OPFCAS // ops that write *result
)

// ToFetching implements GEX_OP_TO_FETCHING: ADD → FADD and so on, SET → SWAP,
// CAS → FCAS. For any other opcode it returns 0.
func (o OP) ToFetching() OP {
	switch {
	case o&(o-1) != 0:
		return 0
	case o&opNonFetching != 0:
		return o << 10
	case o == OPSet:
		return OPSwap
	case o == OPCAS:
		return OPFCAS
	}
	return 0
}

// ToNonFetching implements GEX_OP_TO_NONFETCHING: FADD → ADD and so on, SWAP
// → SET, FCAS → CAS. For any other opcode it returns 0.
func (o OP) ToNonFetching() OP {
	switch {
	case o&(o-1) != 0:
		return 0
	case o&opFetching != 0:
		return o >> 10
	case o == OPSwap:
		return OPSet
	case o == OPFCAS:
		return OPCAS
	}
	return 0
}

// base returns the non-fetching form of an arithmetic or bit-wise op (itself
// if already non-fetching), and o for accessors.
func (o OP) base() OP {
	if o&opFetching != 0 {
		return o >> 10
	}
	return o
}
