package main

import (
	"fmt"
	"io"
	"sort"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/gasnet"
	"github.com/gexgo/gexgo/gex"
)

// -api gasnet1: the put, get, am and barrier benchmarks through the GASNet-1
// layer (package gasnet), each measured side by side with the GASNet-EX call
// it wraps, in the same job and interleaved batch by batch (an EX batch, then
// a GASNet-1 batch, ...), so that the layer's cost is visible even on a
// loaded machine: the table gives both medians and the overhead of GASNet-1
// over EX. The job starts the GASNet-1 way (gasnet.Init, gasnet.Attach) and
// the EX calls go to the objects gasnet.QueryGexObjects returns.
//
//	gexrun -n 2 gexbench put -api gasnet1     # gasnet_put vs gex_RMA_PutBlocking
//	gexrun -n 2 gexbench get -api gasnet1     # gasnet_get vs gex_RMA_GetBlocking
//	gexrun -n 2 gexbench am -api gasnet1      # gasnet_AMRequestShort0 round trip vs gex_AM_RequestShort0
//	gexrun -n 4 gexbench barrier -api gasnet1 # gasnet_barrier_notify+wait vs gex_Coll_BarrierNB+Wait

// apis are the values of -api.
var apis = []string{"ex", "gasnet1"}

// g1Benches are the benchmarks -api gasnet1 supports.
var g1Benches = []string{"put", "get", "am", "barrier"}

// g1Pair is one side-by-side case: ex and g1 each run n operations.
type g1Pair struct {
	name, size string
	bytes      int
	ex, g1     func(n int) error
}

// runGASNet1 is a whole rank of a -api gasnet1 job.
func runGASNet1(cfg *config, stdout, stderr io.Writer) int {
	j, err := gasnet.Init()
	if err != nil {
		fmt.Fprintln(stderr, "gexbench:", err)
		return 1
	}
	c, _, tm, _ := j.QueryGexObjects()
	defer c.Close()
	me, n := j.Mynode(), j.Nodes()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "gexbench: node %d: %v\n", me, err)
		return 1
	}
	if n < 2 {
		fmt.Fprintf(stderr, "gexbench: needs at least 2 nodes, this job has %d; start it with the launcher, e.g.\n  gexrun -n 2 gexbench %s -api gasnet1\n", n, cfg.bench)
		return 2
	}
	var replies atomic.Int64
	table := []gasnet.HandlerEntry{
		{Name: "g1-req", Fn: func(t *gasnet.Token, _ []byte, _ []gasnet.HandlerArg) { _ = j.AMReplyShort(t, 0) }},
		{Name: "g1-rep", Fn: func(*gasnet.Token, []byte, []gasnet.HandlerArg) { replies.Add(1) }},
	}
	// Indices are assigned by Attach; the request handler replies to the
	// reply handler's index, patched in below (the same on every node).
	size := cfg.segmentSize()
	if limit := j.GetMaxGlobalSegmentSize(); size > limit {
		return fail(fmt.Errorf("the benchmark needs a %d-byte segment, but GASNET_MAX_SEGSIZE allows %d", size, limit))
	}
	var hRep gasnet.Handler
	table[0].Fn = func(t *gasnet.Token, _ []byte, _ []gasnet.HandlerArg) { _ = j.AMReplyShort(t, hRep) }
	if err := j.Attach(table, size, 0); err != nil {
		return fail(err)
	}
	hReq := table[0].Index
	hRep = table[1].Index
	seginfo := make([]gasnet.SegInfo, n)
	if err := j.GetSegmentInfo(seginfo); err != nil {
		return fail(err)
	}
	barrier := func() error {
		if err := j.BarrierNotify(0, gasnet.BarrierFlagAnonymous); err != nil {
			return err
		}
		return j.BarrierWait(0, gasnet.BarrierFlagAnonymous)
	}
	if err := barrier(); err != nil {
		return fail(err)
	}
	bs, _, _ := tm.QueryBoundSegmentNB(1, gex.FlagImmediate)
	long, _ := pathNames(bs.Local != nil, onOtherHost(c, 1))
	if cfg.iters == 0 {
		cfg.iters = 1000000
		switch {
		case cfg.bench == "am" || cfg.bench == "barrier":
			cfg.iters = 20000
		case bs.Local == nil:
			cfg.iters = 100000
		}
	}
	var pairs []g1Pair
	local := j.Segment()
	remote := seginfo[1].Addr
	switch cfg.bench {
	case "put", "get":
		for _, sz := range cfg.latencySizes() {
			buf := local[:sz]
			if cfg.bench == "put" {
				pairs = append(pairs, g1Pair{"put", sizeName(sz), sz,
					func(k int) error {
						for range k {
							if err := tm.PutBlocking(1, remote, buf, 0); err != nil {
								return err
							}
						}
						return nil
					},
					func(k int) error {
						for range k {
							if err := j.Put(1, remote, buf); err != nil {
								return err
							}
						}
						return nil
					}})
			} else {
				pairs = append(pairs, g1Pair{"get", sizeName(sz), sz,
					func(k int) error {
						for range k {
							if err := tm.GetBlocking(buf, 1, remote, 0); err != nil {
								return err
							}
						}
						return nil
					},
					func(k int) error {
						for range k {
							if err := j.Get(buf, 1, remote); err != nil {
								return err
							}
						}
						return nil
					}})
			}
		}
	case "am":
		roundTrips := func(send func() error) func(k int) error {
			return func(k int) error {
				for range k {
					want := replies.Load() + 1
					if err := send(); err != nil {
						return err
					}
					if err := c.BlockUntil(func() bool { return replies.Load() >= want }); err != nil {
						return err
					}
				}
				return nil
			}
		}
		pairs = append(pairs, g1Pair{"AM Short round trip", "0 args", 0,
			roundTrips(func() error { return tm.RequestShort(1, hReq, 0) }),
			roundTrips(func() error { return j.AMRequestShort(1, hReq) })})
	case "barrier":
		pairs = append(pairs, g1Pair{"barrier", fmt.Sprintf("%d nodes", n), 0,
			func(k int) error {
				for range k {
					ev, err := tm.BarrierNB(0)
					if err == nil {
						err = ev.Wait()
					}
					if err != nil {
						return err
					}
				}
				return nil
			},
			func(k int) error {
				for range k {
					if err := barrier(); err != nil {
						return err
					}
				}
				return nil
			}})
	}
	var benchErr error
	if me == 0 || cfg.bench == "barrier" {
		res := &results{}
		fmt.Fprintf(&res.table, "gexbench %s -api gasnet1: the GASNet-1 call beside the GASNet-EX call it wraps, node 0 -> node 1 of %d; path: %s\n", cfg.bench, n, long)
		fmt.Fprintf(&res.table, "%d operations per case in %d batches, EX and GASNet-1 batches alternating; medians of the batch averages\n\n", cfg.iters, min(cfg.batches, cfg.iters))
		fmt.Fprintf(&res.table, "%-22s %10s %12s %12s %10s\n", "operation", "size", "EX", "GASNet-1", "overhead")
		for _, p := range pairs {
			ex, g1, err := timePair(cfg.iters, cfg.batches, p.ex, p.g1)
			if err != nil {
				benchErr = err
				break
			}
			fmt.Fprintf(&res.table, "%-22s %10s %12s %12s %+9.1f%%\n", p.name, p.size, durName(ex), durName(g1), (g1/ex-1)*100)
			res.add(cfg.bench, "ex", p.bytes, "median", ex/1000, "us")
			res.add(cfg.bench, "gasnet1", p.bytes, "median", g1/1000, "us")
		}
		if benchErr == nil && me == 0 {
			benchErr = cfg.output(res, c, tm, long, stdout)
		}
	}
	if err := barrier(); err != nil {
		return fail(err)
	}
	if benchErr != nil {
		return fail(benchErr)
	}
	return 0
}

// timePair times ex and g1 over iters operations each, in batches that
// alternate between them (after a warm-up of each), and returns the medians
// of their batch averages in ns.
func timePair(iters, batches int, ex, g1 func(n int) error) (float64, float64, error) {
	iters = max(iters, 1)
	nb := min(batches, iters)
	cnt := max(1, iters/nb)
	for _, f := range []func(int) error{ex, g1} {
		if err := f(max(1, iters/10)); err != nil {
			return 0, 0, err
		}
	}
	var per [2][]float64
	fs := []func(int) error{ex, g1}
	for k := range nb {
		for o := range 2 {
			i := o ^ k&1 // which runs first alternates: no position bias
			f := fs[i]
			t0 := time.Now()
			if err := f(cnt); err != nil {
				return 0, 0, err
			}
			per[i] = append(per[i], float64(time.Since(t0).Nanoseconds())/float64(cnt))
		}
	}
	sort.Float64s(per[0])
	sort.Float64s(per[1])
	return median(per[0]), median(per[1]), nil
}
