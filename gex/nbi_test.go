package gex_test

import (
	"fmt"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Implicit-event (NBI) synchronisation and access regions, GASNet-EX
// "Extended API" (gex_NBI_Test/Wait, gex_NBI_{Begin,End}AccessRegion), which
// keep GASNet-1's semantics (§3.3.5 and §3.3.6):
//
//   - "The 'event_mask' argument is bitwise-OR of GEX_EC_* constants"; "flags
//     are reserved for future use and must currently be zero".
//   - gasnet_wait_syncnbi_gets/puts/all "synchronize on a set of outstanding
//     non-blocking implicit-handle operations ... either all such gets, all
//     such puts, or all such puts and gets"; the try variants return
//     GASNET_ERR_NOT_READY unless all of them completed. _Test: "no Poll call
//     is made"; _Wait: "Polls until success".
//   - Access regions: "All implicit-handle non-blocking operations initiated
//     inside the region become "associated" with the abstract access region
//     handle"; the handle "will be successfully synchronized when *all* of the
//     associated non-blocking operations (both puts and gets) initiated in the
//     access region have completed"; "The associated operations cease to be
//     implicit-handle operations, and are *not* synchronized by subsequent
//     calls to the implicit-handle synchronization functions"; "Explicit-handle
//     operations initiated within the access region operate as usual and do
//     *not* become associated with the access region"; the calls "may not be
//     nested". Regions belong to the calling thread (goroutine in gexgo).

// TestNBIArguments: masks and flags of gex_NBI_Test/Wait and the pairing of
// access-region calls, on a one-rank client.
func TestNBIArguments(t *testing.T) {
	c, _, _ := selfClient(t)
	for _, mask := range []gex.EC{0, 1 << 5, 1 << 31, gex.ECAll | 1<<7} {
		wantErr(t, fmt.Sprintf("NBITest(%#x)", uint32(mask)), c.NBITest(mask, 0), gex.ErrBadArg, "event_mask")
		wantErr(t, fmt.Sprintf("NBIWait(%#x)", uint32(mask)), c.NBIWait(mask, 0), gex.ErrBadArg, "event_mask")
	}
	for _, fl := range []gex.Flags{gex.FlagImmediate, 1 << 40} {
		wantErr(t, "NBITest with flags", c.NBITest(gex.ECAll, fl), gex.ErrBadArg, "flags")
		wantErr(t, "NBIWait with flags", c.NBIWait(gex.ECAll, fl), gex.ErrBadArg, "flags")
		wantErr(t, "NBIBeginAccessRegion with flags", c.NBIBeginAccessRegion(fl), gex.ErrBadArg, "flags")
		_, err := c.NBIEndAccessRegion(fl)
		wantErr(t, "NBIEndAccessRegion with flags", err, gex.ErrBadArg, "flags")
	}
	// Nothing outstanding: every category tests and waits as done.
	for _, mask := range []gex.EC{gex.ECGet, gex.ECPut, gex.ECAM, gex.ECLC, gex.ECRMW, gex.ECAll, gex.ECGet | gex.ECPut} {
		if err := c.NBITest(mask, 0); err != nil {
			t.Errorf("NBITest(%v) with nothing outstanding = %v", mask, err)
		}
		if err := c.NBIWait(mask, 0); err != nil {
			t.Errorf("NBIWait(%v) with nothing outstanding = %v", mask, err)
		}
	}
	// Pairing: End without Begin, nested Begin.
	_, err := c.NBIEndAccessRegion(0)
	wantErr(t, "NBIEndAccessRegion without a region", err, gex.ErrBadArg, "no access region")
	if err := c.NBIBeginAccessRegion(0); err != nil {
		t.Fatalf("NBIBeginAccessRegion: %v", err)
	}
	wantErr(t, "nested NBIBeginAccessRegion", c.NBIBeginAccessRegion(0), gex.ErrBadArg, "nest")
	ev, err := c.NBIEndAccessRegion(0)
	if err != nil {
		t.Fatalf("NBIEndAccessRegion after a refused nested Begin: %v", err)
	}
	// An empty region's event has nothing to wait for.
	if err := ev.Test(); err != nil {
		t.Fatalf("Test on the event of an empty access region = %v, want nil", err)
	}
	_, err = c.NBIEndAccessRegion(0)
	wantErr(t, "second NBIEndAccessRegion", err, gex.ErrBadArg, "no access region")
	// A region can be opened again after it was closed.
	if err := c.NBIBeginAccessRegion(0); err != nil {
		t.Fatalf("NBIBeginAccessRegion after End: %v", err)
	}
	ev, err = c.NBIEndAccessRegion(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(); err != nil {
		t.Errorf("Wait on the event of an empty access region = %v, want nil", err)
	}
}

// TestNBICategories: gex_NBI_Wait(GEX_EC_GET) synchronises the gets only: it
// returns while a put (path (b), its target parked in a handler) is still
// incomplete; gex_NBI_Test(GEX_EC_PUT) reports ErrNotReady while the target
// is parked and, since it never polls, also after the target was released
// and answered; gex_NBI_Wait(GEX_EC_ALL) polls and completes everything.
//
// Loop conduit only: the test must know that the put's target has not served
// it (and later that it has, with the answer still unpolled here). With ranks
// as processes (smp) that ordering cannot be arranged deterministically: a
// peer serves requests whenever it polls, and nothing short of polling here
// tells this rank what it has done.
func TestNBICategories(t *testing.T) {
	p := newParking(1)
	loopJob(t, 3, jobOpts{segSize: 1 << 16, supernode: 1}, func(e *rankEnv) {
		p.register(e)
		copy(e.seg.Bytes(), rmaData(uint64(900+e.rank), 1<<16))
		e.Barrier()
		if e.rank != 0 {
			return // rank 1 is parked, rank 2 serves, inside the harness's last barrier
		}
		defer p.releaseAll()
		const tries = 1000
		held, free := rmaSeg(e, 1), rmaSeg(e, 2)
		p.park(e, 1, 0)
		src := rmaCopy(910, 5000)
		e.Check(e.tm.PutNBI(1, held.Owner+1000, src, nil, 0), "PutNBI to the parked rank")
		fill(src, 0xEE) // lc_opt nil is EventNow: the source may be reused at once
		dst := make([]byte, 6000)
		e.Check(e.tm.GetNBI(dst, 2, free.Owner+300, 0), "GetNBI from the free rank")
		e.Check(e.c.NBIWait(gex.ECGet, 0), "NBIWait(ECGet) with a put outstanding")
		wantBytes(e, "GetNBI after NBIWait(ECGet)", dst, rmaData(902, 1<<16)[300:6300])
		e.Check(e.c.NBITest(gex.ECGet, 0), "NBITest(ECGet) after NBIWait(ECGet)")
		for _, mask := range []gex.EC{gex.ECPut, gex.ECAll, gex.ECPut | gex.ECGet} {
			notReadyN(e, fmt.Sprintf("NBITest(%v) with the put's target parked", mask), tries, func() error { return e.c.NBITest(mask, 0) })
		}
		p.unpark(e, 1, 0)
		notReadyN(e, "NBITest(ECPut) with the acknowledgement waiting unpolled", tries, func() error { return e.c.NBITest(gex.ECPut, 0) })
		e.Check(e.c.NBIWait(gex.ECAll, 0), "NBIWait(ECAll)")
		e.Check(e.c.NBITest(gex.ECPut, 0), "NBITest(ECPut) after NBIWait(ECAll)")
		got := make([]byte, 5000)
		e.Check(e.tm.GetBlocking(got, 1, held.Owner+1000, 0), "GetBlocking")
		wantBytes(e, "PutNBI whose source was reused after the call", got, rmaData(910, 5000))
	})
}

// TestNBIAccessRegion: on both paths and conduits, NBI puts and gets inside a
// region are synchronised by the region's event (data checked after its
// Wait), and not by the implicit-handle calls after the region: NBITest sees
// nothing outstanding whatever the state of the region's operations. An NB
// operation inside a region keeps its own event. Regions are per goroutine:
// a second goroutine opens, fills and closes its own while the first one's
// is open, and cannot close the first one's.
func TestNBIAccessRegion(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		const zone = 4 << 20
		conformance(t, 3, jobOpts{segSize: 3 * zone, supernode: sn}, func(e *rankEnv) {
			mine := e.seg.Bytes()
			clear(mine)
			for w := range uint64(e.size) {
				copy(mine[w*zone+zone/2:(w+1)*zone], rmaData(uint64(1000+e.rank), zone/2))
			}
			e.Barrier()
			type check struct {
				what string
				r    gex.Rank
				off  uint64
				want []byte
				got  []byte // a get's destination; nil for a put (read back)
			}
			var checks []check
			seed := uint64(1100 + 100*e.rank)
			sizes := []int{8, 5000, 1 << 20} // 1 MiB: 16 AM chunks on path (b)
			zoneOff := func(r gex.Rank) (gex.Addr, uint64) {
				return rmaSeg(e, r).Owner, uint64(e.rank) * zone
			}
			// Layout of my zone at every target: region A's puts from 0, the
			// NB put at 5/16, region B's puts at 6/16, the gets' source data
			// in the second half.
			issue := func(who string) {
				for r := range e.size {
					base, zo := zoneOff(r)
					next := zo
					for _, n := range sizes {
						seed++
						e.Check(e.tm.PutNBI(r, base+gex.Addr(next), rmaData(seed, n), gex.EventDefer, 0), who+": PutNBI")
						checks = append(checks, check{who + ": PutNBI", r, next, rmaData(seed, n), nil})
						next += uint64(n+63) &^ 63
						dst := make([]byte, n)
						src := zo + zone/2 + uint64(n)
						e.Check(e.tm.GetNBI(dst, r, base+gex.Addr(src), 0), who+": GetNBI")
						checks = append(checks, check{who + ": GetNBI", r, src, rmaData(uint64(1000+r), zone/2)[n : 2*n], dst})
					}
				}
			}
			e.Check(e.c.NBIBeginAccessRegion(0), "NBIBeginAccessRegion")
			issue("region A")
			// An explicit-event operation inside the region keeps its own event.
			peer := (e.rank + 1) % e.size
			pbase, pzo := zoneOff(peer)
			seed++
			nbOff := pzo + 5*zone/16
			evNB, err := e.tm.PutNB(peer, pbase+gex.Addr(nbOff), rmaData(seed, 4000), nil, 0)
			e.Check(err, "PutNB inside the region")
			nbWant := rmaData(seed, 4000)

			// A second goroutine with its own region, opened while A's is.
			type result struct {
				checks []check
				err    error
			}
			done := make(chan result)
			nextB := uint64(6 * zone / 16)
			go func() {
				var res result
				defer func() { done <- res }()
				fail := func(err error, what string) bool {
					if err != nil && res.err == nil {
						res.err = fmt.Errorf("goroutine B: %s: %w", what, err)
					}
					return err != nil
				}
				if _, err := e.c.NBIEndAccessRegion(0); err == nil {
					res.err = fmt.Errorf("goroutine B: NBIEndAccessRegion closed goroutine A's region")
					return
				}
				if fail(e.c.NBIBeginAccessRegion(0), "NBIBeginAccessRegion while another goroutine has a region open") {
					return
				}
				if e.c.NBIBeginAccessRegion(0) == nil {
					res.err = fmt.Errorf("goroutine B: nested NBIBeginAccessRegion accepted")
					return
				}
				for r := range e.size {
					base, zo := zoneOff(r)
					seedB := uint64(1190 + 100*e.rank + r)
					off := zo + nextB
					if fail(e.tm.PutNBI(r, base+gex.Addr(off), rmaData(seedB, 3000), nil, 0), "PutNBI") {
						return
					}
					res.checks = append(res.checks, check{"region B: PutNBI", r, off, rmaData(seedB, 3000), nil})
				}
				ev, err := e.c.NBIEndAccessRegion(0)
				if fail(err, "NBIEndAccessRegion") || fail(ev.Wait(), "Wait on region B") {
					return
				}
				fail(e.c.NBITest(gex.ECAll, 0), "NBITest(ECAll) after region B")
			}()
			res := <-done
			if res.err != nil {
				e.Fatalf("%v", res.err)
			}
			checks = append(checks, res.checks...)

			evA, err := e.c.NBIEndAccessRegion(0)
			e.Check(err, "NBIEndAccessRegion (A)")
			// Region operations are not implicit-handle operations any more.
			e.Check(e.c.NBITest(gex.ECAll, 0), "NBITest(ECAll) after the region (its operations are not in the implicit set)")
			e.Check(e.c.NBITest(gex.ECPut, 0), "NBITest(ECPut) after the region")
			e.Check(evNB.Wait(), "Wait on the PutNB issued inside the region")
			e.Check(evA.Wait(), "Wait on region A")
			for _, c := range checks {
				got := c.got
				if got == nil {
					got = make([]byte, len(c.want))
					e.Check(e.tm.GetBlocking(got, c.r, rmaSeg(e, c.r).Owner+gex.Addr(c.off), 0), "GetBlocking")
				}
				wantBytes(e, fmt.Sprintf("%s of %d bytes, rank %d", c.what, len(c.want), c.r), got, c.want)
			}
			got := make([]byte, 4000)
			e.Check(e.tm.GetBlocking(got, peer, pbase+gex.Addr(nbOff), 0), "GetBlocking")
			wantBytes(e, "PutNB issued inside the region", got, nbWant)

			// An empty region's event completes.
			e.Check(e.c.NBIBeginAccessRegion(0), "NBIBeginAccessRegion (empty)")
			ev, err := e.c.NBIEndAccessRegion(0)
			e.Check(err, "NBIEndAccessRegion (empty)")
			e.Check(ev.Test(), "Test on an empty region's event")
			e.Barrier()
		})
	})
}

// TestNBIAccessRegionPending: a region's event completes only when all of its
// operations did. With one of them held (its target parked), the region's
// event tests not ready (and, since Test never polls, still after the target
// answered), while the implicit set is empty, an NB operation issued inside
// the region completes on its own, and another goroutine's region completes
// on its own. (Loop conduit only: see parking.)
func TestNBIAccessRegionPending(t *testing.T) {
	p := newParking(1)
	loopJob(t, 3, jobOpts{segSize: 1 << 16, supernode: 1}, func(e *rankEnv) {
		p.register(e)
		copy(e.seg.Bytes(), rmaData(uint64(1300+e.rank), 1<<16))
		e.Barrier()
		if e.rank != 0 {
			return
		}
		defer p.releaseAll()
		const tries = 1000
		held, free := rmaSeg(e, 1), rmaSeg(e, 2)
		p.park(e, 1, 0)
		e.Check(e.c.NBIBeginAccessRegion(0), "NBIBeginAccessRegion")
		e.Check(e.tm.PutNBI(1, held.Owner+100, rmaData(1310, 3000), nil, 0), "PutNBI to the parked rank")
		getFree := make([]byte, 2000)
		e.Check(e.tm.GetNBI(getFree, 2, free.Owner+40000, 0), "GetNBI from the free rank")
		e.Check(e.tm.PutNBI(2, free.Owner+100, rmaData(1311, 3000), nil, 0), "PutNBI to the free rank")
		evNB, err := e.tm.PutNB(2, free.Owner+8000, rmaData(1312, 3000), nil, 0)
		e.Check(err, "PutNB inside the region")
		evR, err := e.c.NBIEndAccessRegion(0)
		e.Check(err, "NBIEndAccessRegion")

		e.Check(e.c.NBITest(gex.ECAll, 0), "NBITest(ECAll) with the region's put held (not an implicit-handle operation)")
		e.Check(e.c.NBIWait(gex.ECAll, 0), "NBIWait(ECAll) with the region's put held")
		e.Check(evNB.Wait(), "Wait on the PutNB issued inside the region")
		notReadyN(e, "Test on the region's event with one of its puts held", tries, evR.Test)

		// Another goroutine's region is its own.
		errB := make(chan error)
		getB := make([]byte, 1000)
		go func() {
			errB <- func() error {
				if err := e.c.NBIBeginAccessRegion(0); err != nil {
					return err
				}
				if err := e.tm.GetNBI(getB, 2, free.Owner+50000, 0); err != nil {
					return err
				}
				ev, err := e.c.NBIEndAccessRegion(0)
				if err != nil {
					return err
				}
				return ev.Wait()
			}()
		}()
		if err := <-errB; err != nil {
			e.Fatalf("goroutine B's region, while A's region is held: %v", err)
		}
		wantBytes(e, "GetNBI in goroutine B's region", getB, rmaData(1302, 1<<16)[50000:51000])
		notReadyN(e, "Test on the region's event after B's region completed", tries, evR.Test)

		p.unpark(e, 1, 0)
		notReadyN(e, "Test on the region's event with the acknowledgement waiting unpolled", tries, evR.Test)
		e.Check(evR.Wait(), "Wait on the region's event")
		wantBytes(e, "GetNBI in the region", getFree, rmaData(1302, 1<<16)[40000:42000])
		for _, c := range []struct {
			r    gex.Rank
			a    gex.Addr
			seed uint64
		}{{1, held.Owner + 100, 1310}, {2, free.Owner + 100, 1311}, {2, free.Owner + 8000, 1312}} {
			got := make([]byte, 3000)
			e.Check(e.tm.GetBlocking(got, c.r, c.a, 0), "GetBlocking")
			wantBytes(e, fmt.Sprintf("put %d to rank %d", c.seed, c.r), got, rmaData(c.seed, 3000))
		}
	})
}
