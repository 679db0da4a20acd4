package gex_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Conformance of remote atomics, GASNet-EX "Remote Atomic Operations"
// (gex_AD_*), on both of gexgo's paths (ad.go): a target whose segment is
// mapped here ("mapped": CPU atomics through the mapping) and one that is not
// ("unmapped", GASNET_SUPERNODE_MAXSIZE=1: the target's AM handler). Self is
// always mapped.
//
// The sentences the assertions come from:
//
//   - gex_OP_t: "'op0' denotes the value at the target location prior to the
//     operation ... 'expr' denotes the value of the target location after the
//     operation. Fetching operations always return 'op0'"; "the expressions
//     below are evaluated according to C language rules" (so integer
//     arithmetic wraps); MIN "expr = ((op0 < op1) ? op0 : op1)", MAX "expr =
//     ((op0 > op1) ? op0 : op1)", CAS "expr = ((op0 == op1) ? op2 : op0) With
//     a guarantee to be free of spurious failures".
//   - Deviations from IEEE 754 the spec permits: "(F)CAS *may* be performed as
//     if on integers of the same width" and MIN/MAX "could result in
//     non-conforming behavior with quiet NaNs". gexgo documents its choices in
//     atomic_unsafe.go: (F)CAS compares bit patterns; a NaN operand or target
//     leaves a MIN/MAX target unchanged.
//   - "These operations are guaranteed to be atomic with respect to all other
//     accesses to the same target location made using the same AD, from any
//     rank."
//   - "Successful synchronization of any remote atomic operation means the
//     operation has been performed atomically ... and any remote atomic issued
//     subsequently by any thread on any rank with the same AD and target
//     location will observe the Write".
//   - GEX_FLAG_AD_REL / GEX_FLAG_AD_ACQ: release covers "accesses to memory by
//     any GASNet operations synchronized by that thread before initiation";
//     acquire: "memory accesses by the processor, issued after the
//     synchronization call, shall not be reordered before that call".
//   - Atomic access phases: "FOR *THIS* RELEASE we believe it is sufficient to
//     separate atomic access phases by a barrier synchronization".
//   - NBI: "For the opcodes GEX_OP_SET and GEX_OP_GET, one should use
//     GEX_EC_PUT and GEX_EC_GET, respectively, to check completion. All other
//     opcodes correspond to an event category of GEX_EC_RMW."

// adBits is v's bit pattern (sign-extension free).
func adBits[T gex.ADType](v T) uint64 {
	switch x := any(v).(type) {
	case int32:
		return uint64(uint32(x))
	case uint32:
		return uint64(x)
	case int64:
		return uint64(x)
	case uint64:
		return x
	case float32:
		return uint64(math.Float32bits(x))
	case float64:
		return math.Float64bits(x)
	}
	panic("unreachable")
}

// adFromBits is the converse of adBits.
func adFromBits[T gex.ADType](b uint64) T {
	var z T
	switch any(z).(type) {
	case int32:
		return any(int32(uint32(b))).(T)
	case uint32:
		return any(uint32(b)).(T)
	case int64:
		return any(int64(b)).(T)
	case uint64:
		return any(b).(T)
	case float32:
		return any(math.Float32frombits(uint32(b))).(T)
	}
	return any(math.Float64frombits(b)).(T)
}

func adSize[T gex.ADType]() int {
	var z T
	switch any(z).(type) {
	case int32, uint32, float32:
		return 4
	}
	return 8
}

func isNaN[T gex.ADType](v T) bool { return v != v }

// adModel is the spec's 'expr' for op on target value v with operands op1,
// op2 (with gexgo's documented floating-point choices).
func adModel[T gex.ADType](op gex.OP, v, op1, op2 T) T {
	switch op {
	case gex.OPGet:
		return v
	case gex.OPSet, gex.OPSwap:
		return op1
	case gex.OPCAS, gex.OPFCAS:
		if adBits(v) == adBits(op1) {
			return op2
		}
		return v
	}
	if nf := op.ToNonFetching(); nf != 0 {
		op = nf
	}
	switch op {
	case gex.OPAdd:
		return v + op1
	case gex.OPMult:
		return v * op1
	case gex.OPSub:
		return v - op1
	case gex.OPInc:
		return v + 1
	case gex.OPDec:
		return v - 1
	case gex.OPMin:
		if isNaN(v) || isNaN(op1) {
			return v // documented in atomic_unsafe.go
		}
		if v < op1 {
			return v
		}
		return op1
	case gex.OPMax:
		if isNaN(v) || isNaN(op1) {
			return v
		}
		if v > op1 {
			return v
		}
		return op1
	case gex.OPAnd:
		return adFromBits[T](adBits(v) & adBits(op1))
	case gex.OPOr:
		return adFromBits[T](adBits(v) | adBits(op1))
	case gex.OPXor:
		return adFromBits[T](adBits(v) ^ adBits(op1))
	}
	panic("adModel: opcode " + op.String())
}

// adSame compares values by bit pattern, except that any two NaNs produced by
// arithmetic are the same (C leaves the NaN's payload to the hardware).
func adSame[T gex.ADType](op gex.OP, got, want T) bool {
	if adBits(got) == adBits(want) {
		return true
	}
	arith := op&(gex.OPSet|gex.OPSwap|gex.OPCAS|gex.OPFCAS|gex.OPGet|gex.OPMin|gex.OPMax|gex.OPFMin|gex.OPFMax) == 0
	return arith && isNaN(got) && isNaN(want)
}

// adFetching reports whether op writes *result.
func adFetching(op gex.OP) bool {
	return op.ToNonFetching() != 0 || op == gex.OPGet
}

// adEC is op's NBI category.
func adEC(op gex.OP) gex.EC {
	switch op {
	case gex.OPSet:
		return gex.ECPut
	case gex.OPGet:
		return gex.ECGet
	}
	return gex.ECRMW
}

// adValidOps are the atomic opcodes valid for dt: all of them for integers,
// all but the bit-wise ones for floating point.
func adValidOps(dt gex.DT) []gex.OP {
	var ops []gex.OP
	for _, o := range allOPs {
		if o.op == gex.OPUser || o.op == gex.OPUserNC {
			continue
		}
		if (dt == gex.DTFLT || dt == gex.DTDBL) && o.op&(gex.OPAnd|gex.OPOr|gex.OPXor|gex.OPFAnd|gex.OPFOr|gex.OPFXor) != 0 {
			continue
		}
		ops = append(ops, o.op)
	}
	return ops
}

func adOpsOf(ops []gex.OP) gex.OP {
	var s gex.OP
	for _, o := range ops {
		s |= o
	}
	return s
}

// adDo runs one atomic and waits for it: NB+Wait, or NBI+NBIWait on op's own
// category only (so a wrong category fails the model check or hangs the
// test's timeout instead of passing silently).
func adDo[T gex.ADType](e *rankEnv, ad *gex.AD[T], nbi bool, r gex.Rank, a gex.Addr, op gex.OP, op1, op2 T, flags gex.Flags) T {
	e.t.Helper()
	var res T
	if nbi {
		e.Check(ad.OpNBI(&res, r, a, op, op1, op2, flags), fmt.Sprintf("OpNBI(%v)", op))
		e.Check(e.c.NBIWait(adEC(op), 0), fmt.Sprintf("NBIWait(%v) after OpNBI(%v)", adEC(op), op))
	} else {
		ev, err := ad.OpNB(&res, r, a, op, op1, op2, flags)
		e.Check(err, fmt.Sprintf("OpNB(%v)", op))
		e.Check(ev.Wait(), fmt.Sprintf("Wait after OpNB(%v)", op))
	}
	return res
}

// adModelBody applies every valid opcode to every (op0, op1) pair of vals at
// this rank's slot in its own segment and in the next rank's, and checks the
// fetched value and the new target value against adModel. It returns after
// an RMA read (after a barrier: a new access phase) of the last values.
func adModelBody[T gex.ADType](e *rankEnv, dt gex.DT, vals []T, slot uint64) {
	ops := adValidOps(dt)
	ad, err := gex.ADCreate[T](e.tm, dt, adOpsOf(ops), 0)
	e.Check(err, "ADCreate("+dt.String()+")")
	peer := (e.rank + 1) % e.size
	targets := []gex.Rank{e.rank, peer}
	last := map[gex.Rank]T{}
	n := 0
	for _, r := range targets {
		addr := rmaSeg(e, r).Owner + gex.Addr(slot+uint64(e.rank)*8)
		for _, op := range ops {
			for i, v := range vals {
				for j, op1 := range vals {
					op2 := vals[(i+j+1)%len(vals)]
					n++
					nbi := n%2 == 0
					adDo(e, ad, nbi, r, addr, gex.OPSet, v, 0, 0)
					got := adDo(e, ad, !nbi, r, addr, op, op1, op2, 0)
					after := adDo(e, ad, nbi, r, addr, gex.OPGet, 0, 0, 0)
					want := adModel(op, v, op1, op2)
					what := fmt.Sprintf("%v %v on rank %d: op0=%v op1=%v op2=%v", dt, op, r, v, op1, op2)
					if adFetching(op) && adBits(got) != adBits(v) {
						e.Fatalf("%s: fetched %v (%#x), want op0 %v (%#x)", what, got, adBits(got), v, adBits(v))
					}
					if !adSame(op, after, want) {
						e.Fatalf("%s: target is %v (%#x) afterwards, want %v (%#x)", what, after, adBits(after), want, adBits(want))
					}
					last[r] = after
				}
			}
		}
	}
	// A new access phase: RMA reads of what the atomics left.
	e.Barrier()
	for _, r := range targets {
		addr := rmaSeg(e, r).Owner + gex.Addr(slot+uint64(e.rank)*8)
		buf := make([]byte, adSize[T]())
		e.Check(e.tm.GetBlocking(buf, r, addr, 0), "GetBlocking")
		var b uint64
		if len(buf) == 4 {
			b = uint64(binary.NativeEndian.Uint32(buf))
		} else {
			b = binary.NativeEndian.Uint64(buf)
		}
		if b != adBits(last[r]) {
			e.Fatalf("%v: RMA get of rank %d's slot after the barrier reads %#x, want %#x", dt, r, b, adBits(last[r]))
		}
	}
	e.Barrier()
	e.Check(ad.Destroy(), "Destroy")
}

// TestADModel: every data type × every opcode valid for it × interesting
// operands, on self and on a peer, against the sequential model.
func TestADModel(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: sn}, func(e *rankEnv) {
			adModelBody(e, gex.DTI32, []int32{0, 1, -1, math.MinInt32, math.MaxInt32, 12345}, 0)
			adModelBody(e, gex.DTU32, []uint32{0, 1, math.MaxUint32, 1 << 31, 0x5a5a5a5a, 7}, 64)
			adModelBody(e, gex.DTI64, []int64{0, 1, -1, math.MinInt64, math.MaxInt64, -123456789012}, 128)
			adModelBody(e, gex.DTU64, []uint64{0, 1, math.MaxUint64, 1 << 63, 0x5a5a5a5a5a5a5a5a, 3}, 192)
			negZero32 := float32(math.Copysign(0, -1))
			adModelBody(e, gex.DTFLT, []float32{0, negZero32, 1.5, -2.25, float32(math.NaN()), float32(math.Inf(1)), math.MaxFloat32, 0.1}, 256)
			adModelBody(e, gex.DTDBL, []float64{0, math.Copysign(0, -1), 1.5, -2.25, math.NaN(), math.Inf(-1), math.MaxFloat64, 1e-300}, 320)
		})
	})
}

// adCounterN is the number of operations per rank in the contention tests:
// the full count on smp, fewer on goroutine ranks (-race is much slower; the
// property is the same).
func adCounterN(e *rankEnv, full int) int {
	if e.loop || raceEnabled || os.Getenv("GEX_CONDUIT") == "tcp" { // over TCP an op takes tens of us
		return full / 20
	}
	return full
}

// TestADCounter: "atomic with respect to all other accesses to the same
// target location made using the same AD, from any rank": 4 ranks' FADDs
// (U64), FSUBs (I64) and INC/DECs (U32) on counters at rank 0 lose nothing.
func TestADCounter(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 4, jobOpts{segSize: 1 << 16, supernode: sn}, adCounter)
	})
}

func adCounter(e *rankEnv) {
	base := rmaSeg(e, 0).Owner
	cU64, cI64, cU32 := base, base+64, base+128
	adU64, err := gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPFAdd|gex.OPGet, 0)
	e.Check(err, "ADCreate(U64)")
	adI64, err := gex.ADCreate[int64](e.tm, gex.DTI64, gex.OPFSub|gex.OPGet, 0)
	e.Check(err, "ADCreate(I64)")
	adU32, err := gex.ADCreate[uint32](e.tm, gex.DTU32, gex.OPInc|gex.OPFDec|gex.OPGet, 0)
	e.Check(err, "ADCreate(U32)")
	e.Barrier()

	// U64 FADD(1): NB+Wait and batches of OpNBI+NBIWait(ECRMW) alternate.
	// Each fetch is op0 of one increment, so it is below the final total,
	// and this rank's NB fetches increase (each observes the earlier write).
	n := adCounterN(e, 100_000)
	total := uint64(n) * uint64(e.size)
	var batch [64]uint64
	var prev uint64
	var seenNB bool
	for i := 0; i < n; {
		if (i/256)%2 == 0 {
			ev, err := adU64.OpNB(&batch[0], 0, cU64, gex.OPFAdd, 1, 0, 0)
			e.Check(err, "OpNB(FADD)")
			e.Check(ev.Wait(), "Wait(FADD)")
			if batch[0] >= total || (seenNB && batch[0] <= prev) {
				e.Fatalf("FADD %d fetched %d (previous NB fetch %d, total %d)", i, batch[0], prev, total)
			}
			prev, seenNB = batch[0], true
			i++
			continue
		}
		k := min(len(batch), n-i)
		for j := 0; j < k; j++ {
			e.Check(adU64.OpNBI(&batch[j], 0, cU64, gex.OPFAdd, 1, 0, 0), "OpNBI(FADD)")
		}
		e.Check(e.c.NBIWait(gex.ECRMW, 0), "NBIWait(ECRMW)")
		for j := 0; j < k; j++ {
			if batch[j] >= total {
				e.Fatalf("NBI FADD fetched %d, total is %d", batch[j], total)
			}
		}
		i += k
	}

	// I64 FSUB(3) and U32 INC / FDEC, fewer.
	m := n / 4
	var r64 int64
	var r32 uint32
	for i := 0; i < m; i++ {
		if i%2 == 0 {
			e.Check(adI64.OpNBI(&r64, 0, cI64, gex.OPFSub, 3, 0, 0), "OpNBI(FSUB)")
			e.Check(e.c.NBIWait(gex.ECRMW, 0), "NBIWait(ECRMW)")
		} else {
			ev, err := adI64.OpNB(&r64, 0, cI64, gex.OPFSub, 3, 0, 0)
			e.Check(err, "OpNB(FSUB)")
			e.Check(ev.Wait(), "Wait(FSUB)")
		}
		if r64 > 0 || r64%3 != 0 {
			e.Fatalf("FSUB fetched %d, want a non-positive multiple of 3", r64)
		}
		e.Check(adU32.OpNBI(nil, 0, cU32, gex.OPInc, 0, 0, 0), "OpNBI(INC)")
		e.Check(adU32.OpNBI(nil, 0, cU32, gex.OPInc, 0, 0, 0), "OpNBI(INC)")
		ev, err := adU32.OpNB(&r32, 0, cU32, gex.OPFDec, 0, 0, 0)
		e.Check(err, "OpNB(FDEC)")
		e.Check(ev.Wait(), "Wait(FDEC)")
		if r32 == 0 {
			e.Fatalf("FDEC fetched 0 after this rank's two INCs")
		}
	}
	e.Check(e.c.NBIWait(gex.ECRMW, 0), "NBIWait(ECRMW)")
	e.Barrier()
	var got64 uint64
	adDo(e, adU64, false, 0, cU64, gex.OPGet, 0, 0, 0)
	got64 = adDo(e, adU64, true, 0, cU64, gex.OPGet, 0, 0, 0)
	if got64 != total {
		e.Fatalf("U64 counter after %d FADDs from each of %d ranks is %d, want %d", n, e.size, got64, total)
	}
	if got := adDo(e, adI64, false, 0, cI64, gex.OPGet, 0, 0, 0); got != -3*int64(m)*int64(e.size) {
		e.Fatalf("I64 counter is %d, want %d", got, -3*int64(m)*int64(e.size))
	}
	if got := adDo(e, adU32, false, 0, cU32, gex.OPGet, 0, 0, 0); got != uint32(m)*uint32(e.size) {
		e.Fatalf("U32 counter is %d, want %d", got, uint32(m)*uint32(e.size))
	}
	e.Logf("counter: %d FADDs, %d FSUBs, %d INC+INC+FDEC per rank", n, m, m)
}

// TestADSpinLock: a lock built from FCAS(0 -> me) with GEX_FLAG_AD_ACQ and
// SET(0) with GEX_FLAG_AD_REL protects a non-atomic counter at rank 0 that
// every rank increments with an RMA get and put; no increment is lost.
func TestADSpinLock(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 4, jobOpts{segSize: 1 << 16, supernode: sn}, adSpinLock)
	})
}

func adSpinLock(e *rankEnv) {
	base := rmaSeg(e, 0).Owner
	lock, counter := base, base+256
	ad, err := gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPFCAS|gex.OPSet|gex.OPGet, 0)
	e.Check(err, "ADCreate")
	if e.rank == 0 {
		fill(e.seg.Bytes()[:512], 0)
	}
	e.Barrier() // the RMA/CPU phase before the atomic phase
	n := adCounterN(e, 2_000)
	me := uint64(e.rank) + 1
	var buf [8]byte
	for i := 0; i < n; i++ {
		for {
			var old uint64
			ev, err := ad.OpNB(&old, 0, lock, gex.OPFCAS, 0, me, gex.FlagADAcq)
			e.Check(err, "OpNB(FCAS, ACQ)")
			e.Check(ev.Wait(), "Wait(FCAS)")
			if old == 0 {
				break
			}
			if old > uint64(e.size) {
				e.Fatalf("lock word holds %d", old)
			}
			// Rank 0's FCAS on its own lock completes in the call without
			// polling: poll, so the holder's release reaches it on path (b).
			e.Check(e.c.Poll(), "Poll")
		}
		if h := adDo(e, ad, false, 0, lock, gex.OPGet, 0, 0, 0); h != me {
			e.Fatalf("lock held by %d while this rank (%d) is inside", h, me)
		}
		e.Check(e.tm.GetBlocking(buf[:], 0, counter, 0), "GetBlocking(counter)")
		binary.NativeEndian.PutUint64(buf[:], binary.NativeEndian.Uint64(buf[:])+1)
		e.Check(e.tm.PutBlocking(0, counter, buf[:], 0), "PutBlocking(counter)")
		adDo(e, ad, i%2 == 0, 0, lock, gex.OPSet, 0, 0, gex.FlagADRel)
	}
	e.Barrier()
	e.Check(e.tm.GetBlocking(buf[:], 0, counter, 0), "GetBlocking(counter)")
	if got, want := binary.NativeEndian.Uint64(buf[:]), uint64(n)*uint64(e.size); got != want {
		e.Fatalf("counter protected by the lock is %d after %d increments by each of %d ranks, want %d", got, n, e.size, want)
	}
}

// TestADFCASNoSpuriousFailure: CAS is "free of spurious failures as from cache
// events": when the target holds op1, FCAS succeeds every time, here while
// the other ranks hammer neighbouring words of the same cache line.
func TestADFCASNoSpuriousFailure(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 4, jobOpts{segSize: 1 << 16, supernode: sn}, func(e *rankEnv) {
			ad32, err := gex.ADCreate[uint32](e.tm, gex.DTU32, gex.OPFCAS|gex.OPCAS|gex.OPGet, 0)
			e.Check(err, "ADCreate(U32)")
			ad64, err := gex.ADCreate[int64](e.tm, gex.DTI64, gex.OPFCAS|gex.OPGet, 0)
			e.Check(err, "ADCreate(I64)")
			e.Barrier()
			n := adCounterN(e, 20_000)
			w32 := rmaSeg(e, 0).Owner + gex.Addr(4*e.rank)      // one line, 4 ranks
			w64 := rmaSeg(e, 1).Owner + 64 + gex.Addr(8*e.rank) // another, at rank 1
			for i := 0; i < n; i++ {
				var got32 uint32
				ev, err := ad32.OpNB(&got32, 0, w32, gex.OPFCAS, uint32(i), uint32(i+1), 0)
				e.Check(err, "OpNB(FCAS)")
				e.Check(ev.Wait(), "Wait(FCAS)")
				if got32 != uint32(i) {
					e.Fatalf("FCAS(%d -> %d) on a word only this rank writes fetched %d", i, i+1, got32)
				}
				var got64 int64
				e.Check(ad64.OpNBI(&got64, 1, w64, gex.OPFCAS, -int64(i), -int64(i+1), 0), "OpNBI(FCAS)")
				e.Check(e.c.NBIWait(gex.ECRMW, 0), "NBIWait(ECRMW)")
				if got64 != -int64(i) {
					e.Fatalf("FCAS(%d -> %d) on a word only this rank writes fetched %d", -i, -i-1, got64)
				}
			}
			// A failing CAS leaves the target alone.
			e.Check(ad32.OpNBI(nil, 0, w32, gex.OPCAS, uint32(n+7), 0, 0), "OpNBI(CAS)")
			e.Check(e.c.NBIWait(gex.ECRMW, 0), "NBIWait(ECRMW)")
			if got := adDo(e, ad32, false, 0, w32, gex.OPGet, 0, 0, 0); got != uint32(n) {
				e.Fatalf("word is %d after %d successful FCAS and a failing CAS, want %d", got, n, n)
			}
		})
	})
}

// TestADMessagePassing: rank 0 puts a block into rank 1's segment, then SETs
// a flag there with GEX_FLAG_AD_REL; rank 1 GETs the flag with
// GEX_FLAG_AD_ACQ until it sees the round, and then its own loads of the
// block must see all of it. Rank 1 answers the same way, so rank 0 writes
// the next round's block only after rank 1 read this one.
func TestADMessagePassing(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: sn}, adMessagePassing)
	})
}

func adMessagePassing(e *rankEnv) {
	const block = 8192
	ad, err := gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPSet|gex.OPGet, 0)
	e.Check(err, "ADCreate")
	e.Barrier()
	rounds := 1000
	if e.loop {
		rounds = 200
	}
	other := 1 - e.rank
	flag := rmaSeg(e, other).Owner    // the other rank's flag word
	myFlag := e.seg.QueryAddr()       // this rank's flag word
	data := rmaSeg(e, 1).Owner + 4096 // rank 1's block
	waitFlag := func(round uint64) {
		for {
			if v := adDo(e, ad, round%2 == 0, e.rank, myFlag, gex.OPGet, 0, 0, gex.FlagADAcq); v == round {
				return
			} else if v > round {
				e.Fatalf("flag is %d in round %d", v, round)
			}
			// The flag is local (a GET that completes in the call): poll, so
			// that the peer's puts to this rank make progress on path (b).
			e.Check(e.c.Poll(), "Poll")
		}
	}
	for round := uint64(1); round <= uint64(rounds); round++ {
		if e.rank == 0 {
			src := rmaData(round, block)
			if round%2 == 0 {
				e.Check(e.tm.PutBlocking(1, data, src, 0), "PutBlocking(block)")
			} else {
				e.Check(e.tm.PutNBI(1, data, src, gex.EventNow, 0), "PutNBI(block)")
				e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut)")
			}
			adDo(e, ad, round%3 == 0, 1, flag, gex.OPSet, round, 0, gex.FlagADRel)
			waitFlag(round)
		} else {
			waitFlag(round)
			wantBytes(e, fmt.Sprintf("round %d: block after the acquire", round), e.seg.Bytes()[4096:4096+block], rmaData(round, block))
			adDo(e, ad, round%3 == 0, 0, flag, gex.OPSet, round, 0, gex.FlagADRel)
		}
	}
}

// TestADErrors: gexgo diagnoses the spec's preconditions of gex_AD_Create
// ("'ops' is a bitwise-OR of one or more GEX_OP_* constants", only "valid
// combinations" of dt and ops, the FAVOR flags are "mutually-exclusive") and
// of gex_AD_Op* ("The data type associated with 'ad' and that of the
// gex_AD_Op*() call must be equal", "The 'opcode' must be a single GEX_OP_*
// value", "must be a member of the set of opcodes passed to gex_AD_Create()",
// result_p "must be a valid pointer", tgt_addr "must be properly aligned",
// "the target location must be contained entirely within the bound segment",
// tgt_rank "must be a valid rank", "At most one flag" of MY_RANK/MY_NBRHD and
// what each asserts) with GASNET_ERR_BAD_ARG naming the argument. The query
// calls return what was created, and CData "is NULL for a newly created AD".
func TestADErrors(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: sn}, func(e *rankEnv) { adErrors(e, sn) })
	})
}

func adErrors(e *rankEnv, sn int) {
	_, err := gex.ADCreate[int32](nil, gex.DTI32, gex.OPAdd, 0)
	expectRMAErr(e, "ADCreate(nil tm)", err, "tm")
	_, err = gex.ADCreate[int32](e.tm, gex.DTU32, gex.OPAdd, 0)
	expectRMAErr(e, "ADCreate[int32](DTU32)", err, "dt", "GEX_DT_U32")
	_, err = gex.ADCreate[float64](e.tm, gex.DTFLT, gex.OPAdd, 0)
	expectRMAErr(e, "ADCreate[float64](DTFLT)", err, "dt")
	_, err = gex.ADCreate[uint64](e.tm, gex.DTU64, 0, 0)
	expectRMAErr(e, "ADCreate(ops 0)", err, "ops")
	for _, op := range []gex.OP{gex.OPUser, gex.OPUserNC, gex.OPAdd | gex.OPUser} {
		_, err = gex.ADCreate[uint64](e.tm, gex.DTU64, op, 0)
		expectRMAErr(e, fmt.Sprintf("ADCreate(ops %v)", op), err, "ops")
	}
	for _, op := range []gex.OP{gex.OPAnd, gex.OPOr, gex.OPXor, gex.OPFAnd, gex.OPFOr, gex.OPFXor} {
		_, err = gex.ADCreate[float32](e.tm, gex.DTFLT, gex.OPAdd|op, 0)
		expectRMAErr(e, fmt.Sprintf("ADCreate(FLT, %v)", op), err, "bit-wise", op.String())
		_, err = gex.ADCreate[float64](e.tm, gex.DTDBL, op, 0)
		expectRMAErr(e, fmt.Sprintf("ADCreate(DBL, %v)", op), err, "bit-wise")
	}
	_, err = gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPAdd, gex.FlagImmediate)
	expectRMAErr(e, "ADCreate(flags IMMEDIATE)", err, "flags")
	_, err = gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPAdd, gex.FlagADFavorMyRank|gex.FlagADFavorRemote)
	expectRMAErr(e, "ADCreate(two FAVOR flags)", err, "flags", "mutually exclusive")

	ops := gex.OPFAdd | gex.OPSet | gex.OPGet | gex.OPAdd
	ad, err := gex.ADCreate[uint64](e.tm, gex.DTU64, ops, gex.FlagADFavorMyNbrhd)
	e.Check(err, "ADCreate")
	if ad.QueryTM() != e.tm || ad.QueryDT() != gex.DTU64 || ad.QueryOps() != ops || ad.QueryFlags() != gex.FlagADFavorMyNbrhd {
		e.Fatalf("queries return tm %p dt %v ops %v flags %v, want %p %v %v %v", ad.QueryTM(), ad.QueryDT(), ad.QueryOps(), ad.QueryFlags(), e.tm, gex.DTU64, ops, gex.FlagADFavorMyNbrhd)
	}
	if v := ad.QueryCData(); v != nil {
		e.Fatalf("QueryCData of a new AD = %v, want nil", v)
	}
	ad.SetCData("hello")
	if v := ad.QueryCData(); v != "hello" {
		e.Fatalf("QueryCData after SetCData = %v", v)
	}

	peer := 1 - e.rank
	pseg := rmaSeg(e, peer)
	a := pseg.Owner + 1024 + gex.Addr(8*e.rank)
	var res uint64
	type opCall struct {
		name string
		f    func() error
	}
	both := func(name string, result *uint64, r gex.Rank, addr gex.Addr, op gex.OP, flags gex.Flags) []opCall {
		return []opCall{
			{"OpNB " + name, func() error { _, err := ad.OpNB(result, r, addr, op, 1, 0, flags); return err }},
			{"OpNBI " + name, func() error { return ad.OpNBI(result, r, addr, op, 1, 0, flags) }},
		}
	}
	cases := []struct {
		calls []opCall
		words []string
	}{
		{both("opcode not in the domain", &res, peer, a, gex.OPFCAS, 0), []string{"opcode", "GEX_OP_FCAS"}},
		{both("two opcodes", &res, peer, a, gex.OPAdd|gex.OPSet, 0), []string{"opcode", "single"}},
		{both("opcode 0", &res, peer, a, 0, 0), []string{"opcode"}},
		{both("nil result", nil, peer, a, gex.OPFAdd, 0), []string{"result"}},
		{both("misaligned", &res, peer, a+4, gex.OPAdd, 0), []string{"aligned"}},
		{both("outside the segment", &res, peer, pseg.Owner+gex.Addr(pseg.Size), gex.OPAdd, 0), []string{"outside", "segment"}},
		{both("straddling the end", &res, peer, pseg.Owner+gex.Addr(pseg.Size)-4, gex.OPAdd, 0), []string{"aligned"}},
		{both("below the segment", &res, peer, pseg.Owner-8, gex.OPAdd, 0), []string{"outside"}},
		{both("bad rank", &res, 2, a, gex.OPAdd, 0), []string{"rank", "2"}},
		{both("MY_RANK to a peer", &res, peer, a, gex.OPAdd, gex.FlagADMyRank), []string{"GEX_FLAG_AD_MY_RANK"}},
		{both("MY_RANK|MY_NBRHD", &res, e.rank, e.seg.QueryAddr(), gex.OPAdd, gex.FlagADMyRank|gex.FlagADMyNbrhd), []string{"mutually exclusive"}},
		{both("bad flags", &res, peer, a, gex.OPAdd, gex.FlagPeerNeverSelf), []string{"flags"}},
		{both("jobrank out of range", &res, 5, a, gex.OPAdd, gex.FlagRankIsJobrank), []string{"5"}},
	}
	if sn == 1 {
		cases = append(cases, struct {
			calls []opCall
			words []string
		}{both("MY_NBRHD to another neighbourhood", &res, peer, a, gex.OPAdd, gex.FlagADMyNbrhd), []string{"GEX_FLAG_AD_MY_NBRHD"}})
	}
	for _, c := range cases {
		for _, call := range c.calls {
			expectRMAErr(e, call.name, call.f(), c.words...)
		}
	}
	if e.c.NBITest(gex.ECAll, 0) != nil {
		e.Fatalf("a refused OpNBI left an NBI operation pending")
	}

	// The flags that must work: jobrank naming, PEER_SEG_OFFSET, MY_RANK to
	// self, MY_NBRHD to a neighbour, ACQ|REL, IMMEDIATE (a no-op is allowed).
	e.Barrier()
	want := uint64(0)
	add := func(r gex.Rank, addr gex.Addr, flags gex.Flags) {
		ev, err := ad.OpNB(nil, r, addr, gex.OPAdd, 1, 0, flags)
		if err == gex.ErrNoOp && flags&gex.FlagImmediate != 0 {
			return
		}
		e.Check(err, fmt.Sprintf("OpNB(ADD, flags %v)", flags))
		e.Check(ev.Wait(), "Wait")
		if r == peer {
			want++
		}
	}
	add(peer, a, 0)
	add(peer, a, gex.FlagRankIsJobrank)
	add(peer, a-pseg.Owner, gex.FlagPeerSegOffset)
	add(peer, a-pseg.Owner, gex.FlagPeerSegOffset|gex.FlagRankIsJobrank|gex.FlagADAcq|gex.FlagADRel)
	add(e.rank, e.seg.QueryAddr()+512, gex.FlagADMyRank)
	add(e.rank, e.seg.QueryAddr()+512, gex.FlagADMyNbrhd)
	if sn == 0 {
		add(peer, a, gex.FlagADMyNbrhd)
	}
	add(peer, a, gex.FlagImmediate)
	if got := adDo(e, ad, false, peer, a, gex.OPGet, 0, 0, 0); got != want {
		e.Fatalf("after %d ADDs with accepted flags the target is %d", want, got)
	}
	e.Barrier()
	e.Check(ad.Destroy(), "Destroy")
	expectRMAErr(e, "second Destroy", ad.Destroy(), "destroyed")
	_, err = ad.OpNB(&res, peer, a, gex.OPGet, 0, 0, 0)
	expectRMAErr(e, "OpNB on a destroyed AD", err, "destroyed")
	// The FADD/ADD path written out in OpNB/OpNBI refuses too, and leaves
	// the target as it was (read through a live domain).
	_, err = ad.OpNB(&res, peer, a, gex.OPFAdd, 1, 0, 0)
	expectRMAErr(e, "OpNB(FADD) on a destroyed AD", err, "destroyed")
	expectRMAErr(e, "OpNBI(ADD) on a destroyed AD", ad.OpNBI(nil, peer, a, gex.OPAdd, 1, 0, 0), "destroyed")
	live, err := gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPGet, 0)
	e.Check(err, "ADCreate (live)")
	if got := adDo(e, live, false, peer, a, gex.OPGet, 0, 0, 0); got != want {
		e.Fatalf("after refused operations on a destroyed AD the target is %d, want %d", got, want)
	}
	e.Check(live.Destroy(), "Destroy (live)")
}

// TestADNBICategories: "For the opcodes GEX_OP_SET and GEX_OP_GET, one should
// use GEX_EC_PUT and GEX_EC_GET, respectively, to check completion. All other
// opcodes correspond to an event category of GEX_EC_RMW." With the target
// parked inside a handler (path (b)), an OpNBI is pending in its own category
// only.
func TestADNBICategories(t *testing.T) {
	p := newParking(3)
	loopJob(t, 2, jobOpts{segSize: 1 << 16, supernode: 1}, func(e *rankEnv) {
		p.register(e)
		ad, err := gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPSet|gex.OPGet|gex.OPFAdd, 0)
		e.Check(err, "ADCreate")
		e.Barrier()
		if e.rank != 0 {
			return
		}
		defer p.releaseAll()
		a := rmaSeg(e, 1).Owner + 64
		var res uint64
		for k, tc := range []struct {
			op   gex.OP
			op1  uint64
			ec   gex.EC
			want uint64 // the fetched value, for fetching ops
		}{{gex.OPSet, 41, gex.ECPut, 0}, {gex.OPFAdd, 1, gex.ECRMW, 41}, {gex.OPGet, 0, gex.ECGet, 42}} {
			p.park(e, 1, k)
			res = 0
			e.Check(ad.OpNBI(&res, 1, a, tc.op, tc.op1, 0, 0), fmt.Sprintf("OpNBI(%v)", tc.op))
			notReadyN(e, fmt.Sprintf("NBITest(%v) with %v pending", tc.ec, tc.op), 50, func() error { return e.c.NBITest(tc.ec, 0) })
			if err := e.c.NBITest(gex.ECAll&^tc.ec, 0); err != nil {
				e.Fatalf("NBITest of the other categories with only %v pending: %v", tc.op, err)
			}
			p.unpark(e, 1, k)
			e.Check(e.c.NBIWait(tc.ec, 0), fmt.Sprintf("NBIWait(%v)", tc.ec))
			if tc.op != gex.OPSet && res != tc.want {
				e.Fatalf("%v fetched %d, want %d", tc.op, res, tc.want)
			}
		}
	})
}
