package gex_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Allocation budgets of remote atomics on the shared-memory path (STYLE.md:
// "Budgets are tests"): OpNBI and OpNB+Wait of a FADD on a U64, to self and
// to a mapped neighbourhood peer, do not allocate. Loop conduit only
// (testing.AllocsPerRun counts the whole process).

func runADAllocs(rep allocReporter, c *gex.Client, tm *gex.TM, r gex.Rank, addr gex.Addr) {
	ops := gex.OPFAdd | gex.OPAdd | gex.OPGet | gex.OPSet | gex.OPSwap | gex.OPFCAS | gex.OPCAS | gex.OPInc
	ad, err := gex.ADCreate[uint64](tm, gex.DTU64, ops, 0)
	if err != nil {
		rep.Fatalf("ADCreate: %v", err)
	}
	var res uint64 // outside the measured closures: the result must not escape
	assertNoAllocs(rep, fmt.Sprintf("to rank %d", r), 200, func(check func(error)) []allocCase {
		cases := []allocCase{
			{"OpNBI(FADD)", func() {
				check(ad.OpNBI(&res, r, addr, gex.OPFAdd, 1, 0, 0))
				check(c.NBIWait(gex.ECRMW, 0))
			}},
			{"OpNBI(ADD)", func() { check(ad.OpNBI(nil, r, addr, gex.OPAdd, 1, 0, 0)) }},
			{"OpNB(FADD)+Wait", func() {
				ev, err := ad.OpNB(&res, r, addr, gex.OPFAdd, 1, 0, 0)
				check(err)
				check(ev.Wait())
			}},
			{"OpNB(FADD)+Test", func() {
				ev, err := ad.OpNB(&res, r, addr, gex.OPFAdd, 1, 0, 0)
				check(err)
				check(ev.Test())
			}},
		}
		for _, op := range []gex.OP{gex.OPGet, gex.OPSet, gex.OPSwap, gex.OPFCAS, gex.OPCAS, gex.OPInc} {
			cases = append(cases, allocCase{fmt.Sprintf("OpNB(%v)+Wait", op), func() {
				ev, err := ad.OpNB(&res, r, addr, op, 1, 1, 0)
				check(err)
				check(ev.Wait())
			}}, allocCase{fmt.Sprintf("OpNBI(%v)", op), func() { check(ad.OpNBI(&res, r, addr, op, 1, 1, 0)) }})
		}
		return cases
	})
	// The other data types: FADD/ADD on each (integer FADD is inlined,
	// floating-point goes through the CPU engine).
	adTypeAllocs[uint32](rep, c, tm, gex.DTU32, r, addr+8)
	adTypeAllocs[int32](rep, c, tm, gex.DTI32, r, addr+12)
	adTypeAllocs[int64](rep, c, tm, gex.DTI64, r, addr+16)
	adTypeAllocs[float32](rep, c, tm, gex.DTFLT, r, addr+24)
	adTypeAllocs[float64](rep, c, tm, gex.DTDBL, r, addr+32)
}

func adTypeAllocs[T int32 | uint32 | int64 | float32 | float64](rep allocReporter, c *gex.Client, tm *gex.TM, dt gex.DT, r gex.Rank, addr gex.Addr) {
	ad, err := gex.ADCreate[T](tm, dt, gex.OPFAdd|gex.OPAdd, 0)
	if err != nil {
		rep.Fatalf("ADCreate(%v): %v", dt, err)
	}
	var res T
	assertNoAllocs(rep, fmt.Sprintf("on %v to rank %d", dt, r), 200, func(check func(error)) []allocCase {
		return []allocCase{
			{"OpNB(FADD)+Wait", func() {
				ev, err := ad.OpNB(&res, r, addr, gex.OPFAdd, 1, 0, 0)
				check(err)
				check(ev.Wait())
			}},
			{"OpNBI(ADD)", func() { check(ad.OpNBI(nil, r, addr, gex.OPAdd, 1, 0, 0)) }},
		}
	})
}

func TestADNoAllocsSelf(t *testing.T) { allocsOnSelf(t, runADAllocs) }

func TestADNoAllocsPeer(t *testing.T) { allocsOnPeer(t, runADAllocs) }

// adBench runs b.N FADDs (OpNB+Wait) on rank r's segment.
func adBench(b *testing.B, tm *gex.TM, r gex.Rank, addr gex.Addr) {
	ad, err := gex.ADCreate[uint64](tm, gex.DTU64, gex.OPFAdd, 0)
	if err != nil {
		b.Fatal(err)
	}
	var res uint64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev, err := ad.OpNB(&res, r, addr, gex.OPFAdd, 1, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := ev.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if res != uint64(b.N-1) {
		b.Fatalf("last FADD fetched %d, want %d", res, b.N-1)
	}
}

func BenchmarkADFaddSelf(b *testing.B) {
	tm, base := benchSelf(b)
	adBench(b, tm, 0, base+64)
}

func BenchmarkADFaddPeerMapped(b *testing.B) { adPeerBench(b, 0) }

func BenchmarkADFaddAMPath(b *testing.B) { adPeerBench(b, 1) }

func adPeerBench(b *testing.B, supernode int) {
	var base atomic.Uint64 // a fresh counter per run of the benchmark function
	rmaBench(b, supernode, func(b *testing.B, tm *gex.TM, peer gex.BoundSegment) {
		off := base.Add(8)
		adBench(b, tm, 1, peer.Owner+gex.Addr(off))
	})
}
