package gex_test

import (
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Allocation budgets of the AM hot paths (STYLE.md: "testing.AllocsPerRun
// for every hot operation"): injecting a Short or a small Medium and polling
// must not allocate.

// allocSelf is a one-rank loop client with a Short (0 and 4 args) and a
// Medium handler that count their runs.
type allocSelf struct {
	c                    *gex.Client
	tm                   *gex.TM
	short0, short4, med4 gex.AMIndex
	ran                  atomic.Int64
}

func newAllocSelf(tb testing.TB) *allocSelf {
	tb.Helper()
	c, ep, tm := selfClient(tb)
	a := &allocSelf{c: c, tm: tm}
	count := func(*gex.Token, []byte, []gex.AMArg) { a.ran.Add(1) }
	table := []gex.AMEntry{
		{Name: "short0", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 0, Fn: count},
		{Name: "short4", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 4, Fn: count},
		{Name: "med4", Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 4, Fn: count},
	}
	if err := ep.RegisterHandlers(table); err != nil {
		tb.Fatal(err)
	}
	a.short0, a.short4, a.med4 = table[0].Index, table[1].Index, table[2].Index
	return a
}

// drain polls until want handlers have run in total.
func (a *allocSelf) drain(tb testing.TB, want int64) {
	tb.Helper()
	if err := a.c.BlockUntil(func() bool { return a.ran.Load() >= want }); err != nil {
		tb.Fatal(err)
	}
	if got := a.ran.Load(); got != want {
		tb.Fatalf("%d handlers ran, want %d", got, want)
	}
}

// allocRuns is below the smp ring capacity (4096 one-slot AMs), so sends measured without
// polling never wait.
const allocRuns = 200

func TestNoAllocs(t *testing.T) {
	a := newAllocSelf(t)
	var sent int64
	var failed error
	check := func(err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	cases := []struct {
		name  string
		sends int64 // AMs each run injects (and must be drained afterwards)
		polls bool  // the run polls its own AMs
		f     func()
	}{
		{"RequestShort to self, 0 args", 1, false, func() { check(a.tm.RequestShort(0, a.short0, 0)) }},
		{"RequestShort to self, 4 args", 1, false, func() { check(a.tm.RequestShort(0, a.short4, 0, 1, 2, 3, 4)) }},
		{"RequestMedium of 64 bytes to self", 1, false, func() {
			check(a.tm.RequestMedium(0, a.med4, payload64[:], nil, 0, 1, 2, 3, 4))
		}},
		{"RequestMedium of 64 bytes to self, EventNow", 1, false, func() {
			check(a.tm.RequestMedium(0, a.med4, payload64[:], gex.EventNow, 0, 1, 2, 3, 4))
		}},
		{"Poll with nothing pending", 0, true, func() { check(a.c.Poll()) }},
		{"Poll delivering one Short", 1, true, func() {
			check(a.tm.RequestShort(0, a.short4, 0, 1, 2, 3, 4))
			check(a.c.Poll())
		}},
		{"Poll delivering one Medium", 1, true, func() {
			check(a.tm.RequestMedium(0, a.med4, payload64[:], nil, 0, 1, 2, 3, 4))
			check(a.c.Poll())
		}},
	}
	for _, tc := range cases {
		before := a.ran.Load()
		allocs := testing.AllocsPerRun(allocRuns, tc.f)
		if failed != nil {
			t.Fatalf("%s: %v", tc.name, failed)
		}
		runs := int64(allocRuns + 1) // AllocsPerRun adds a warm-up run
		sent += tc.sends * runs
		if tc.polls && a.ran.Load()-before != tc.sends*runs {
			t.Errorf("%s: %d handlers ran during %d runs, want %d", tc.name, a.ran.Load()-before, runs, tc.sends*runs)
		}
		a.drain(t, sent)
		if allocs != 0 {
			t.Errorf("%s: %v allocations per call, want 0", tc.name, allocs)
		}
	}
}

var payload64 [64]byte

func BenchmarkRequestShortSelf(b *testing.B) {
	a := newAllocSelf(b)
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		if err := a.tm.RequestShort(0, a.short0, 0); err != nil {
			b.Fatal(err)
		}
		n++
		if n%256 == 0 {
			if err := a.c.Poll(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	a.drain(b, n)
}

func BenchmarkPollEmpty(b *testing.B) {
	a := newAllocSelf(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := a.c.Poll(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAMShortPingPongLoop measures a RequestShort/ReplyShort round trip
// between two loop ranks (goroutines); ns/op is the round-trip time.
func BenchmarkAMShortPingPongLoop(b *testing.B) {
	loopOnly(b)
	lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	lj.Run(func(rank int) {
		c, ep, tm, err := lj.ClientInit(rank, "PINGPONG", 0, gex.WithWaitMode(gex.WaitSpin))
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		var pongs, stop, ready atomic.Int64
		table := []gex.AMEntry{
			{Name: "pong", Flags: gex.FlagAMShort | gex.FlagAMReply, Fn: func(*gex.Token, []byte, []gex.AMArg) { pongs.Add(1) }},
			{Name: "ping", Flags: gex.FlagAMShort | gex.FlagAMRequest},
			{Name: "stop", Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { stop.Add(1) }},
			{Name: "ready", Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { ready.Add(1) }},
		}
		pong := &table[0].Index
		table[1].Fn = func(tk *gex.Token, _ []byte, _ []gex.AMArg) { _ = tk.ReplyShort(*pong, 0) }
		if err := ep.RegisterHandlers(table); err != nil {
			b.Error(err)
			return
		}
		ping, stopIdx, readyIdx := table[1].Index, table[2].Index, table[3].Index
		// Both ranks registered before any traffic.
		if err := tm.RequestShort(gex.Rank(1-rank), readyIdx, 0); err != nil {
			b.Error(err)
			return
		}
		_ = c.BlockUntil(func() bool { return ready.Load() == 1 })
		if rank == 1 {
			_ = c.BlockUntil(func() bool { return stop.Load() == 1 })
			return
		}
		var i int64
		for b.Loop() {
			i++
			if err := tm.RequestShort(1, ping, 0); err != nil {
				b.Error(err)
				break
			}
			if err := c.BlockUntil(func() bool { return pongs.Load() >= i }); err != nil {
				b.Error(err)
				break
			}
		}
		_ = tm.RequestShort(1, stopIdx, 0)
	})
}
