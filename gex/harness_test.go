package gex_test

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/launch"
)

// The conformance suite runs every test body as an SPMD job twice: on the
// loop conduit (ranks are goroutines; run it under -race) and on the smp
// conduit with real processes (the test binary re-executed as the ranks).

// rankEnv is what a conformance body gets on each rank.
type rankEnv struct {
	t    testing.TB
	c    *gex.Client
	ep   *gex.EP
	tm   *gex.TM
	seg  *gex.Segment
	rank gex.Rank
	size gex.Rank
	loop bool

	fatal   func(msg string)
	arrived [64]atomic.Int32 // barrier arrivals per epoch (mod 64)
	epoch   int
}

// Fatalf fails the test and ends the job (all ranks).
func (e *rankEnv) Fatalf(format string, args ...any) {
	e.t.Helper()
	e.fatal(fmt.Sprintf("rank %d: ", e.rank) + fmt.Sprintf(format, args...))
}

// Errorf reports a failure without ending the job.
func (e *rankEnv) Errorf(format string, args ...any) {
	e.t.Helper()
	e.t.Errorf("rank %d: %s", e.rank, fmt.Sprintf(format, args...))
}

// Check fails the test and ends the job if err is not nil.
func (e *rankEnv) Check(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.Fatalf("%s: %v", what, err)
	}
}

// Logf logs on rank 0 only.
func (e *rankEnv) Logf(format string, args ...any) {
	if e.rank == 0 {
		e.t.Logf(format, args...)
	}
}

const barrierIdx gex.AMIndex = 128

// Barrier is an AM-based barrier that polls while it waits, so ranks keep
// serving each other's requests until everyone arrived. (The collectives
// issue brings gex's own barrier.)
func (e *rankEnv) Barrier() {
	e.t.Helper()
	ep := e.epoch
	e.epoch++
	for r := gex.Rank(0); r < e.size; r++ {
		if r != e.rank {
			e.Check(e.tm.RequestShort(r, barrierIdx, 0, int32(ep)), "barrier RequestShort")
		}
	}
	slot := &e.arrived[ep%len(e.arrived)]
	e.Check(e.c.BlockUntil(func() bool { return slot.Load() >= int32(e.size-1) }), "barrier BlockUntil")
	slot.Add(-int32(e.size - 1))
}

// jobOpts configure a conformance job.
type jobOpts struct {
	segSize   uint64 // 0: no segment
	supernode int    // GASNET_SUPERNODE_MAXSIZE (0 = unlimited)
	hosts     []string
	env       []string
	rcv       bool // receive goroutine
	waitMode  gex.WaitMode
	launch    func(*launch.Config) // adjusts the smp job's launch (network namespaces)
}

// setup runs in every rank after ClientInit: it registers the barrier handler
// and attaches the segment.
func setup(e *rankEnv, o jobOpts) {
	e.rank, e.size = e.tm.QueryRank(), e.tm.QuerySize()
	err := e.ep.RegisterHandlers([]gex.AMEntry{{
		Index: barrierIdx, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Name: "test-barrier",
		Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { e.arrived[int(a[0])%len(e.arrived)].Add(1) },
	}})
	e.Check(err, "RegisterHandlers(barrier)")
	if o.segSize > 0 {
		e.seg, err = gex.SegmentAttach(e.tm, o.segSize)
		e.Check(err, "SegmentAttach")
	}
	// No AM is delivered here before this rank polls (the receive goroutine
	// is started after setup), so peers' barrier AMs always find the handler.
}

// runLoop runs body as an n-rank job on the loop conduit.
func runLoop(t *testing.T, n int, o jobOpts, body func(e *rankEnv)) {
	t.Helper()
	lj, err := gex.NewLoopJob(gex.LoopConfig{Size: n, SupernodeMaxSize: o.supernode, Hosts: o.hosts})
	if err != nil {
		t.Fatal(err)
	}
	lj.Run(func(rank int) {
		opts := []gex.Option{gex.WithReceiveGoroutine(o.rcv), gex.WithWaitMode(o.waitMode)}
		// The receive goroutine starts only after setup registered the
		// barrier handler: a peer's first barrier AM must find it.
		c, ep, tm, err := lj.ClientInit(rank, "CONFORMANCE", gex.FlagDeferThreads, opts...)
		if err != nil {
			t.Errorf("rank %d: ClientInit: %v", rank, err)
			return
		}
		e := &rankEnv{t: t, c: c, ep: ep, tm: tm, loop: true}
		e.fatal = func(msg string) {
			t.Error(msg)
			c.Exit(1) // ends this goroutine and releases the other ranks
		}
		setup(e, o)
		c.StartProgressThreads()
		body(e)
		e.Barrier() // nobody leaves while a peer may still need it to poll
		if err := c.Close(); err != nil {
			t.Errorf("rank %d: Close: %v", rank, err)
		}
	})
	if code, exited := lj.ExitCode(); exited && code != 0 && !t.Failed() {
		t.Fatalf("loop job exited with code %d", code)
	}
	runtime.GC()
}

// envConduit selects the conduits the conformance suite runs on: "loop",
// "smp", or unset for both. `GEX_TEST_CONDUIT=loop go test -race ./gex/` runs
// the suite on goroutine ranks under the race detector.
const envConduit = "GEX_TEST_CONDUIT"

// conformance runs body on loop and (in process mode) on smp.
func conformance(t *testing.T, n int, o jobOpts, body func(e *rankEnv)) {
	t.Helper()
	sel := os.Getenv(envConduit)
	if sel != "" && sel != "loop" && sel != "smp" {
		t.Fatalf("%s=%q: want loop, smp or unset", envConduit, sel)
	}
	if !inRank() && sel != "smp" {
		t.Run("loop", func(t *testing.T) { runLoop(t, n, o, body) })
	}
	if sel != "loop" {
		t.Run("smp", func(t *testing.T) { runSMP(t, n, o, body) })
	}
}
