package gasnet_test

import (
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gasnet"
	"github.com/gexgo/gexgo/gex"
)

// pair is a 2-node loop job whose node 0 runs on the caller's goroutine and
// whose node 1 polls on its own until stop.
type pair struct {
	j    *gasnet.Job
	tm   *gex.TM
	segs []gasnet.SegInfo
	h    gasnet.Handler // on both nodes: counts, and replies to rep
	rep  gasnet.Handler // on both nodes: counts replies
	hits *atomic.Int64  // node 1's requests handled
	want int64          // replies awaited (node 0's goroutine only)
	reps *atomic.Int64  // node 0's replies received
	stop func()
}

func newPair(tb testing.TB, supernode int) *pair {
	tb.Helper()
	lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 2, SupernodeMaxSize: supernode})
	if err != nil {
		tb.Fatal(err)
	}
	var hits, reps [2]atomic.Int64
	var done atomic.Bool
	ended := make(chan error, 1)
	start := func(rank int) (*gasnet.Job, *gex.TM, []gasnet.HandlerEntry, error) {
		c, ep, tm, err := lj.ClientInit(rank, "GASNET1_BENCH", gex.FlagUsesGASNet1)
		if err != nil {
			return nil, nil, nil, err
		}
		j, err := gasnet.New(c, ep, tm)
		if err != nil {
			return nil, nil, nil, err
		}
		table := []gasnet.HandlerEntry{{}, {Fn: func(*gasnet.Token, []byte, []gasnet.HandlerArg) { reps[rank].Add(1) }}}
		table[0].Fn = func(t *gasnet.Token, _ []byte, _ []gasnet.HandlerArg) {
			hits[rank].Add(1)
			_ = j.AMReplyShort(t, table[1].Index)
		}
		return j, tm, table, j.Attach(table, 1<<20, 0)
	}
	go func() {
		j, tm, _, err := start(1)
		if err == nil {
			err = j.BlockUntil(done.Load)
		}
		if err == nil {
			var ev gex.Event
			if ev, err = tm.BarrierNB(0); err == nil {
				err = ev.Wait()
			}
		}
		ended <- err
	}()
	j, tm, table, err := start(0)
	if err != nil {
		tb.Fatal(err)
	}
	p := &pair{j: j, tm: tm, h: table[0].Index, rep: table[1].Index, hits: &hits[1], reps: &reps[0], segs: make([]gasnet.SegInfo, 2)}
	if err := j.GetSegmentInfo(p.segs); err != nil {
		tb.Fatal(err)
	}
	p.stop = func() {
		done.Store(true)
		ev, err := tm.BarrierNB(0)
		if err == nil {
			err = ev.Wait()
		}
		if err == nil {
			err = <-ended
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

// BenchmarkLayer measures each GASNet-1 call beside the GASNet-EX call it
// wraps, node 0 to node 1 on the mapped path (loop conduit, one process), in
// one run: the b.N operations of each are timed in 64 batches that alternate
// between EX and GASNet-1, so machine noise hits both alike. It reports the
// medians of the batch averages (ex-ns/op, gasnet1-ns/op) and the overhead.
func BenchmarkLayer(b *testing.B) {
	p := newPair(b, 0)
	defer p.stop()
	src := make([]byte, 8)
	dst := p.segs[1].Addr
	bench := func(name string, ex, g1 func() error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			sideBySide(b, ex, g1)
		})
	}
	bench("put8", func() error { return p.tm.PutBlocking(1, dst, src, 0) }, func() error { return p.j.Put(1, dst, src) })
	bench("get8", func() error { return p.tm.GetBlocking(src, 1, dst, 0) }, func() error { return p.j.Get(src, 1, dst) })
	bench("putnbi8", func() error { return p.tm.PutNBI(1, dst, src, nil, 0) }, func() error { return p.j.PutNBI(1, dst, src) })
	bench("putval8", func() error { return p.tm.PutBlockingVal(1, dst, 42, 8, 0) }, func() error { return p.j.PutVal(1, dst, 42, 8) })
	// AM Short round trips: a request with one argument, a reply from the
	// handler, waited for with BlockUntil (loop conduit: goroutine
	// scheduling dominates; gexbench am -api gasnet1 measures processes).
	got := func() bool { return p.reps.Load() >= p.want }
	roundTrip := func(send func() error) func() error {
		return func() error {
			p.want = p.reps.Load() + 1
			if err := send(); err != nil {
				return err
			}
			return p.j.BlockUntil(got)
		}
	}
	bench("amshort1-roundtrip",
		roundTrip(func() error { return p.tm.RequestShort(1, p.h, 0, 7) }),
		roundTrip(func() error { return p.j.AMRequestShort(1, p.h, 7) }))
}

// sideBySide times b.N calls of ex and of g1 in alternating batches (the
// first of each pair alternating too).
func sideBySide(b *testing.B, ex, g1 func() error) {
	const batches = 64
	per := max(1, b.N/batches)
	var t [2][]float64
	b.ResetTimer()
	fs := []func() error{ex, g1}
	for k := range batches {
		for o := range 2 {
			i := o ^ k&1 // alternate which goes first: no position bias
			f := fs[i]
			t0 := time.Now()
			for range per {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
			t[i] = append(t[i], float64(time.Since(t0).Nanoseconds())/float64(per))
		}
	}
	med := func(xs []float64) float64 { sort.Float64s(xs); return xs[len(xs)/2] }
	e, g := med(t[0]), med(t[1])
	b.ReportMetric(e, "ex-ns/op")
	b.ReportMetric(g, "gasnet1-ns/op")
	b.ReportMetric((g/e-1)*100, "overhead-%")
}

// TestNoAllocs: the GASNet-1 hot paths allocate nothing (mapped path).
func TestNoAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	p := newPair(t, 0)
	defer p.stop()
	src := make([]byte, 8)
	dst := p.segs[1].Addr
	hs := make([]gasnet.Handle, 2)
	for name, f := range map[string]func(){
		"Put":            func() { _ = p.j.Put(1, dst, src) },
		"Get":            func() { _ = p.j.Get(src, 1, dst) },
		"PutNB+Wait":     func() { h, _ := p.j.PutNB(1, dst, src); _ = p.j.WaitSyncnb(h) },
		"GetNBI+Sync":    func() { _ = p.j.GetNBI(src, 1, dst); _ = p.j.WaitSyncnbiGets() },
		"PutVal":         func() { _ = p.j.PutVal(1, dst, 42, 8) },
		"GetVal":         func() { _, _ = p.j.GetVal(1, dst, 8) },
		"GetNBVal+Wait":  func() { h, _ := p.j.GetNBVal(1, dst, 8); _, _ = p.j.WaitSyncnbValget(h) },
		"Memset":         func() { _ = p.j.Memset(1, dst, 3, 64) },
		"WaitSyncnbAll":  func() { _ = p.j.WaitSyncnbAll(hs) },
		"AMRequestShort": func() { _ = p.j.AMRequestShort(1, p.h, 1, 2, 3) },
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, n)
		}
	}
	// Every AM reached node 1's handler.
	if err := p.j.BlockUntil(func() bool { return p.hits.Load() >= 201 }); err != nil {
		t.Fatal(err)
	}
}
