package gex_test

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// TestTCPNoAllocs: the AM and RMA hot paths over the tcp conduit do not
// allocate (STYLE.md: "Budgets are tests"). Two pretend hosts of one rank
// each, TCP on loopback: rank 0 measures each operation with
// testing.AllocsPerRun (which counts its whole process: sending, the
// non-blocking reads in Poll, the handlers of the replies); rank 1 serves
// the requests meanwhile and checks that serving them allocated nothing
// either (the Go runtime's own background allocations are allowed one per
// thousand operations).
func TestTCPNoAllocs(t *testing.T) {
	runTCP(t, 2, 2, jobOpts{segSize: 1 << 20}, tcpNoAllocs)
}

const (
	hAllocPing  gex.AMIndex = 210
	hAllocPong  gex.AMIndex = 211
	hAllocMed   gex.AMIndex = 212
	hAllocLong  gex.AMIndex = 213
	hAllocStop  gex.AMIndex = 214
	hAllocMPong gex.AMIndex = 215
	hAllocMark  gex.AMIndex = 216
	tcpAllocOps             = 100
)

func tcpNoAllocs(e *rankEnv) {
	var pongs, served atomic.Int64
	var stop, mark atomic.Bool
	bs := rmaSeg(e, 1-e.rank)
	peer := 1 - e.rank
	e.Check(e.ep.RegisterHandlers([]gex.AMEntry{
		{Index: hAllocPing, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Fn: func(t *gex.Token, _ []byte, a []gex.AMArg) {
			served.Add(1)
			e.Check(t.ReplyShort(hAllocPong, 0, a[0]), "ReplyShort")
		}},
		{Index: hAllocMed, Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 1, Fn: func(t *gex.Token, p []byte, a []gex.AMArg) {
			served.Add(1)
			e.Check(t.ReplyMedium(hAllocMPong, p, nil, 0, a[0]), "ReplyMedium")
		}},
		{Index: hAllocLong, Flags: gex.FlagAMLong | gex.FlagAMRequest, NArgs: 1, Fn: func(t *gex.Token, p []byte, a []gex.AMArg) {
			served.Add(1)
			e.Check(t.ReplyShort(hAllocPong, 0, a[0]), "ReplyShort")
		}},
		{Index: hAllocPong, Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 1, Fn: func(*gex.Token, []byte, []gex.AMArg) {
			pongs.Add(1)
		}},
		{Index: hAllocMPong, Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: 1, Fn: func(*gex.Token, []byte, []gex.AMArg) {
			pongs.Add(1)
		}},
		{Index: hAllocMark, Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { mark.Store(true) }},
		{Index: hAllocStop, Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { stop.Store(true) }},
	}), "RegisterHandlers")
	e.Barrier()
	if e.rank == 1 {
		// Rank 0 runs its cases twice; the second pass is counted here
		// (the first grows buffers to their working sizes).
		// No GC cycle in the window: its own bookkeeping (mark workers,
		// sudogs) counts as mallocs of the process and is not the library's.
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		e.Check(e.c.BlockUntil(mark.Load), "BlockUntil")
		before, threads0 := heapAllocs(), osThreads()
		n0 := served.Load()
		e.Check(e.c.BlockUntil(stop.Load), "BlockUntil")
		after, threads1 := heapAllocs(), osThreads()
		n := served.Load() - n0
		if allocs := after - before; n < tcpAllocOps || allocs*1000 > uint64(n) {
			e.Errorf("serving %d requests over tcp (after %d unmeasured) allocated %d times, want 0 (OS threads %d -> %d)", n, n0, allocs, threads0, threads1)
		}
		return
	}
	defer func() { e.Check(e.tm.RequestShort(peer, hAllocStop, 0), "RequestShort(stop)") }()
	tm, base := e.tm, bs.Owner+4096
	var want atomic.Int64
	answered := func() bool { return pongs.Load() >= want.Load() } // built once: the measured calls do not allocate it
	roundTrip := func(check func(error), send func() error) {
		want.Store(pongs.Load() + 1)
		check(send())
		check(e.c.BlockUntil(answered))
	}
	for pass := 0; pass < 2; pass++ {
		if pass == 1 {
			e.Check(e.tm.RequestShort(peer, hAllocMark, 0), "RequestShort(mark)")
		}
		tcpAllocPass(e, tm, peer, base, roundTrip)
	}
}

// heapAllocs is the process's count of heap allocations so far, tiny ones
// included. It is read through runtime/metrics, which does not stop the
// world: runtime.ReadMemStats does, and restarting the world may start an
// OS thread, whose runtime structures (7 allocations) then counted in the
// window as if the library had made them (seen on a loaded machine).
// osThreads is the process's count of OS threads (/proc/self/status), 0 if
// unknown.
func osThreads() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/tiny/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

func tcpAllocPass(e *rankEnv, tm *gex.TM, peer gex.Rank, base gex.Addr, roundTrip func(check func(error), send func() error)) {
	for _, n := range []int{8, 4096, 64 << 10} {
		src, dst := make([]byte, n), make([]byte, n)
		// The senders are built here, once: a closure built in the
		// measured call would be the test's own allocation.
		sendShort := func() error { return tm.RequestShort(peer, hAllocPing, 0, 1) }
		sendMedium := func() error { return tm.RequestMedium(peer, hAllocMed, src, nil, 0, 1) }
		sendLong := func() error { return tm.RequestLong(peer, hAllocLong, src, base, nil, 0, 1) }
		assertNoAllocs(e, fmt.Sprintf("of %d bytes over tcp", n), tcpAllocOps, func(check func(error)) []allocCase {
			cases := []allocCase{
				{"PutBlocking", func() { check(tm.PutBlocking(peer, base, src, 0)) }},
				{"GetBlocking", func() { check(tm.GetBlocking(dst, peer, base, 0)) }},
				{"PutNBI+NBIWait", func() {
					check(tm.PutNBI(peer, base, src, nil, 0))
					check(e.c.NBIWait(gex.ECPut, 0))
				}},
				{"GetNB+Wait", func() {
					ev, err := tm.GetNB(dst, peer, base, 0)
					check(err)
					check(ev.Wait())
				}},
				{"AM Medium round trip", func() {
					roundTrip(check, sendMedium)
				}},
				{"AM Long + Short reply", func() {
					roundTrip(check, sendLong)
				}},
			}
			if n == 8 {
				cases = append(cases, allocCase{"AM Short round trip", func() {
					roundTrip(check, sendShort)
				}})
			}
			return cases
		})
	}
}
