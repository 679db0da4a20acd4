package gex_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Allocation budgets of RMA on the shared-memory path (STYLE.md: "Budgets
// are tests"): a put or get through the mapping, to self or to a
// neighbourhood peer, in every flavour, must not allocate. Loop conduit only
// (testing.AllocsPerRun counts the whole process).

// allocCase is one operation whose allocations are measured.
type allocCase struct {
	name string
	f    func()
}

// allocReporter is where assertNoAllocs reports: a *testing.T on the test
// goroutine, or the rankEnv of a job (whose Fatalf ends the job instead of
// calling FailNow off the test goroutine).
type allocReporter interface {
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// assertNoAllocs measures every case that build returns (the cases report
// call failures through check) with testing.AllocsPerRun and reports any
// case that fails or allocates; what says where the cases run.
func assertNoAllocs(rep allocReporter, what string, runs int, build func(check func(error)) []allocCase) {
	var failed error
	check := func(err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	for _, tc := range build(check) {
		allocs := testing.AllocsPerRun(runs, tc.f)
		if failed != nil {
			rep.Fatalf("%s %s: %v", tc.name, what, failed)
		}
		if allocs != 0 {
			rep.Errorf("%s %s: %v allocations per call, want 0", tc.name, what, allocs)
		}
	}
}

// allocRun measures operations of tm on rank r's segment at addr (mapped
// here), reporting through rep.
type allocRun func(rep allocReporter, c *gex.Client, tm *gex.TM, r gex.Rank, addr gex.Addr)

// allocsOnSelf runs run against this process's own segment (a one-rank
// client).
func allocsOnSelf(t *testing.T, run allocRun) {
	c, _, tm := selfClient(t)
	seg, err := gex.SegmentAttach(tm, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	run(t, c, tm, 0, seg.QueryAddr()+64)
}

// allocsOnPeer runs run on rank 0 of a 2-rank loop job against rank 1's
// mapped segment; rank 1 does not poll meanwhile (the mapped path needs
// none, and its allocations would count).
func allocsOnPeer(t *testing.T, run allocRun) {
	done := make(chan struct{})
	loopJob(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		if e.rank == 1 {
			<-done
			return
		}
		defer close(done)
		bs := rmaSeg(e, 1)
		if bs.Local == nil {
			e.Fatalf("rank 1's segment is not mapped (shared-memory path expected)")
		}
		run(e, e.c, e.tm, 1, bs.Owner+64)
	})
}

// rmaAllocCases are the operations measured: rank r's segment is mapped
// here and base is an address inside it with room for 4 KiB.
func rmaAllocCases(c *gex.Client, tm *gex.TM, r gex.Rank, base gex.Addr, check func(error)) []allocCase {
	var cases []allocCase
	for _, n := range []int{8, 4096} {
		src, dst := make([]byte, n), make([]byte, n)
		cases = append(cases,
			allocCase{fmt.Sprintf("PutNBI of %d bytes", n), func() { check(tm.PutNBI(r, base, src, nil, 0)) }},
			allocCase{fmt.Sprintf("PutNBI of %d bytes, EventGroup", n), func() { check(tm.PutNBI(r, base, src, gex.EventGroup, 0)) }},
			allocCase{fmt.Sprintf("GetNBI of %d bytes", n), func() { check(tm.GetNBI(dst, r, base, 0)) }},
			allocCase{fmt.Sprintf("PutNB+Wait of %d bytes", n), func() {
				ev, err := tm.PutNB(r, base, src, nil, 0)
				check(err)
				check(ev.Wait())
			}},
			allocCase{fmt.Sprintf("PutNB+Wait of %d bytes, *Event leaf", n), func() {
				var leaf gex.Event
				ev, err := tm.PutNB(r, base, src, &leaf, 0)
				check(err)
				check(leaf.Wait())
				check(ev.Wait())
			}},
			allocCase{fmt.Sprintf("GetNB+Wait of %d bytes", n), func() {
				ev, err := tm.GetNB(dst, r, base, 0)
				check(err)
				check(ev.Wait())
			}},
			allocCase{fmt.Sprintf("PutBlocking of %d bytes", n), func() { check(tm.PutBlocking(r, base, src, 0)) }},
			allocCase{fmt.Sprintf("GetBlocking of %d bytes", n), func() { check(tm.GetBlocking(dst, r, base, 0)) }},
			allocCase{fmt.Sprintf("PutBlocking of %d bytes, PEER_SEG_OFFSET", n), func() { check(tm.PutBlocking(r, 64, src, gex.FlagPeerSegOffset)) }},
			allocCase{fmt.Sprintf("PutNBI of %d bytes, EventNow", n), func() { check(tm.PutNBI(r, base, src, gex.EventNow, 0)) }},
			allocCase{fmt.Sprintf("PutNBI of %d bytes, EventDefer", n), func() { check(tm.PutNBI(r, base, src, gex.EventDefer, 0)) }},
			allocCase{fmt.Sprintf("PutNB+Test of %d bytes, EventDefer", n), func() {
				ev, err := tm.PutNB(r, base, src, gex.EventDefer, 0)
				check(err)
				check(ev.Test())
			}},
			allocCase{fmt.Sprintf("GetNB+Test of %d bytes", n), func() {
				ev, err := tm.GetNB(dst, r, base, 0)
				check(err)
				check(ev.Test())
			}},
		)
	}
	for _, nb := range []int{1, 2, 3, 4, 5, 7} {
		cases = append(cases,
			allocCase{fmt.Sprintf("PutBlockingVal of %d bytes", nb), func() { check(tm.PutBlockingVal(r, base, 0x0102030405060708, nb, 0)) }},
			allocCase{fmt.Sprintf("PutNBVal+Wait of %d bytes", nb), func() {
				ev, err := tm.PutNBVal(r, base, 7, nb, 0)
				check(err)
				check(ev.Wait())
			}},
			allocCase{fmt.Sprintf("GetBlockingVal of %d bytes", nb), func() {
				_, err := tm.GetBlockingVal(r, base, nb, 0)
				check(err)
			}},
		)
	}
	cases = append(cases,
		allocCase{"PutBlockingVal of 8 bytes", func() { check(tm.PutBlockingVal(r, base, 0x0102030405060708, 8, 0)) }},
		allocCase{"PutNBIVal of 4 bytes", func() { check(tm.PutNBIVal(r, base, 0x01020304, 4, 0)) }},
		allocCase{"PutNBIVal of 8 bytes", func() { check(tm.PutNBIVal(r, base, 0x01020304, 8, 0)) }},
		allocCase{"PutNBVal+Wait of 8 bytes", func() {
			ev, err := tm.PutNBVal(r, base, 7, 8, 0)
			check(err)
			check(ev.Wait())
		}},
		allocCase{"GetBlockingVal of 8 bytes", func() {
			_, err := tm.GetBlockingVal(r, base, 8, 0)
			check(err)
		}},
		allocCase{"NBIWait(ECAll) with nothing outstanding", func() { check(c.NBIWait(gex.ECAll, 0)) }},
		allocCase{"NBITest(ECAll) with nothing outstanding", func() { check(c.NBITest(gex.ECAll, 0)) }},
	)
	return cases
}

func runRMAAllocs(rep allocReporter, c *gex.Client, tm *gex.TM, r gex.Rank, base gex.Addr) {
	assertNoAllocs(rep, fmt.Sprintf("to rank %d", r), 200, func(check func(error)) []allocCase {
		return rmaAllocCases(c, tm, r, base, check)
	})
}

func TestRMANoAllocsSelf(t *testing.T) { allocsOnSelf(t, runRMAAllocs) }

func TestRMANoAllocsPeer(t *testing.T) { allocsOnPeer(t, runRMAAllocs) }

// TestRMANoAllocsAMPath: path (b), the AM protocol to a peer whose segment
// is not mapped, does not allocate either (on either rank: AllocsPerRun
// counts the process, and the peer serves the requests meanwhile).
func TestRMANoAllocsAMPath(t *testing.T) {
	var stop atomic.Bool
	loopJob(t, 2, jobOpts{segSize: 1 << 16, supernode: 1}, func(e *rankEnv) {
		if e.rank == 1 {
			e.Check(e.c.BlockUntil(stop.Load), "BlockUntil")
			return
		}
		defer stop.Store(true)
		bs := rmaSeg(e, 1)
		if bs.Local != nil {
			e.Fatalf("rank 1's segment is mapped (path (b) expected)")
		}
		tm, base := e.tm, bs.Owner+4096
		for _, n := range []int{8, 4096} {
			src, dst := make([]byte, n), make([]byte, n)
			assertNoAllocs(e, fmt.Sprintf("of %d bytes on path (b)", n), 100, func(check func(error)) []allocCase {
				return []allocCase{
					{"PutBlocking", func() { check(tm.PutBlocking(1, base, src, 0)) }},
					{"GetBlocking", func() { check(tm.GetBlocking(dst, 1, base, 0)) }},
					{"PutNB+Wait", func() {
						ev, err := tm.PutNB(1, base, src, nil, 0)
						check(err)
						check(ev.Wait())
					}},
					{"GetNB+Wait", func() {
						ev, err := tm.GetNB(dst, 1, base, 0)
						check(err)
						check(ev.Wait())
					}},
					{"PutNBI+NBIWait", func() {
						check(tm.PutNBI(1, base, src, nil, 0))
						check(e.c.NBIWait(gex.ECPut, 0))
					}},
					{"GetNBI+NBIWait", func() {
						check(tm.GetNBI(dst, 1, base, 0))
						check(e.c.NBIWait(gex.ECGet, 0))
					}},
				}
			})
		}
	})
}

// rmaBench runs fn on rank 0 of a 2-rank loop job while rank 1 polls (so
// that path (b) makes progress) until rank 0 is done.
func rmaBench(b *testing.B, supernode int, fn func(b *testing.B, tm *gex.TM, peer gex.BoundSegment)) {
	loopOnly(b)
	lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 2, SupernodeMaxSize: supernode})
	if err != nil {
		b.Fatal(err)
	}
	var stop atomic.Bool
	lj.Run(func(rank int) {
		c, _, tm, err := lj.ClientInit(rank, "RMABENCH", 0, gex.WithWaitMode(gex.WaitSpin))
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		if _, err := gex.SegmentAttach(tm, 1<<16); err != nil {
			b.Error(err)
			return
		}
		if rank == 1 {
			_ = c.BlockUntil(stop.Load)
			return
		}
		defer stop.Store(true)
		bs, _, err := tm.QueryBoundSegmentNB(1, 0)
		if err != nil {
			b.Error(err)
			return
		}
		fn(b, tm, bs)
	})
}

func benchSelf(b testing.TB) (*gex.TM, gex.Addr) {
	_, _, tm := selfClient(b)
	seg, err := gex.SegmentAttach(tm, 1<<16)
	if err != nil {
		b.Fatal(err)
	}
	return tm, seg.QueryAddr()
}

func BenchmarkPutBlocking8Self(b *testing.B) {
	tm, base := benchSelf(b)
	src := make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		if err := tm.PutBlocking(0, base+64, src, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetBlocking8Self(b *testing.B) {
	tm, base := benchSelf(b)
	dst := make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		if err := tm.GetBlocking(dst, 0, base+64, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func benchPut8(b *testing.B, tm *gex.TM, peer gex.BoundSegment) {
	src := make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		if err := tm.PutBlocking(1, peer.Owner+64, src, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutBlocking8Peer: a neighbourhood peer, path (a).
func BenchmarkPutBlocking8Peer(b *testing.B) { rmaBench(b, 0, benchPut8) }

// BenchmarkPutBlocking8AMPath: a peer whose segment is not mapped, path (b):
// ns/op is a Long request and its acknowledgement.
func BenchmarkPutBlocking8AMPath(b *testing.B) { rmaBench(b, 1, benchPut8) }
