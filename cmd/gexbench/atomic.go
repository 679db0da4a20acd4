package main

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/gex"
)

// The atomic benchmark, in the shape of GASNet's tests/testfaddperf: remote
// GEX_OP_FADD of 1 on a counter in rank 1's segment, as blocking latency
// (OpNB then Event.Wait) and as an NBI flood (OpNBI many times, then one
// NBIWait(ECRMW)), for U64 and, latency only, for U32. The counters are set to
// 0 first and read back at the end, so the run also checks that every FADD
// happened exactly once.

// Offsets of the counters in rank 1's segment.
const (
	counter64Off = 0
	counter32Off = 8
)

// atomicOps are the operations the benchmark's domains are created for.
const atomicOps = gex.OPFAdd | gex.OPSet | gex.OPGet

// domains are the benchmark's atomic domains. ADCreate is collective, so
// every rank creates them, although only rank 0 operates on them.
type domains struct {
	u64 *gex.AD[uint64]
	u32 *gex.AD[uint32]
}

func newDomains(tm *gex.TM) (*domains, error) {
	u64, err := gex.ADCreate[uint64](tm, gex.DTU64, atomicOps, 0)
	if err != nil {
		return nil, err
	}
	u32, err := gex.ADCreate[uint32](tm, gex.DTU32, atomicOps, 0)
	if err != nil {
		u64.Destroy()
		return nil, err
	}
	return &domains{u64: u64, u32: u32}, nil
}

// destroy destroys both domains; every operation on them must have completed
// everywhere (after the final barrier).
func (d *domains) destroy() error {
	err := d.u64.Destroy()
	if err2 := d.u32.Destroy(); err == nil {
		err = err2
	}
	return err
}

// counter is one remote counter and the number of FADDs of 1 applied to it.
type counter[T uint32 | uint64] struct {
	ad    *gex.AD[T]
	addr  gex.Addr
	fadds uint64
}

// set writes v to the counter (GEX_OP_SET) and waits for it.
func (k *counter[T]) set(v T) error {
	ev, err := k.ad.OpNB(nil, peer, k.addr, gex.OPSet, v, 0, 0)
	if err != nil {
		return err
	}
	return ev.Wait()
}

// get reads the counter (GEX_OP_GET).
func (k *counter[T]) get() (T, error) {
	var v T
	ev, err := k.ad.OpNB(&v, peer, k.addr, gex.OPGet, 0, 0, 0)
	if err != nil {
		return 0, err
	}
	err = ev.Wait()
	return v, err
}

// latency returns the function timeBatches times: n blocking FADDs of 1
// (OpNB, then Wait). After the n operations it checks the value the last one
// fetched: the counter starts at 0 and only rank 0 adds to it, so the k-th
// FADD (from 0) fetches k.
//
// Not inlined: the Go compiler leaves the calls in a closure unexpanded when
// it copies the closure into a caller that inlines its maker (Event.Wait
// stayed a call here), which a loop in user code does not suffer.
//
//go:noinline
func (k *counter[T]) latency() func(n int) error {
	var r T
	return func(n int) error {
		for j := 0; j < n; j++ {
			ev, err := k.ad.OpNB(&r, peer, k.addr, gex.OPFAdd, 1, 0, 0)
			if err != nil {
				return err
			}
			if err := ev.Wait(); err != nil {
				return err
			}
		}
		k.fadds += uint64(n)
		if n > 0 && r != T(k.fadds-1) {
			return fmt.Errorf("FADD %d fetched %d, want %d", k.fadds-1, r, T(k.fadds-1))
		}
		return nil
	}
}

// flood issues n FADDs of 1 with OpNBI (all fetching into the same result, as
// testfaddperf does), then waits for them with NBIWait(ECRMW).
func (k *counter[T]) flood(c *gex.Client, n int) error {
	var r T
	for j := 0; j < n; j++ {
		if err := k.ad.OpNBI(&r, peer, k.addr, gex.OPFAdd, 1, 0, 0); err != nil {
			return err
		}
	}
	err := c.NBIWait(gex.ECRMW, 0)
	if err == nil {
		k.fadds += uint64(n)
	}
	return err
}

// rateStats are operation rates in M ops/s over the samples.
type rateStats struct {
	median, best float64
	ops          int // operations per sample
}

// floodRate measures k.flood: -samples samples of -reps operations each (0 =
// as many as fill about floodTarget, found by doubling from 1000 after a
// warm-up).
func (b *bench) floodRate(k *counter[uint64]) (rateStats, error) {
	cfg := b.cfg
	if err := k.flood(b.c, 1000); err != nil { // warm-up
		return rateStats{}, err
	}
	n := cfg.reps
	if n == 0 {
		n = 1000
		for {
			t0 := time.Now()
			if err := k.flood(b.c, n); err != nil {
				return rateStats{}, err
			}
			d := time.Since(t0)
			if d >= floodTarget/10 || n >= 1<<26 {
				n = int(min(max(1, int64(float64(n)*float64(floodTarget)/float64(max(d, time.Microsecond)))), 1<<26))
				break
			}
			n *= 2
		}
	}
	rates := make([]float64, 0, cfg.samples)
	for s := 0; s < cfg.samples; s++ {
		t0 := time.Now()
		if err := k.flood(b.c, n); err != nil {
			return rateStats{}, err
		}
		sec := max(time.Since(t0), time.Nanosecond).Seconds()
		rates = append(rates, float64(n)/sec/1e6)
	}
	sort.Float64s(rates)
	return rateStats{median: median(rates), best: rates[len(rates)-1], ops: n}, nil
}

// xaddLoop is the local reference: a sync/atomic add per iteration, which is
// what a FADD through the mapping comes down to.
//
//go:noinline
func xaddLoop(p *atomic.Uint64, n int) {
	for range n {
		p.Add(1)
	}
}

// atomic runs the atomic benchmark on rank 0.
func (b *bench) atomic(d *domains) (*results, error) {
	cfg, tm := b.cfg, b.tm
	long, short := b.pathName()
	k64 := &counter[uint64]{ad: d.u64, addr: b.remote + counter64Off}
	k32 := &counter[uint32]{ad: d.u32, addr: b.remote + counter32Off}
	if err := k64.set(0); err != nil {
		return nil, fmt.Errorf("U64 SET: %w", err)
	}
	if err := k32.set(0); err != nil {
		return nil, fmt.Errorf("U32 SET: %w", err)
	}

	res := &results{}
	fmt.Fprintf(&res.table, "gexbench atomic: remote atomics (GEX_OP_FADD of 1 on a counter in rank %d's segment), rank 0 -> rank %d of %d; path: %s\n",
		peer, peer, tm.QuerySize(), long)
	fmt.Fprintf(&res.table, "latency: OpNB + Event.Wait, %d operations after a warm-up of %d, timed in %d batches;\n"+
		"avg = total time / operations, median and min = median and best of the batch averages\n\n",
		cfg.iters, max(1, cfg.iters/10), min(cfg.batches, cfg.iters))
	fmt.Fprintf(&res.table, "%-28s %14s %14s %14s\n", "", "avg (us)", "median (us)", "min (us)")

	st64, err := timeBatches(cfg.iters, cfg.batches, k64.latency())
	if err != nil {
		return nil, fmt.Errorf("U64 FADD latency: %w", err)
	}
	fmt.Fprintf(&res.table, "%-28s %14s %14s %14s\n", "U64 FADD latency", durName(st64.avg), durName(st64.median), durName(st64.min))
	res.latRows("fadd-u64", short, 8, st64)

	st32, err := timeBatches(cfg.iters, cfg.batches, k32.latency())
	if err != nil {
		return nil, fmt.Errorf("U32 FADD latency: %w", err)
	}
	fmt.Fprintf(&res.table, "%-28s %14s %14s %14s\n", "U32 FADD latency", durName(st32.avg), durName(st32.median), durName(st32.min))
	res.latRows("fadd-u32", short, 4, st32)

	fl, err := b.floodRate(k64)
	if err != nil {
		return nil, fmt.Errorf("U64 FADD flood: %w", err)
	}
	fmt.Fprintf(&res.table, "\nflood: OpNBI FADD %d times, then NBIWait(ECRMW); %d samples; M ops/s\n", fl.ops, cfg.samples)
	fmt.Fprintf(&res.table, "%-28s %14s %14s\n", "", "median", "best")
	fmt.Fprintf(&res.table, "%-28s %14.3f %14.3f\n", "U64 FADD flood", fl.median, fl.best)
	res.add("fadd-flood-u64", short, 8, "median", fl.median, "Mops/s")
	res.add("fadd-flood-u64", short, 8, "best", fl.best, "Mops/s")

	// The check: the counters hold exactly the number of FADDs performed,
	// read with GEX_OP_GET and, as plain bytes, with GetBlocking.
	got64, err := k64.get()
	if err != nil {
		return nil, fmt.Errorf("U64 GET: %w", err)
	}
	got32, err := k32.get()
	if err != nil {
		return nil, fmt.Errorf("U32 GET: %w", err)
	}
	if got64 != k64.fadds {
		return nil, fmt.Errorf("the U64 counter is %d after %d FADDs of 1", got64, k64.fadds)
	}
	if got32 != uint32(k32.fadds) {
		return nil, fmt.Errorf("the U32 counter is %d after %d FADDs of 1", got32, k32.fadds)
	}
	var raw [16]byte
	if err := tm.GetBlocking(raw[:], peer, b.remote, 0); err != nil {
		return nil, err
	}
	if r64, r32 := binary.NativeEndian.Uint64(raw[counter64Off:]), binary.NativeEndian.Uint32(raw[counter32Off:]); r64 != got64 || r32 != got32 {
		return nil, fmt.Errorf("GetBlocking reads the counters as %d and %d, GEX_OP_GET as %d and %d", r64, r32, got64, got32)
	}

	// The reference: what a FADD through the mapping comes down to.
	var local atomic.Uint64
	ref, _ := timeBatches(cfg.iters, cfg.batches, func(n int) error { xaddLoop(&local, n); return nil })
	res.latRows("xadd64", "local", 8, ref)
	fmt.Fprintf(&res.table, "\nreference, plain Go in the same loop (no gexgo):\n")
	fmt.Fprintf(&res.table, "%-28s %14s %14s %14s\n", "  local atomic.Uint64.Add", durName(ref.avg), durName(ref.median), durName(ref.min))
	fmt.Fprintf(&res.table, "U64 FADD = %.1fx the local atomic add (medians)\n", st64.median/ref.median)
	fmt.Fprintf(&res.table, "checked: the U64 counter is %d and the U32 counter %d, the numbers of FADDs performed (GEX_OP_GET and GetBlocking agree)\n",
		got64, got32)
	return res, nil
}
