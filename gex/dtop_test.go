package gex_test

import (
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// GASNet-EX "Common types for atomics and reductions":
//
//   - "It is guaranteed that all GEX_DT_* values are represented by disjoint
//     non-zero bits." The same sentence holds for GEX_OP_*.
//   - GEX_OP_TO_FETCHING "takes a non-fetching opcode as an argument and
//     returns the corresponding fetching opcode. The value of 'op' must be
//     GEX_OP_SET, GEX_OP_CAS or an opcode listed under "Non-fetching
//     Operations""; GEX_OP_TO_NONFETCHING the converse for GEX_OP_SWAP,
//     GEX_OP_FCAS and the "Fetching Operations"; "SWAP/SET are considered to
//     be a fetching/non-fetching pair". Other inputs are undefined in C;
//     gexgo documents 0 for them.

var allDTs = []struct {
	dt   gex.DT
	name string
}{
	{gex.DTI32, "GEX_DT_I32"}, {gex.DTU32, "GEX_DT_U32"}, {gex.DTI64, "GEX_DT_I64"},
	{gex.DTU64, "GEX_DT_U64"}, {gex.DTFLT, "GEX_DT_FLT"}, {gex.DTDBL, "GEX_DT_DBL"},
	{gex.DTUser, "GEX_DT_USER"},
}

var allOPs = []struct {
	op   gex.OP
	name string
}{
	{gex.OPAdd, "GEX_OP_ADD"}, {gex.OPMult, "GEX_OP_MULT"}, {gex.OPMin, "GEX_OP_MIN"},
	{gex.OPMax, "GEX_OP_MAX"}, {gex.OPSub, "GEX_OP_SUB"}, {gex.OPInc, "GEX_OP_INC"},
	{gex.OPDec, "GEX_OP_DEC"}, {gex.OPAnd, "GEX_OP_AND"}, {gex.OPOr, "GEX_OP_OR"},
	{gex.OPXor, "GEX_OP_XOR"}, {gex.OPFAdd, "GEX_OP_FADD"}, {gex.OPFMult, "GEX_OP_FMULT"},
	{gex.OPFMin, "GEX_OP_FMIN"}, {gex.OPFMax, "GEX_OP_FMAX"}, {gex.OPFSub, "GEX_OP_FSUB"},
	{gex.OPFInc, "GEX_OP_FINC"}, {gex.OPFDec, "GEX_OP_FDEC"}, {gex.OPFAnd, "GEX_OP_FAND"},
	{gex.OPFOr, "GEX_OP_FOR"}, {gex.OPFXor, "GEX_OP_FXOR"}, {gex.OPSet, "GEX_OP_SET"},
	{gex.OPCAS, "GEX_OP_CAS"}, {gex.OPGet, "GEX_OP_GET"}, {gex.OPSwap, "GEX_OP_SWAP"},
	{gex.OPFCAS, "GEX_OP_FCAS"}, {gex.OPUser, "GEX_OP_USER"}, {gex.OPUserNC, "GEX_OP_USER_NC"},
}

// fetchPairs are the spec's non-fetching/fetching pairs.
var fetchPairs = []struct{ nf, f gex.OP }{
	{gex.OPAdd, gex.OPFAdd}, {gex.OPMult, gex.OPFMult}, {gex.OPMin, gex.OPFMin},
	{gex.OPMax, gex.OPFMax}, {gex.OPSub, gex.OPFSub}, {gex.OPInc, gex.OPFInc},
	{gex.OPDec, gex.OPFDec}, {gex.OPAnd, gex.OPFAnd}, {gex.OPOr, gex.OPFOr},
	{gex.OPXor, gex.OPFXor}, {gex.OPSet, gex.OPSwap}, {gex.OPCAS, gex.OPFCAS},
}

func TestDTBitsAndNames(t *testing.T) {
	var seen gex.DT
	for _, d := range allDTs {
		if d.dt == 0 || d.dt&(d.dt-1) != 0 {
			t.Errorf("%s = %#x is not a single non-zero bit", d.name, uint32(d.dt))
		}
		if seen&d.dt != 0 {
			t.Errorf("%s = %#x shares a bit with another GEX_DT_*", d.name, uint32(d.dt))
		}
		seen |= d.dt
		if got := d.dt.String(); got != d.name {
			t.Errorf("String() = %q, want %q", got, d.name)
		}
	}
}

func TestOPBitsAndNames(t *testing.T) {
	var seen gex.OP
	for _, o := range allOPs {
		if o.op == 0 || o.op&(o.op-1) != 0 {
			t.Errorf("%s = %#x is not a single non-zero bit", o.name, uint32(o.op))
		}
		if seen&o.op != 0 {
			t.Errorf("%s = %#x shares a bit with another GEX_OP_*", o.name, uint32(o.op))
		}
		seen |= o.op
		if got := o.op.String(); got != o.name {
			t.Errorf("String() = %q, want %q", got, o.name)
		}
	}
	if got, want := (gex.OPFAdd | gex.OPSet).String(), "GEX_OP_FADD|GEX_OP_SET"; got != want {
		t.Errorf("String() of a set = %q, want %q", got, want)
	}
}

func TestOPFetchingConversions(t *testing.T) {
	fetching, nonFetching := map[gex.OP]bool{}, map[gex.OP]bool{}
	for _, p := range fetchPairs {
		fetching[p.f], nonFetching[p.nf] = true, true
		if got := p.nf.ToFetching(); got != p.f {
			t.Errorf("GEX_OP_TO_FETCHING(%v) = %v, want %v", p.nf, got, p.f)
		}
		if got := p.f.ToNonFetching(); got != p.nf {
			t.Errorf("GEX_OP_TO_NONFETCHING(%v) = %v, want %v", p.f, got, p.nf)
		}
	}
	// Every other opcode (GET, USER, USER_NC, and the wrong direction) is
	// outside the macros' domain: 0.
	for _, o := range allOPs {
		if !nonFetching[o.op] {
			if got := o.op.ToFetching(); got != 0 {
				t.Errorf("GEX_OP_TO_FETCHING(%v) = %v, want 0 (not a non-fetching opcode)", o.op, got)
			}
		}
		if !fetching[o.op] {
			if got := o.op.ToNonFetching(); got != 0 {
				t.Errorf("GEX_OP_TO_NONFETCHING(%v) = %v, want 0 (not a fetching opcode)", o.op, got)
			}
		}
	}
	for _, bad := range []gex.OP{0, gex.OPAdd | gex.OPSub, gex.OPFAdd | gex.OPFSub, gex.OPSet | gex.OPCAS, 1 << 31} {
		if got := bad.ToFetching(); got != 0 {
			t.Errorf("GEX_OP_TO_FETCHING(%v) = %v, want 0", bad, got)
		}
		if got := bad.ToNonFetching(); got != 0 {
			t.Errorf("GEX_OP_TO_NONFETCHING(%v) = %v, want 0", bad, got)
		}
	}
}
