package gex_test

import (
	"errors"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Allocation budgets of the collectives (STYLE.md: "Budgets are tests"): a
// barrier and an 8-byte reduction to all, initiated and synchronized, do not
// allocate once the engine's pools are warm. Both ranks measure the same
// number of calls, so the collectives match up.
func TestCollNoAllocs(t *testing.T) {
	conformance(t, 2, jobOpts{}, func(e *rankEnv) {
		src, dst := make([]byte, 8), make([]byte, 8)
		root := gex.Rank(0)
		assertNoAllocs(e, "over 2 ranks", 200, func(check func(error)) []allocCase {
			return []allocCase{
				{"BarrierNB+Wait", func() {
					ev, err := e.tm.BarrierNB(0)
					check(err)
					check(ev.Wait())
				}},
				{"ReduceToAllNB(8 B, U64 ADD)+Wait", func() {

					ev, err := e.tm.ReduceToAllNB(dst, src, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
					check(err)
					check(ev.Wait())
				}},
				{"BroadcastNB(8 B, alternating roots)+Wait", func() {
					// A fixed root would run ahead of the other rank without
					// bound (a broadcast does not synchronize), and the
					// receiver would stage an unbounded number of early
					// operations.
					root ^= 1
					ev, err := e.tm.BroadcastNB(root, dst, src, 8, 0)
					check(err)
					check(ev.Wait())
				}},
			}
		})
	})
}

// TestCollMalformed: collective messages no correct peer sends - unknown
// kinds, slots out of range, byte ranges outside the stream, messages for an
// operation already completed - are dropped without harm, and collectives
// keep working.
func TestCollMalformed(t *testing.T) {
	conformance(t, 2, jobOpts{}, func(e *rankEnv) {
		peer := int(1 - e.rank)
		send := func(kindSlot int32, off, total int32, payload []byte, seq int32) {
			h := gex.RawHeader{Cat: gex.RawMedium, IsReq: true, Handler: uint8(gex.CollIndex), NArgs: 9}
			h.Args[0], h.Args[2], h.Args[3], h.Args[4], h.Args[5] = 1, seq, kindSlot, off, total
			e.Check(gex.RawSend(e.c, peer, h, payload), "RawSend")
		}
		e.collBarrier(e.tm)                       // collective #0 of the primordial team
		e.Barrier()                               // both ranks have completed it
		send(0, 0, 0, nil, 50)                    // kind 0
		send(99<<8, 0, 0, nil, 50)                // kind out of range
		send(2<<8|200, 0, 8, make([]byte, 8), 50) // slot out of range
		send(2<<8, 4, 8, make([]byte, 8), 50)     // bytes past the stream
		send(2<<8, -1, 8, make([]byte, 1), 50)    // negative offset
		send(2<<8, 0, -5, nil, 50)                // negative total
		send(1<<8|1, 0, 0, nil, 0)                // barrier #0, already complete
		// Mediums and the test's Short barrier AMs need not arrive in
		// order: wait for the stale one to be seen.
		e.Check(e.c.BlockUntil(func() bool { return gex.CollStale(e.c) >= 1 }), "BlockUntil(stale message dropped)")
		e.Barrier()
		if got := gex.CollStale(e.c); got != 1 {
			e.Fatalf("%d messages dropped as stale, want 1", got)
		}
		for i := 0; i < 3; i++ {
			e.collBarrier(e.tm)
			dst := make([]byte, 8)
			ev, err := e.tm.ReduceToAllNB(dst, u64s(7), gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
			e.wait(ev, err, "ReduceToAllNB")
			if dst[0] != 14 {
				e.Fatalf("ReduceToAll after malformed messages = %d, want 14", dst[0])
			}
		}
	})
}

// TestCollDirectBogus: a direct-broadcast notice naming bytes outside the
// root's segment makes the receiving rank's broadcast fail with an error
// instead of reading outside the mapping.
func TestCollDirectBogus(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		e.collBarrier(e.tm) // collective #0; the broadcast below is #1
		if e.rank == 0 {
			h := gex.RawHeader{Cat: gex.RawMedium, IsReq: true, Handler: uint8(gex.CollIndex), NArgs: 9}
			h.Args[0], h.Args[2], h.Args[3], h.Args[4] = 1, 1, 2<<8|1, 1<<30
			e.Check(gex.RawSend(e.c, 1, h, nil), "RawSend")
		}
		e.Barrier()
		dst := make([]byte, 100)
		ev, err := e.tm.BroadcastNB(0, dst, make([]byte, 100), 100, 0)
		e.Check(err, "BroadcastNB")
		err = ev.Wait()
		switch {
		case e.rank == 1 && !errors.Is(err, gex.ErrBadArg):
			e.Fatalf("broadcast after a bogus direct notice: %v, want ErrBadArg", err)
		case e.rank == 0 && err != nil:
			e.Fatalf("root's broadcast: %v", err)
		}
		e.Barrier()
		e.collBarrier(e.tm)
	})
}

// TestCollSizeMismatch: a stream whose size disagrees with the receiver's own
// arguments fails the receiver's collective with ErrBadArg (nothing is
// allocated for it), and a stream for a collective not yet called that would
// exceed the staging limit is dropped; the ranks stay in step afterwards.
func TestCollSizeMismatch(t *testing.T) {
	conformance(t, 2, jobOpts{}, func(e *rankEnv) {
		raw := func(seq, total int32) {
			h := gex.RawHeader{Cat: gex.RawMedium, IsReq: true, Handler: uint8(gex.CollIndex), NArgs: 9}
			h.Args[0], h.Args[2], h.Args[3], h.Args[5] = 1, seq, 2<<8, total // broadcast stream 0
			e.Check(gex.RawSend(e.c, 0, h, make([]byte, 8)), "RawSend")
		}
		e.collBarrier(e.tm) // collective #0
		dst, src := make([]byte, 8), []byte("12345678")
		if e.rank == 0 {
			ev, err := e.tm.BroadcastNB(1, dst, nil, 8, 0) // collective #1, initiated first
			e.Check(err, "BroadcastNB")
			e.Barrier()
			if err := ev.Wait(); !errors.Is(err, gex.ErrBadArg) {
				e.Fatalf("broadcast receiving a 1 GiB stream for 8 bytes: %v, want ErrBadArg", err)
			}
		} else {
			e.Barrier()
			raw(1, 1<<30)
			ev, err := e.tm.BroadcastNB(1, dst, src, 8, 0)
			e.wait(ev, err, "BroadcastNB")
		}
		e.Barrier()
		// Collective #2: the bogus stream arrives before rank 0 calls it and
		// is over the staging limit.
		if e.rank == 1 {
			raw(2, 1<<30+1)
		}
		e.Barrier()
		ev, err := e.tm.BroadcastNB(1, dst, src, 8, 0)
		e.wait(ev, err, "BroadcastNB after a dropped stream")
		if string(dst) != "12345678" {
			e.Fatalf("broadcast after the dropped stream delivered %q", dst)
		}
		e.collBarrier(e.tm)
	})
}
