package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/gexgo/gexgo/gex"
)

// The collective benchmarks run on every rank of the job: each rank times the
// same sequence of collectives over the primordial team, and rank 0 prints its
// figures (a collective's time is bounded by its slowest member, so every
// rank measures about the same).

// collBench is one collective measured back to back: op initiates the i-th
// call and returns its event.
type collBench struct {
	name string
	size int
	op   func(i int) (gex.Event, error)
}

// collIters is the default number of calls per case.
func (cfg *config) collIters(size int) int {
	if cfg.iters > 0 {
		return cfg.iters
	}
	switch {
	case size >= 1<<20:
		return 300
	case size >= 64<<10:
		return 3000
	}
	return 100000
}

// collPath names how the collectives' messages travel.
func collPath(c *gex.Client, n int) (long, short string) {
	if c.QueryMyPosition().HostSetSize > 1 {
		return "tcp (hierarchical: shared memory inside each host, AMs over TCP among one member per host, for the barrier, broadcasts and reductions up to 1 KiB; larger reductions as AMs)", "tcp"
	}
	if nb, _ := c.QueryNbrhdInfo(); len(nb) == n {
		return "smp shm (one neighbourhood: the barrier, broadcasts from 16 KiB and reductions up to 1 KiB through the shared collective areas; the rest as AMs through shared memory)", "smp-shm"
	}
	return "smp AM (AMs, ranks in separate neighbourhoods)", "smp-am"
}

// measureColl runs the barrier, bcast or reduce benchmark on this rank and,
// on rank 0, prints the results.
func measureColl(cfg *config, c *gex.Client, tm *gex.TM, seg *gex.Segment, stdout io.Writer) error {
	me, n := tm.QueryRank(), int(tm.QuerySize())
	sizes := cfg.collSizes()
	var cases []collBench
	switch cfg.bench {
	case "barrier":
		cases = append(cases, collBench{"BarrierNB+Wait", 0, func(int) (gex.Event, error) { return tm.BarrierNB(0) }})
	case "bcast":
		for _, size := range sizes {
			src, dst := make([]byte, size), make([]byte, size)
			for i := range src {
				src[i] = byte(i)
			}
			// The root rotates: one fixed root would finish each broadcast
			// as soon as its data is sent and run ahead of the others.
			cases = append(cases, collBench{"BroadcastNB+Wait (root rotating)", size, func(i int) (gex.Event, error) {
				return tm.BroadcastNB(gex.Rank(i%n), dst, src, size, 0)
			}})
		}
		for _, size := range sizes {
			if size < 64<<10 || size > len(seg.Bytes()) {
				continue
			}
			src, dst := seg.Bytes()[:size], make([]byte, size)
			cases = append(cases, collBench{"BroadcastNB+Wait (src in segment)", size, func(i int) (gex.Event, error) {
				return tm.BroadcastNB(gex.Rank(i%n), dst, src, size, 0)
			}})
		}
	case "reduce":
		for _, size := range cfg.reduceSizes() {
			src, dst := make([]byte, size), make([]byte, size)
			for i := 0; i < size; i += 8 {
				binary.LittleEndian.PutUint64(src[i:], uint64(int(me)+i))
			}
			cnt := size / 8
			cases = append(cases,
				collBench{"ReduceToAllNB+Wait (U64 ADD)", size, func(int) (gex.Event, error) {
					return tm.ReduceToAllNB(dst, src, gex.DTU64, 8, cnt, gex.OPAdd, nil, nil, 0)
				}},
				collBench{"ReduceToOneNB+Wait (U64 ADD, root rotating)", size, func(i int) (gex.Event, error) {
					return tm.ReduceToOneNB(gex.Rank(i%n), dst, src, gex.DTU64, 8, cnt, gex.OPAdd, nil, nil, 0)
				}})
		}
	}

	if me == 0 {
		stop, err := cfg.startProfile()
		if err != nil {
			return err
		}
		defer stop()
	}
	long, short := collPath(c, n)
	res := &results{}
	fmt.Fprintf(&res.table, "gexbench %s: collectives over all %d ranks, back to back; path: %s\n", cfg.bench, n, long)
	fmt.Fprintf(&res.table, "every rank times the same calls in %d batches after a warm-up of a tenth;\n"+
		"avg = total time / calls, median and min = median and best of the batch averages (rank 0's clock)\n\n", cfg.batches)
	fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s %12s\n", "operation", "size", "calls", "avg (us)", "median (us)", "min (us)", "MB/s (med)")
	for _, cb := range cases {
		iters := cfg.collIters(cb.size)
		k := 0
		st, err := timeBatches(iters, cfg.batches, func(cnt int) error {
			for j := 0; j < cnt; j++ {
				ev, err := cb.op(k)
				if err != nil {
					return err
				}
				if err := ev.Wait(); err != nil {
					return err
				}
				k++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s of %d bytes: %w", cb.name, cb.size, err)
		}
		gbs := "-"
		if cb.size > 0 {
			mbs := float64(cb.size) / st.median * 1000 // bytes per ns = GB/s
			gbs = fmt.Sprintf("%.1f", mbs)
			res.add(cfg.bench+"-"+opTag(cb.name), short, cb.size, "bw", mbs, "MB/s")
		}
		fmt.Fprintf(&res.table, "%-44s %10s %8d %12s %12s %12s %12s\n", cb.name, sizeName(cb.size), iters, durName(st.avg), durName(st.median), durName(st.min), gbs)
		res.latRows(cfg.bench+"-"+opTag(cb.name), short, cb.size, st)
	}
	cfg.floor.rows(res)
	if err := checkColl(tm, n); err != nil {
		return err
	}
	fmt.Fprintf(&res.table, "checked: a broadcast and a ReduceToAll after the runs delivered the expected values\n")
	if me == 0 {
		if err := cfg.output(res, c, tm, long, stdout); err != nil {
			return err
		}
	}
	return nil
}

// opTag is the CSV tag of a case: its operation name up to "NB".
func opTag(name string) string {
	tag := name
	if i := bytes.Index([]byte(name), []byte("NB")); i > 0 {
		tag = name[:i]
	}
	if bytes.Contains([]byte(name), []byte("src in segment")) {
		tag += "-seg" // one series per case, not two under one name
	}
	return tag
}

// checkColl verifies the collectives still compute the right thing after the
// timed runs.
func checkColl(tm *gex.TM, n int) error {
	me := tm.QueryRank()
	src := make([]byte, 8)
	binary.LittleEndian.PutUint64(src, uint64(me)+1)
	dst := make([]byte, 8)
	ev, err := tm.ReduceToAllNB(dst, src, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
	if err == nil {
		err = ev.Wait()
	}
	if err != nil {
		return err
	}
	if got, want := binary.LittleEndian.Uint64(dst), uint64(n*(n+1)/2); got != want {
		return fmt.Errorf("ReduceToAll check: sum of rank+1 = %d, want %d", got, want)
	}
	want := []byte("gexbench broadcast check")
	b := make([]byte, len(want))
	if int(me) == n-1 {
		copy(b, want)
	}
	ev, err = tm.BroadcastNB(gex.Rank(n-1), b, b, len(b), 0)
	if err == nil {
		err = ev.Wait()
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(b, want) {
		return fmt.Errorf("broadcast check: got %q", b)
	}
	return nil
}
