package gex_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
)

// BenchmarkMapped times every spec-shaped call that has a mapped fast path
// (rma_fast_unsafe.go) on this rank's own segment, with what each comes
// down to measured in the same run: copy() of 8 bytes whose length is known
// only at run time (ref/copy8) and a sync/atomic add (ref/atomicAdd). The
// machine's load moves all rows together; compare rows of one run. Each
// iteration of b.Loop is a batch of 10000 calls.
func BenchmarkMapped(b *testing.B) {
	tm, base := benchSelf(b)
	c := tm.QueryClient()
	ad64, err := gex.ADCreate[uint64](tm, gex.DTU64, gex.OPFAdd|gex.OPAdd|gex.OPGet, 0)
	if err != nil {
		b.Fatal(err)
	}
	ad32, err := gex.ADCreate[uint32](tm, gex.DTU32, gex.OPFAdd, 0)
	if err != nil {
		b.Fatal(err)
	}
	src, dst := make([]byte, 8), make([]byte, 8)
	a := base + 64
	var r64 uint64
	var r32 uint32
	var word atomic.Uint64
	n8 := len(src) // 8, unknown to the compiler inside copy8
	for _, bc := range []struct {
		name string
		f    func() error
	}{
		{"ref/copy8", func() error { copy(dst[:n8], src[:n8]); return nil }},
		{"ref/atomicAdd", func() error { word.Add(1); return nil }},
		{"ref/call8", func() error { return call8(dst, src) }},
		{"ref/callAdd", func() error { r64 = callAdd(&word); return nil }},
		{"PutBlocking8", func() error { return tm.PutBlocking(0, a, src, 0) }},
		{"GetBlocking8", func() error { return tm.GetBlocking(dst, 0, a, 0) }},
		{"PutNBI8", func() error { return tm.PutNBI(0, a, src, nil, 0) }},
		{"PutNBI8Group", func() error { return tm.PutNBI(0, a, src, gex.EventGroup, 0) }},
		{"GetNBI8", func() error { return tm.GetNBI(dst, 0, a, 0) }},
		{"PutNB8+Wait", func() error { return waitNB(tm.PutNB(0, a, src, nil, 0)) }},
		{"GetNB8+Wait", func() error { return waitNB(tm.GetNB(dst, 0, a, 0)) }},
		{"PutBlockingVal8", func() error { return tm.PutBlockingVal(0, a, 7, 8, 0) }},
		{"PutNBIVal8", func() error { return tm.PutNBIVal(0, a, 7, 8, 0) }},
		{"PutNBVal8+Wait", func() error { return waitNB(tm.PutNBVal(0, a, 7, 8, 0)) }},
		{"GetBlockingVal8", func() error { _, err := tm.GetBlockingVal(0, a, 8, 0); return err }},
		{"PutBlockingVal4", func() error { return tm.PutBlockingVal(0, a, 7, 4, 0) }},
		{"GetBlockingVal4", func() error { _, err := tm.GetBlockingVal(0, a, 4, 0); return err }},
		{"FADD64/OpNB+Wait", func() error { return waitNB(ad64.OpNB(&r64, 0, a, gex.OPFAdd, 1, 0, 0)) }},
		{"FADD64/OpNBI", func() error { return ad64.OpNBI(&r64, 0, a, gex.OPFAdd, 1, 0, 0) }},
		{"FADD32/OpNB+Wait", func() error { return waitNB(ad32.OpNB(&r32, 0, a+8, gex.OPFAdd, 1, 0, 0)) }},
		{"ADD64/OpNBI", func() error { return ad64.OpNBI(nil, 0, a, gex.OPAdd, 1, 0, 0) }},
		{"GET64/OpNB+Wait", func() error { return waitNB(ad64.OpNB(&r64, 0, a, gex.OPGet, 0, 0, 0)) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			// min-ns/op: the best of batches of 10000 calls, the figure a
			// loaded machine disturbs least (a batch lasts tens of µs).
			best := time.Duration(math.MaxInt64)
			for b.Loop() {
				t0 := time.Now()
				for range 10000 {
					if err := bc.f(); err != nil {
						b.Fatal(err)
					}
				}
				best = min(best, time.Since(t0))
			}
			b.ReportMetric(float64(best.Nanoseconds())/10000, "min-ns/op")
		})
	}
	if err := c.NBIWait(gex.ECAll, 0); err != nil {
		b.Fatal(err)
	}
}

// waitNB waits for the event of an NB call that succeeded.
func waitNB(ev gex.Event, err error) error {
	if err != nil {
		return err
	}
	return ev.Wait()
}

// fastCalls are the spec-shaped calls that have a mapped fast path, aimed
// at the 64 bytes at a in rank r's segment (mapped here) and the aligned
// words at a (U64 domain ad64) and a+8 (U32 domain ad32); each call writes
// or adds v so that a caller can tell which calls took effect.
func fastCalls(tm *gex.TM, ad64 *gex.AD[uint64], ad32 *gex.AD[uint32], r gex.Rank, a gex.Addr, v byte) []namedCall {
	src8, src100, dst := make([]byte, 8), make([]byte, 100), make([]byte, 100)
	fill(src8, v)
	fill(src100, v)
	var leaf gex.Event
	var r64 uint64
	var r32 uint32
	w := uint64(v) * 0x0101010101010101
	return []namedCall{
		{"PutBlocking 8", func() error { return tm.PutBlocking(r, a+16, src8, 0) }},
		{"PutBlocking 100", func() error { return tm.PutBlocking(r, a+16, src100[:48], 0) }},
		{"PutNBI nil", func() error { return tm.PutNBI(r, a+16, src8, nil, 0) }},
		{"PutNBI EventNow", func() error { return tm.PutNBI(r, a+16, src8, gex.EventNow, 0) }},
		{"PutNBI EventDefer", func() error { return tm.PutNBI(r, a+16, src8, gex.EventDefer, 0) }},
		{"PutNBI EventGroup", func() error { return tm.PutNBI(r, a+16, src8, gex.EventGroup, 0) }},
		{"PutNB nil", func() error { return waitNB(tm.PutNB(r, a+16, src8, nil, 0)) }},
		{"PutNB EventDefer", func() error { return waitNB(tm.PutNB(r, a+16, src8, gex.EventDefer, 0)) }},
		{"PutNB *Event", func() error {
			leaf = gex.Event{} // overwritten below with EventInvalid either way; checked by the caller's data
			if err := waitNB(tm.PutNB(r, a+16, src8, &leaf, 0)); err != nil {
				return err
			}
			return leaf.Wait()
		}},
		{"GetBlocking 8", func() error { return tm.GetBlocking(dst[:8], r, a+16, 0) }},
		{"GetBlocking 3", func() error { return tm.GetBlocking(dst[:3], r, a+16, 0) }},
		{"GetNBI", func() error { return tm.GetNBI(dst[:8], r, a+16, 0) }},
		{"GetNB", func() error { return waitNB(tm.GetNB(dst[:8], r, a+16, 0)) }},
		{"PutBlockingVal 8", func() error { return tm.PutBlockingVal(r, a+24, w, 8, 0) }},
		{"PutNBIVal 4", func() error { return tm.PutNBIVal(r, a+24, w, 4, 0) }},
		{"PutNBVal 3", func() error { return waitNB(tm.PutNBVal(r, a+24, w, 3, 0)) }},
		{"GetBlockingVal 8", func() error { _, err := tm.GetBlockingVal(r, a+24, 8, 0); return err }},
		{"GetBlockingVal 2", func() error { _, err := tm.GetBlockingVal(r, a+24, 2, 0); return err }},
		{"OpNB U64 FADD", func() error { return waitNB(ad64.OpNB(&r64, r, a, gex.OPFAdd, uint64(v), 0, 0)) }},
		{"OpNBI U64 ADD", func() error { return ad64.OpNBI(nil, r, a, gex.OPAdd, uint64(v), 0, 0) }},
		{"OpNB U64 GET", func() error { return waitNB(ad64.OpNB(&r64, r, a, gex.OPGet, 0, 0, 0)) }},
		{"OpNBI U64 FCAS", func() error { return ad64.OpNBI(&r64, r, a, gex.OPFCAS, 1, 2, 0) }},
		{"OpNB U32 FADD", func() error { return waitNB(ad32.OpNB(&r32, r, a+8, gex.OPFAdd, uint32(v), 0, 0)) }},
		{"OpNBI U32 INC", func() error { return ad32.OpNBI(nil, r, a+8, gex.OPInc, 0, 0, 0) }},
	}
}

// TestMappedFastPath: every spec-shaped call (flags 0, a mapped target, the
// lc_opt values that need nothing but the copy) is served by the fast path,
// lands the right bytes, and is still refused in restricted context. The
// general path is reported through SetSlowPathHook; a call with a flag goes
// there (the hook works). A TM-pair of the primordial endpoints takes the
// fast path once its first call has found the segments.
func TestMappedFastPath(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		var slow []string
		gex.SetSlowPathHook(e.c, func(op string) { slow = append(slow, op) })
		defer gex.SetSlowPathHook(e.c, nil)
		ad64, err := gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPFAdd|gex.OPAdd|gex.OPGet|gex.OPFCAS, 0)
		e.Check(err, "ADCreate U64")
		ad32, err := gex.ADCreate[uint32](e.tm, gex.DTU32, gex.OPFAdd|gex.OPInc, 0)
		e.Check(err, "ADCreate U32")
		for _, r := range []gex.Rank{e.rank, 1 - e.rank} {
			bs := rmaSeg(e, r)
			if bs.Local == nil {
				e.Fatalf("rank %d's segment is not mapped here", r)
			}
			// Each rank works in its own 128 bytes of the target's segment,
			// the last of them ending at the segment's end: the bound is
			// inclusive of the last byte.
			off := int(bs.Size) - 128*int(2-e.rank)
			a := bs.Owner + gex.Addr(off)
			zone := bs.Local[off : off+128]
			clear(zone)
			for _, c := range fastCalls(e.tm, ad64, ad32, r, a, 5) {
				e.Check(c.f(), c.name)
			}
			if len(slow) != 0 {
				e.Fatalf("to rank %d: %d calls took the general path: %v", r, len(slow), slow)
			}
			// What landed: the puts left 5s at +16 (48 of them from the
			// 100-byte source), the value puts 5s at +24 (PutNBVal 3 wrote
			// the low 3 bytes of the same pattern); U64 at +0: FADD 5, ADD
			// 5 (FCAS 1→2 did not match); U32 at +8: FADD 5, INC.
			want := make([]byte, 128)
			fill(want[16:64], 5)
			binary.NativeEndian.PutUint64(want[0:], 10)
			binary.NativeEndian.PutUint32(want[8:], 6)
			wantBytes(e, fmt.Sprintf("rank %d's zone after the fast-path calls", r), zone, want)
		}
		// A flag sends a call to the general path (and the hook sees it).
		e.Check(e.tm.PutBlocking(e.rank, 64, make([]byte, 8), gex.FlagPeerSegOffset), "PutBlocking(PEER_SEG_OFFSET)")
		if len(slow) != 1 || slow[0] != "PutBlocking" {
			e.Fatalf("general-path calls after PutBlocking(PEER_SEG_OFFSET): %v, want [PutBlocking]", slow)
		}
		slow = nil
		// A TM-pair of the primordial endpoints: at most its first call
		// takes the general path.
		pair, err := gex.TMPair(e.ep, 0)
		e.Check(err, "TMPair")
		bs := rmaSeg(e, 1-e.rank)
		a := bs.Owner + gex.Addr(4096+256*int(e.rank))
		for i := range 3 {
			e.Check(pair.PutBlockingVal(1-e.rank, a, uint64(i), 8, 0), "TM-pair PutBlockingVal")
		}
		if got, err := pair.GetBlockingVal(1-e.rank, a, 8, 0); err != nil || got != 2 {
			e.Fatalf("TM-pair GetBlockingVal = %d, %v; want 2", got, err)
		}
		if len(slow) > 1 {
			e.Fatalf("TM-pair: %d calls took the general path (%v), want at most the first", len(slow), slow)
		}
		e.Barrier()
	})
}

// TestRestrictedRMA: GASNet-EX "Calls from restricted context": "This
// prohibition notably prohibits all communication initiation". Every
// fast-path-shaped RMA and atomic call is refused with ErrRestricted inside
// a Request handler, while holding an HSL and between an AM Prepare and its
// Commit, and changes nothing at the target; the same calls succeed once
// the context is left.
func TestRestrictedRMA(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		var fail failures
		peer := 1 - e.rank
		ad64, err := gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPFAdd|gex.OPAdd|gex.OPGet|gex.OPFCAS, 0)
		e.Check(err, "ADCreate U64")
		ad32, err := gex.ADCreate[uint32](e.tm, gex.DTU32, gex.OPFAdd|gex.OPInc, 0)
		e.Check(err, "ADCreate U32")
		// Rank r's calls aim at its own 128 bytes of the peer's segment and
		// of its own; they are zero and must stay so while refused.
		zone := func(r gex.Rank) (gex.Addr, []byte) {
			bs := rmaSeg(e, r)
			off := 8192 + 128*int(e.rank)
			return bs.Owner + gex.Addr(off), bs.Local[off : off+128]
		}
		for _, r := range []gex.Rank{e.rank, peer} {
			_, z := zone(r)
			clear(z)
		}
		refused := func(where string) {
			for _, r := range []gex.Rank{e.rank, peer} {
				a, z := zone(r)
				expectRestricted(&fail, fmt.Sprintf("%s, to rank %d", where, r), fastCalls(e.tm, ad64, ad32, r, a, 9))
				if !bytes.Equal(z, make([]byte, 128)) {
					fail.add("%s: refused calls changed rank %d's bytes: % x", where, r, z)
				}
			}
		}
		var inHandler, meds atomic.Int32
		table := []gex.AMEntry{
			{Name: "rma", Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) {
				refused("inside a Request handler")
				inHandler.Add(1)
			}},
			{Name: "med", Flags: gex.FlagAMMedium | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { meds.Add(1) }},
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		e.Barrier()
		e.Check(e.tm.RequestShort(e.rank, table[0].Index, 0), "RequestShort")
		e.Check(e.c.BlockUntil(func() bool { return inHandler.Load() == 1 }), "BlockUntil")
		fail.check(e)

		var hsl gex.HSL
		hsl.Lock()
		refused("holding an HSL")
		hsl.Unlock()
		fail.check(e)

		sd, err := e.tm.PrepareRequestMedium(peer, nil, 8, 8, nil, 0, 0)
		e.Check(err, "PrepareRequestMedium")
		refused("between Prepare and Commit")
		e.Check(sd.CommitRequestMedium(table[1].Index, 0), "CommitRequestMedium")
		fail.check(e)
		e.Check(e.c.BlockUntil(func() bool { return meds.Load() == 1 }), "BlockUntil (the peer's Medium)")
		fail.check(e)

		// Outside restricted context the same calls succeed.
		for _, r := range []gex.Rank{e.rank, peer} {
			a, z := zone(r)
			expectOK(&fail, fmt.Sprintf("unrestricted, to rank %d", r), fastCalls(e.tm, ad64, ad32, r, a, 9))
			if z[16] != 9 || binary.NativeEndian.Uint64(z) != 18 {
				fail.add("unrestricted calls to rank %d left % x", r, z)
			}
		}
		fail.check(e)
		e.Barrier()
	})
}

//go:noinline
func call8(dst, src []byte) error {
	if len(dst) == 8 && len(src) == 8 {
		*(*[8]byte)(dst) = *(*[8]byte)(src)
		return nil
	}
	return nil
}

//go:noinline
func callAdd(w *atomic.Uint64) uint64 { return w.Add(1) - 1 }

// TestFastPathInlining: the fast paths are fast because the compiler
// inlines their pieces (docs/rma.md, "Fast paths"); a helper that grows past
// the inlining budget silently adds a call to every RMA or atomic. This
// reads the compiler's decisions (go build -gcflags=-m=2) for the gex
// package and for a program instantiating the atomic domains.
func TestFastPathInlining(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package twice with the compiler's inlining report")
	}
	report := func(pkgFlag string, args ...string) string {
		out, err := exec.Command("go", append([]string{"build", "-o", os.DevNull, "-gcflags=" + pkgFlag + "-m=2"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	check := func(out string, names ...string) {
		for _, name := range names {
			if !regexp.MustCompile(`can inline ` + regexp.QuoteMeta(name) + ` with cost`).MatchString(out) {
				why := regexp.MustCompile(`cannot inline ` + regexp.QuoteMeta(name) + `: .*`).FindString(out)
				t.Errorf("%s is not inlined (%s): every fast-path call now pays a call for it", name, why)
			}
		}
	}
	check(report("", "."),
		// The spec-shaped wrappers inline into the caller, as one call of
		// the put/get body; Wait/Test on EventInvalid are a compare.
		"(*TM).PutBlocking", "(*TM).PutNBI", "(*TM).PutNB", "(*TM).GetBlocking", "(*TM).GetNBI", "(*TM).GetNB",
		"(*TM).PutBlockingVal", "(*TM).PutNBIVal", "(*TM).PutNBVal", "Event.Wait", "Event.Test",
		// The pieces of the fast path inline into the bodies.
		"(*fastMap).mapped", "(*TM).mappedAt", "disjoint", "put8", "get8", "copyTo", "copyFrom", "copyMapped", "putValAt", "getValAt",
		"(*Client).mayBeRestricted", "(*Client).restrictedA", "(*Client).restrictedB", "fastLC",
		// The 8-byte PutBlocking/GetBlocking chain (rma_fast_unsafe.go,
		// blocking8): each link under the budget on its own.
		"(*TM).blocking8", "(*TM).gate8", "(*TM).map8", "get8Fin", "put8Fin",
		"(*TM).getBlockingSlow", "(*TM).putBlockingSlow", "(*TM).getNBISlow", "(*TM).putNBISlow",
		"(*fastMap).entry", "(*mapEntry).at")
	prog := report("github.com/gexgo/gexgo/gex/testdata/inlinecheck=", "./testdata/inlinecheck")
	check(prog,
		"gex.(*AD[uint64]).OpNB", "gex.(*AD[uint64]).OpNBI", "gex.(*AD[uint32]).OpNB", "gex.(*AD[uint32]).OpNBI",
		"gex.(*AD[go.shape.uint64]).addOp", "gex.(*AD[go.shape.uint64]).faddAt", "gex.(*AD[go.shape.uint32]).faddAt")
	// The chain links are called through parameters; that they are
	// inlined into a user's loop (and not left as calls through function
	// values) shows only in the caller's report.
	for _, name := range []string{"gex.(*TM).PutBlocking", "gex.(*TM).GetBlocking", "gex.(*TM).PutNBI", "gex.(*TM).GetNBI", "gex.(*TM).blocking8",
		"gex.(*TM).gate8", "gex.(*TM).map8", "gex.put8Fin", "gex.get8Fin", "gex.put8", "gex.get8"} {
		if !regexp.MustCompile(`main\.go:\d+:\d+: inlining call to ` + regexp.QuoteMeta(name) + `\n`).MatchString(prog) {
			t.Errorf("%s is not inlined into the user's loop (testdata/inlinecheck): an 8-byte PutBlocking/GetBlocking/PutNBI/GetNBI pays a call for it", name)
		}
	}
}
