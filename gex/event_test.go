package gex_test

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
)

// Events, GASNet-EX "Event test/wait operations" and gex_Event_QueryLeaf, with
// the GASNet-1 semantics they keep (§3.3.3, "Synchronization for
// explicit-handle non-blocking operations"):
//
//   - GEX_EVENT_INVALID is "result for already-completed operation":
//     "gasnet_wait_sync(GASNET_INVALID_HANDLE) returns immediately and
//     gasnet_try_sync(GASNET_INVALID_HANDLE) returns GASNET_OK".
//   - GEX_EVENT_NO_OP: "Erroneous to pass this value to test/wait operations".
//   - "Success consumes the event"; "It is an error to pass a gasnet_handle_t
//     value for an operation which has already been successfully
//     synchronized".
//   - _Test: "no Poll call is made"; _Wait: "Polls until success".
//   - Some: "Success is defined as one or more events have been completed, OR
//     the input array contains only GEX_EVENT_INVALID"; All: "all passed
//     events have been completed, OR the input array contains only
//     GEX_EVENT_INVALID"; "Completed events, if any, are overwritten with
//     GEX_EVENT_INVALID"; "flags are reserved for future use and must
//     currently be zero".

// parking holds a loop-conduit rank inside a request handler that blocks on a
// Go channel, so that AMs sent to it queue up unserved until the test
// releases it. It needs ranks that are goroutines of one process: on smp (real
// processes) no test can tell when a peer has or has not served a request
// without polling, so the orderings these tests arrange cannot be arranged
// there deterministically.
type parking struct{ phases []parkPhase }

type parkPhase struct {
	parked, release, served chan struct{}
	once                    sync.Once
}

// Fixed handler indices: registered before the first barrier on every rank.
const parkIdx, markIdx gex.AMIndex = 170, 171

func newParking(phases int) *parking {
	p := &parking{phases: make([]parkPhase, phases)}
	for i := range p.phases {
		p.phases[i] = parkPhase{parked: make(chan struct{}), release: make(chan struct{}), served: make(chan struct{})}
	}
	return p
}

func (p *parking) register(e *rankEnv) {
	e.Check(e.ep.RegisterHandlers([]gex.AMEntry{
		{Index: parkIdx, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Name: "park", Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) {
			ph := &p.phases[a[0]]
			close(ph.parked)
			<-ph.release
		}},
		{Index: markIdx, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Name: "mark", Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) {
			close(p.phases[a[0]].served)
		}},
	}), "RegisterHandlers(park, mark)")
}

// parkWait bounds the waits on another rank's goroutine, so that a rank that
// failed elsewhere cannot hang the test binary. It is no assertion about
// timing: the waits are for events that happen without any polling here.
const parkWait = time.Minute

func (p *parking) await(e *rankEnv, ch <-chan struct{}, what string) {
	e.t.Helper()
	select {
	case <-ch:
	case <-time.After(parkWait):
		e.Fatalf("parking: %s did not happen", what)
	}
}

// park sends phase k's park request to rank r (which must be polling) and
// returns once r is inside the handler. It does not poll. A watchdog releases
// r after parkWait in any case: an implementation that wrongly waits for the
// parked rank then fails the test's assertions instead of hanging it.
func (p *parking) park(e *rankEnv, r gex.Rank, k int) {
	e.t.Helper()
	e.Check(e.tm.RequestShort(r, parkIdx, 0, int32(k)), "RequestShort(park)")
	p.await(e, p.phases[k].parked, fmt.Sprintf("rank %d entering park %d", r, k))
	time.AfterFunc(parkWait, func() { p.release(k) })
}

// release lets phase k's parked rank go (idempotent).
func (p *parking) release(k int) {
	ph := &p.phases[k]
	ph.once.Do(func() { close(ph.release) })
}

// releaseAll is deferred by the rank that parks a peer: a failing rank ends
// through runtime.Goexit, which runs it, so no peer is left parked.
func (p *parking) releaseAll() {
	for k := range p.phases {
		p.release(k)
	}
}

// unpark sends a marker request behind everything this rank sent to r,
// releases r and returns, without polling, once r ran the marker's handler:
// then r has served every earlier request from this rank and sent its
// replies, which wait unpolled in this rank's queue. (At most a ring's worth
// of small replies and four large ones: r must not have to wait for us.)
func (p *parking) unpark(e *rankEnv, r gex.Rank, k int) {
	e.t.Helper()
	e.Check(e.tm.RequestShort(r, markIdx, 0, int32(k)), "RequestShort(mark)")
	p.release(k)
	p.await(e, p.phases[k].served, fmt.Sprintf("rank %d serving its queue after park %d", r, k))
}

// loopJob runs body as an n-rank job on the loop conduit only (the test needs
// ranks that are goroutines of this process, see parking).
func loopJob(t *testing.T, n int, o jobOpts, body func(e *rankEnv)) {
	t.Helper()
	loopOnly(t)
	if os.Getenv(envConduit) == "smp" {
		t.Skipf("%s=smp: this test runs on the loop conduit only", envConduit)
	}
	runLoop(t, n, o, body)
}

// notReadyN ends the job unless test returns ErrNotReady k times in a row.
func notReadyN(e *rankEnv, what string, k int, test func() error) {
	e.t.Helper()
	for i := 0; i < k; i++ {
		if err := test(); !errors.Is(err, gex.ErrNotReady) {
			e.Fatalf("%s: call %d returned %v, want ErrNotReady", what, i, err)
		}
	}
}

// TestEventSentinels: EventInvalid tests and waits as done (any number of
// times); EventNoOp is refused by Test, Wait and the array calls.
func TestEventSentinels(t *testing.T) {
	for i := 0; i < 3; i++ {
		if err := gex.EventInvalid.Test(); err != nil {
			t.Errorf("EventInvalid.Test() = %v, want nil", err)
		}
		if err := gex.EventInvalid.Wait(); err != nil {
			t.Errorf("EventInvalid.Wait() = %v, want nil", err)
		}
	}
	var zero gex.Event
	if zero != gex.EventInvalid {
		t.Errorf("the zero Event is not EventInvalid (GEX_EVENT_INVALID is \"guaranteed to be zero\")")
	}
	if gex.EventNoOp == gex.EventInvalid {
		t.Errorf("EventNoOp == EventInvalid (GEX_EVENT_NO_OP is \"guaranteed to be non-zero\")")
	}
	wantErr(t, "EventNoOp.Test()", gex.EventNoOp.Test(), gex.ErrBadArg)
	wantErr(t, "EventNoOp.Wait()", gex.EventNoOp.Wait(), gex.ErrBadArg)
	for _, f := range []struct {
		name string
		fn   func([]gex.Event, gex.Flags) error
	}{{"EventTestSome", gex.EventTestSome}, {"EventWaitSome", gex.EventWaitSome}, {"EventTestAll", gex.EventTestAll}, {"EventWaitAll", gex.EventWaitAll}} {
		wantErr(t, f.name+" with EventNoOp", f.fn([]gex.Event{gex.EventInvalid, gex.EventNoOp}, 0), gex.ErrBadArg)
		// Only EventInvalid (or nothing): success at once.
		for _, evs := range [][]gex.Event{nil, {}, {gex.EventInvalid}, {gex.EventInvalid, gex.EventInvalid, gex.EventInvalid}} {
			if err := f.fn(evs, 0); err != nil {
				t.Errorf("%s(%d x EventInvalid) = %v, want nil", f.name, len(evs), err)
			}
		}
		// Reserved flags.
		for _, fl := range []gex.Flags{gex.FlagImmediate, 1 << 40} {
			wantErr(t, fmt.Sprintf("%s(flags %v)", f.name, fl), f.fn([]gex.Event{gex.EventInvalid}, fl), gex.ErrBadArg, "flags")
		}
	}
	// QueryLeaf: root may be EventInvalid (the result then tests done) but
	// not EventNoOp; the category must be exactly one GEX_EC_*.
	for _, ec := range []gex.EC{gex.ECGet, gex.ECPut, gex.ECAM, gex.ECLC, gex.ECRMW} {
		leaf, err := gex.EventQueryLeaf(gex.EventInvalid, ec)
		if err != nil {
			t.Errorf("EventQueryLeaf(EventInvalid, %v) = %v", ec, err)
		} else if err := leaf.Test(); err != nil {
			t.Errorf("leaf %v of EventInvalid: Test() = %v, want nil (it has already happened)", ec, err)
		}
		_, err = gex.EventQueryLeaf(gex.EventNoOp, ec)
		wantErr(t, fmt.Sprintf("EventQueryLeaf(EventNoOp, %v)", ec), err, gex.ErrBadArg)
	}
	for _, ec := range []gex.EC{gex.ECAll, gex.ECGet | gex.ECPut, gex.ECLC | gex.ECPut, 0, 1 << 20} {
		_, err := gex.EventQueryLeaf(gex.EventInvalid, ec)
		wantErr(t, fmt.Sprintf("EventQueryLeaf(EventInvalid, %#x)", uint32(ec)), err, gex.ErrBadArg)
	}
}

// TestEventConsumed: success consumes an event; synchronising it again
// (through a copy of the handle, or in an array) is an error the library
// reports. Path (b), where NB operations return real events.
func TestEventConsumed(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: 1}, func(e *rankEnv) {
		peer := (e.rank + 1) % e.size
		base := rmaSeg(e, peer).Owner + gex.Addr(4096*e.rank)
		dst := make([]byte, 64)
		for i, how := range []string{"Wait", "Test", "WaitAll", "WaitSome"} {
			ev, err := e.tm.GetNB(dst, peer, base, 0)
			e.Check(err, "GetNB")
			if ev == gex.EventInvalid {
				e.Fatalf("GetNB on path (b) returned EventInvalid: the reply cannot have been handled inside the call")
			}
			cp := ev
			switch how {
			case "Wait":
				e.Check(ev.Wait(), "Wait")
			case "Test":
				var terr error
				e.Check(e.c.BlockUntil(func() bool {
					terr = ev.Test()
					return !errors.Is(terr, gex.ErrNotReady)
				}), "BlockUntil(Test)")
				e.Check(terr, "Test")
			case "WaitAll":
				evs := []gex.Event{ev}
				e.Check(gex.EventWaitAll(evs, 0), "EventWaitAll")
				if evs[0] != gex.EventInvalid {
					e.Fatalf("EventWaitAll left the completed entry as %v, want EventInvalid", evs[0])
				}
			case "WaitSome":
				evs := []gex.Event{gex.EventInvalid, ev}
				e.Check(gex.EventWaitSome(evs, 0), "EventWaitSome")
				if evs[1] != gex.EventInvalid {
					e.Fatalf("EventWaitSome left the only event as %v, want EventInvalid", evs[1])
				}
			}
			what := fmt.Sprintf("case %d: synchronised by %s, then", i, how)
			expectRMAErr(e, what+" Wait on a copy", cp.Wait(), "synchronized")
			expectRMAErr(e, what+" Test on a copy", cp.Test(), "synchronized")
			expectRMAErr(e, what+" EventTestAll on a copy", gex.EventTestAll([]gex.Event{cp}, 0), "synchronized")
			expectRMAErr(e, what+" EventWaitSome on a copy", gex.EventWaitSome([]gex.Event{gex.EventInvalid, cp}, 0), "synchronized")
			// A later operation reusing the library's event state does not
			// revive the stale handle.
			ev2, err := e.tm.GetNB(dst, peer, base, 0)
			e.Check(err, "GetNB")
			expectRMAErr(e, what+" Wait on a copy while another operation is in flight", cp.Wait(), "synchronized")
			e.Check(ev2.Wait(), "Wait on the new operation")
		}
	})
}

// TestEventArrays: Test/Wait Some/All over arrays that mix EventInvalid with
// NB events on both paths (on path (a) they may complete inside the call, on
// path (b) they may still be pending): whatever the timing, a completed entry
// is overwritten with EventInvalid, a pending one is left alone, Some succeeds
// only if at least one entry completed, All only if every entry did, and the
// data is there after the Wait.
func TestEventArrays(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		const zone = 1 << 19
		conformance(t, 3, jobOpts{segSize: 3 * zone, supernode: sn}, func(e *rankEnv) {
			mine := e.seg.Bytes()
			for w := range uint64(e.size) {
				copy(mine[w*zone:w*zone+zone/2], rmaData(uint64(500+e.rank), zone/2))
			}
			e.Barrier()
			const n = 70_000 // two AM chunks on path (b)
			for round := 0; round < 4; round++ {
				var evs []gex.Event
				var dsts [][]byte
				var srcs []gex.Rank
				seed := uint64(600 + 10*round + 100*int(e.rank))
				for r := range e.size {
					base := rmaSeg(e, r).Owner + gex.Addr(uint64(e.rank)*zone)
					dst := make([]byte, n)
					ev, err := e.tm.GetNB(dst, r, base, 0)
					e.Check(err, "GetNB")
					evs = append(evs, gex.EventInvalid, ev)
					dsts, srcs = append(dsts, dst), append(srcs, r)
					ev, err = e.tm.PutNB(r, base+zone/2+gex.Addr(n*round%(zone/4)), rmaData(seed+uint64(r), n), nil, 0)
					e.Check(err, "PutNB")
					evs = append(evs, ev)
				}
				before := append([]gex.Event(nil), evs...)
				pending := func(evs []gex.Event) int {
					k := 0
					for _, ev := range evs {
						if ev != gex.EventInvalid {
							k++
						}
					}
					return k
				}
				// checkStep: entries only ever go from what they were to
				// EventInvalid.
				checkStep := func(what string, prev, now []gex.Event) {
					for i := range now {
						if now[i] != prev[i] && now[i] != gex.EventInvalid {
							e.Fatalf("%s: entry %d changed to %v, want it unchanged or EventInvalid", what, i, now[i])
						}
					}
				}
				var err error
				switch round % 2 {
				case 0: // TestSome, WaitSome, then WaitAll
					p0 := pending(evs)
					err = gex.EventTestSome(evs, 0)
					checkStep("EventTestSome", before, evs)
					switch {
					case err == nil && p0 > 0 && pending(evs) == p0:
						e.Fatalf("EventTestSome succeeded but no entry was overwritten")
					case errors.Is(err, gex.ErrNotReady) && pending(evs) != p0:
						e.Fatalf("EventTestSome returned ErrNotReady but overwrote %d entries", p0-pending(evs))
					case err != nil && !errors.Is(err, gex.ErrNotReady):
						e.Fatalf("EventTestSome: %v", err)
					}
					prev := append([]gex.Event(nil), evs...)
					p1 := pending(evs)
					e.Check(gex.EventWaitSome(evs, 0), "EventWaitSome")
					checkStep("EventWaitSome", prev, evs)
					if p1 > 0 && pending(evs) == p1 {
						e.Fatalf("EventWaitSome returned with no entry overwritten")
					}
					e.Check(gex.EventWaitAll(evs, 0), "EventWaitAll")
				case 1: // TestAll until done, polling in between, then WaitSome on the all-invalid array
					for {
						prev := append([]gex.Event(nil), evs...)
						err = gex.EventTestAll(evs, 0)
						checkStep("EventTestAll", prev, evs)
						if err == nil {
							break
						}
						if !errors.Is(err, gex.ErrNotReady) {
							e.Fatalf("EventTestAll: %v", err)
						}
						if pending(evs) == 0 {
							e.Fatalf("EventTestAll returned ErrNotReady with every entry overwritten")
						}
						e.Check(e.c.Poll(), "Poll")
					}
					e.Check(gex.EventWaitSome(evs, 0), "EventWaitSome on an all-invalid array")
					e.Check(gex.EventTestSome(evs, 0), "EventTestSome on an all-invalid array")
				}
				if pending(evs) != 0 {
					e.Fatalf("after the array calls %d entries are not EventInvalid", pending(evs))
				}
				for i, dst := range dsts {
					wantBytes(e, fmt.Sprintf("GetNB from rank %d synchronised through an array", srcs[i]), dst, rmaData(uint64(500+srcs[i]), n))
				}
			}
			e.Barrier()
		})
	})
}

// TestEventTestNeverPolls: "_Test: no Poll call is made" and "_Wait: Polls
// until success". A GetNB (path (b)) to a peer parked in a handler cannot
// complete; after the peer is released and has answered (its reply waiting
// unpolled in this rank's queue), any number of Tests still see it pending,
// because nothing polled; Wait polls and completes it. The same holds for the
// array forms and for EventQueryLeaf's leaf of a pending PutNB.
func TestEventTestNeverPolls(t *testing.T) {
	p := newParking(2)
	loopJob(t, 2, jobOpts{segSize: 1 << 16, supernode: 1}, func(e *rankEnv) {
		p.register(e)
		copy(e.seg.Bytes(), rmaData(uint64(700+e.rank), 1<<16))
		e.Barrier()
		if e.rank != 0 {
			return // rank 1 gets parked while it polls in the harness's barrier
		}
		defer p.releaseAll()
		const tries = 1000
		bs := rmaSeg(e, 1)

		// Phase 0: a get.
		p.park(e, 1, 0)
		dst := make([]byte, 4096)
		ev, err := e.tm.GetNB(dst, 1, bs.Owner+100, 0)
		e.Check(err, "GetNB")
		evs := []gex.Event{gex.EventInvalid, ev}
		notReadyN(e, "Test while the target is parked", tries, ev.Test)
		p.unpark(e, 1, 0)
		notReadyN(e, "Test with the reply waiting unpolled", tries, ev.Test)
		notReadyN(e, "EventTestSome with the reply waiting unpolled", tries, func() error { return gex.EventTestSome(evs, 0) })
		notReadyN(e, "EventTestAll with the reply waiting unpolled", tries, func() error { return gex.EventTestAll(evs, 0) })
		if evs[1] != ev {
			e.Fatalf("a pending entry was overwritten by a Test that returned ErrNotReady")
		}
		e.Check(ev.Wait(), "Wait (polls)")
		wantBytes(e, "GetNB after Wait", dst, rmaData(701, 1<<16)[100:4196])

		// Phase 1: a put with a local-completion leaf; the root stays
		// pending while the target is parked, and the leaf queried from it
		// once local completion was observed tests done.
		p.park(e, 1, 1)
		src := rmaCopy(710, 5000)
		var lc gex.Event
		root, err := e.tm.PutNB(1, bs.Owner+8192, src, &lc, 0)
		e.Check(err, "PutNB(&lc)")
		e.Check(lc.Wait(), "Wait on the local-completion leaf")
		fill(src, 0xEE) // locally complete: the source may be reused
		leaf, err := gex.EventQueryLeaf(root, gex.ECLC)
		e.Check(err, "EventQueryLeaf(root, ECLC)")
		again, err := gex.EventQueryLeaf(root, gex.ECLC)
		e.Check(err, "EventQueryLeaf(root, ECLC) again")
		if leaf != gex.EventInvalid && again != leaf {
			e.Fatalf("two queries of the same leaf returned different events (%v, %v)", leaf, again)
		}
		e.Check(leaf.Test(), "Test on the queried ECLC leaf (local completion has happened)")
		_, err = gex.EventQueryLeaf(root, gex.ECAll)
		expectRMAErr(e, "EventQueryLeaf(root, ECAll)", err)
		notReadyN(e, "Test on the root while the target is parked", tries, root.Test)
		p.unpark(e, 1, 1)
		notReadyN(e, "Test on the root with the acknowledgement waiting unpolled", tries, root.Test)
		e.Check(root.Wait(), "Wait on the root (polls)")
		got := make([]byte, 5000)
		e.Check(e.tm.GetBlocking(got, 1, bs.Owner+8192, 0), "GetBlocking")
		wantBytes(e, "PutNB whose source was reused after local completion", got, rmaData(710, 5000))
	})
}

// TestEventArraysPending: with one operation held pending (its target
// parked) and one that can complete, WaitSome returns once the completable
// one is done, overwriting it and leaving the pending one; TestAll and
// TestSome report ErrNotReady; after the release (reply unpolled) TestSome
// still does; WaitAll completes everything.
func TestEventArraysPending(t *testing.T) {
	p := newParking(1)
	loopJob(t, 3, jobOpts{segSize: 1 << 16, supernode: 1}, func(e *rankEnv) {
		p.register(e)
		copy(e.seg.Bytes(), rmaData(uint64(800+e.rank), 1<<16))
		e.Barrier()
		if e.rank != 0 {
			return
		}
		defer p.releaseAll()
		held, free := rmaSeg(e, 1), rmaSeg(e, 2)
		p.park(e, 1, 0)
		heldDst, freeDst := make([]byte, 3000), make([]byte, 3000)
		evHeld, err := e.tm.GetNB(heldDst, 1, held.Owner+512, 0)
		e.Check(err, "GetNB from the parked rank")
		evFree, err := e.tm.GetNB(freeDst, 2, free.Owner+512, 0)
		e.Check(err, "GetNB from the free rank")
		evs := []gex.Event{gex.EventInvalid, evHeld, gex.EventInvalid, evFree}
		e.Check(gex.EventWaitSome(evs, 0), "EventWaitSome")
		if evs[3] != gex.EventInvalid || evs[1] != evHeld || evs[0] != gex.EventInvalid || evs[2] != gex.EventInvalid {
			e.Fatalf("after EventWaitSome the array is %v, want [invalid, held, invalid, invalid]", evs)
		}
		wantBytes(e, "GetNB completed by EventWaitSome", freeDst, rmaData(802, 1<<16)[512:3512])
		notReadyN(e, "EventTestAll with the target parked", 100, func() error { return gex.EventTestAll(evs, 0) })
		notReadyN(e, "EventTestSome with the target parked", 100, func() error { return gex.EventTestSome(evs, 0) })
		p.unpark(e, 1, 0)
		notReadyN(e, "EventTestSome with the reply waiting unpolled", 100, func() error { return gex.EventTestSome(evs, 0) })
		if evs[1] != evHeld {
			e.Fatalf("a pending entry was overwritten")
		}
		e.Check(gex.EventWaitAll(evs, 0), "EventWaitAll")
		for i, ev := range evs {
			if ev != gex.EventInvalid {
				e.Fatalf("entry %d is %v after EventWaitAll, want EventInvalid", i, ev)
			}
		}
		wantBytes(e, "GetNB completed by EventWaitAll", heldDst, rmaData(801, 1<<16)[512:3512])
	})
}
