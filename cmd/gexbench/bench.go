package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gexgo/gexgo/gex"
)

// bench is rank 0's view of the measurement: its own segment (local source and
// destination buffers) and rank 1's (the remote side, named by its owner
// address).
type bench struct {
	cfg       *config
	c         *gex.Client
	tm        *gex.TM
	local     []byte   // rank 0's segment
	remote    gex.Addr // base of rank 1's segment
	mapped    bool     // rank 1's segment is mapped here
	otherHost bool     // rank 1 is on another host (tcp)
}

// peer is the rank every benchmark targets.
const peer gex.Rank = 1

// fillPattern writes the bytes rank r's segment starts with, so that a get can
// be checked.
func fillPattern(b []byte, r gex.Rank) {
	for i := range b {
		b[i] = pattern(i, r)
	}
}

func pattern(i int, r gex.Rank) byte { return byte(i + 31*int(r) + i>>8) }

// latStats are per-operation times in nanoseconds.
type latStats struct{ avg, median, min float64 }

// timeBatches runs f for iters operations in batches operations-per-call
// chunks (after an untimed warm-up of a tenth of them) and returns the average
// over all operations and the median and minimum of the batch averages. A
// batch of many operations keeps the clock's own cost (tens of ns) out of
// figures of a few ns.
func timeBatches(iters, batches int, f func(n int) error) (latStats, error) {
	iters = max(iters, 1)
	nb := min(batches, iters)
	if err := f(max(1, iters/10)); err != nil {
		return latStats{}, err
	}
	per := make([]float64, 0, nb)
	var total time.Duration
	done := 0
	for k := 0; k < nb; k++ {
		cnt := (iters - done) / (nb - k)
		t0 := time.Now()
		err := f(cnt)
		d := time.Since(t0)
		if err != nil {
			return latStats{}, err
		}
		per = append(per, float64(d.Nanoseconds())/float64(cnt))
		total += d
		done += cnt
	}
	sort.Float64s(per)
	return latStats{avg: float64(total.Nanoseconds()) / float64(done), median: median(per), min: per[0]}, nil
}

// median of sorted xs.
func median(xs []float64) float64 {
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// copyLoop is copy() with the length unknown at compile time: a call of
// runtime.memmove per iteration.
//
//go:noinline
func copyLoop(dst, src []byte, n int) {
	for range n {
		copy(dst, src)
	}
}

// move8Loop copies 8 bytes with one load and one store per iteration (the
// compiler keeps both inside the loop).
//
//go:noinline
func move8Loop(dst, src *[8]byte, n int) {
	for range n {
		*dst = *src
	}
}

// copySink keeps the reference copy's destination reachable, so the copies
// cannot be optimised away.
var copySink []byte

// latency measures PutBlocking (put) or GetBlocking (get) of each of
// the latency sizes, like testsmall, and a plain Go copy of 8 bytes in the same
// kind of loop for reference.
func (b *bench) latency(put bool) (*results, error) {
	cfg, tm := b.cfg, b.tm
	op := "GetBlocking"
	if put {
		op = "PutBlocking"
	}
	long, short := b.pathName()
	res := &results{}
	fmt.Fprintf(&res.table, "gexbench %s: %s latency (until remote completion), rank 0 -> rank %d of %d; path: %s\n",
		cfg.bench, op, peer, tm.QuerySize(), long)
	fmt.Fprintf(&res.table, "%d operations per size (from 16 KiB fewer: iters*8KiB/size, at least 100) after a warm-up of a tenth, timed in %d batches;\n"+
		"avg = total time / operations, median and min = median and best of the batch averages\n\n",
		cfg.iters, min(cfg.batches, cfg.iters))
	fmt.Fprintf(&res.table, "%10s %14s %14s %14s\n", "size", "avg (us)", "median (us)", "min (us)")

	sizes := cfg.latencySizes()
	var first latStats
	for i, size := range sizes {
		buf := b.local[:size]
		var f func(n int) error
		if put {
			f = func(n int) error {
				for j := 0; j < n; j++ {
					if err := tm.PutBlocking(peer, b.remote, buf, 0); err != nil {
						return err
					}
				}
				return nil
			}
		} else {
			f = func(n int) error {
				for j := 0; j < n; j++ {
					if err := tm.GetBlocking(buf, peer, b.remote, 0); err != nil {
						return err
					}
				}
				return nil
			}
		}
		st, err := timeBatches(cfg.sizeIters(size), cfg.batches, f)
		if err != nil {
			return nil, fmt.Errorf("%s of %d bytes: %w", op, size, err)
		}
		if i == 0 {
			first = st
		}
		fmt.Fprintf(&res.table, "%10s %14s %14s %14s\n", sizeName(size), durName(st.avg), durName(st.median), durName(st.min))
		res.latRows(cfg.bench, short, size, st)
	}

	// Check the bytes moved: after the puts rank 1's segment starts with
	// rank 0's pattern; after the gets rank 0's buffer holds rank 1's.
	n := sizes[len(sizes)-1]
	got := make([]byte, n)
	want := make([]byte, n)
	if put {
		if err := tm.GetBlocking(got, peer, b.remote, 0); err != nil {
			return nil, err
		}
		fillPattern(want, 0)
	} else {
		copy(got, b.local[:n])
		fillPattern(want, peer)
	}
	if !bytes.Equal(got, want) {
		return nil, fmt.Errorf("%s moved the wrong bytes: the first %d bytes differ from the pattern", op, n)
	}

	// The references: what an 8-byte put or get through the mapping comes
	// down to, in the same kind of loop, without gexgo.
	src, dst := new([8]byte), new([64]byte)
	copySink = dst[:]
	refCopy, _ := timeBatches(cfg.iters, cfg.batches, func(n int) error { copyLoop(dst[:8], src[:], n); return nil })
	refMove, _ := timeBatches(cfg.iters, cfg.batches, func(n int) error { move8Loop((*[8]byte)(dst[:8]), src, n); return nil })
	res.latRows("copy", "local", 8, refCopy)
	res.latRows("move8", "local", 8, refMove)
	fmt.Fprintf(&res.table, "\nreference, plain Go in the same loop (no gexgo):\n")
	fmt.Fprintf(&res.table, "%-44s %14s %14s %14s\n", "  copy() of 8 B, length known at run time", durName(refCopy.avg), durName(refCopy.median), durName(refCopy.min))
	fmt.Fprintf(&res.table, "%-44s %14s %14s %14s\n", "  8-byte array assignment (a load, a store)", durName(refMove.avg), durName(refMove.median), durName(refMove.min))
	if sizes[0] == 8 {
		fmt.Fprintf(&res.table, "8 B %s = %.1fx copy(), %.1fx the 8-byte assignment (medians)\n",
			op, first.median/refCopy.median, first.median/refMove.median)
	}
	fmt.Fprintf(&res.table, "checked: the last %s moved the expected bytes\n", op)
	return res, nil
}

// bwStats are bandwidths in MiB/s over the samples of one size.
type bwStats struct {
	median, best float64
	ops, reps    int
}

// floodTarget is how long a sample lasts when -reps is 0.
const floodTarget = 40 * time.Millisecond

// floodOne measures PutNBI (put) or GetNBI bandwidth of size-byte operations:
// a window of max(1, window/size) operations at consecutive offsets (the same
// offset with -reuse), then NBIWait; reps windows per sample.
func (b *bench) floodOne(put bool, size int) (bwStats, error) {
	cfg, tm, c := b.cfg, b.tm, b.c
	ops := max(1, cfg.window/size)
	step := size
	if cfg.reuse {
		step = 0
	}
	ec := gex.ECGet
	if put {
		ec = gex.ECPut
	}
	window := func() error {
		for i := 0; i < ops; i++ {
			off := i * step
			var err error
			if put {
				err = tm.PutNBI(peer, b.remote+gex.Addr(off), b.local[off:off+size], gex.EventNow, 0)
			} else {
				err = tm.GetNBI(b.local[off:off+size], peer, b.remote+gex.Addr(off), 0)
			}
			if err != nil {
				return err
			}
		}
		return c.NBIWait(ec, 0)
	}
	// Warm up, and time one window to choose the repetitions.
	if err := window(); err != nil {
		return bwStats{}, err
	}
	t0 := time.Now()
	if err := window(); err != nil {
		return bwStats{}, err
	}
	reps := cfg.reps
	if reps == 0 {
		one := max(time.Since(t0), time.Microsecond)
		reps = int(min(max(1, int64(floodTarget/one)), 1<<20))
	}
	bw := make([]float64, 0, cfg.samples)
	for s := 0; s < cfg.samples; s++ {
		t0 := time.Now()
		for r := 0; r < reps; r++ {
			if err := window(); err != nil {
				return bwStats{}, err
			}
		}
		sec := max(time.Since(t0), time.Nanosecond).Seconds()
		bw = append(bw, float64(reps)*float64(ops)*float64(size)/sec/1e6)
	}
	sort.Float64s(bw)
	return bwStats{median: median(bw), best: bw[len(bw)-1], ops: ops, reps: reps}, nil
}

// flood measures PutNBI and GetNBI bandwidth for every selected size, like
// testlarge.
func (b *bench) flood() (*results, error) {
	cfg := b.cfg
	long, short := b.pathName()
	offsets := "at consecutive offsets"
	if cfg.reuse {
		offsets = "all on the same bytes (-reuse, as testlarge)"
	}
	res := &results{}
	fmt.Fprintf(&res.table, "gexbench flood: PutNBI / GetNBI bandwidth, rank 0 -> rank %d of %d; path: %s\n", peer, b.tm.QuerySize(), long)
	fmt.Fprintf(&res.table, "window %s: max(1, window/size) operations %s, then NBIWait;\n"+
		"%d samples per size of %s windows each; median and best sample, MB/s (10^6 B/s, as OSU)\n\n",
		sizeName(cfg.window), offsets, cfg.samples, repsName(cfg.reps))
	fmt.Fprintf(&res.table, "%10s %10s %14s %14s %14s %14s %12s\n", "size", "ops/window", "put median", "put best", "get median", "get best", "windows p/g")
	for _, size := range cfg.floodSizes() {
		p, err := b.floodOne(true, size)
		if err != nil {
			return nil, fmt.Errorf("PutNBI flood of %d bytes: %w", size, err)
		}
		g, err := b.floodOne(false, size)
		if err != nil {
			return nil, fmt.Errorf("GetNBI flood of %d bytes: %w", size, err)
		}
		fmt.Fprintf(&res.table, "%10s %10d %14s %14s %14s %14s %12s\n", sizeName(size), p.ops,
			groupDigits(p.median), groupDigits(p.best), groupDigits(g.median), groupDigits(g.best), fmt.Sprintf("%d/%d", p.reps, g.reps))
		res.add("flood-put", short, size, "median", p.median, "MB/s")
		res.add("flood-put", short, size, "best", p.best, "MB/s")
		res.add("flood-get", short, size, "median", g.median, "MB/s")
		res.add("flood-get", short, size, "best", g.best, "MB/s")
	}
	return res, nil
}

func repsName(reps int) string {
	if reps == 0 {
		return fmt.Sprintf("~%v of", floodTarget)
	}
	return fmt.Sprint(reps)
}

// row is one CSV row: bench,path,size,metric,value,unit.
type row struct {
	bench, path  string
	size         int
	metric, unit string
	value        float64
}

// results are what a benchmark prints: the table, or the CSV rows.
type results struct {
	table strings.Builder
	rows  []row
}

func (r *results) add(bench, path string, size int, metric string, value float64, unit string) {
	r.rows = append(r.rows, row{bench: bench, path: path, size: size, metric: metric, unit: unit, value: value})
}

// latRows adds the rows of a latency (measured in ns, reported in us).
func (r *results) latRows(bench, path string, size int, st latStats) {
	r.add(bench, path, size, "avg", st.avg/1000, "us")
	r.add(bench, path, size, "median", st.median/1000, "us")
	r.add(bench, path, size, "min", st.min/1000, "us")
}

// csvHeader is the first line of -csv output.
const csvHeader = "bench,path,size,metric,value,unit"

func (r *results) writeCSV(w io.Writer) {
	var b strings.Builder
	b.WriteString(csvHeader + "\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "%s,%s,%d,%s,%s,%s\n", x.bench, x.path, x.size, x.metric, csvValue(x.value), x.unit)
	}
	io.WriteString(w, b.String())
}

// csvValue spells a value with 6 significant digits (no exponent from
// 0.001 up).
func csvValue(v float64) string {
	if v != 0 && math.Abs(v) < 1e-3 {
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	prec := 6 - int(math.Floor(math.Log10(math.Max(math.Abs(v), 1e-3))+1))
	return strconv.FormatFloat(v, 'f', max(prec, 0), 64)
}

func (r *results) writeTable(w io.Writer) { io.WriteString(w, r.table.String()) }

// write prints the CSV rows if csv, else the table.
func (r *results) write(w io.Writer, csv bool) {
	if csv {
		r.writeCSV(w)
	} else {
		r.writeTable(w)
	}
}
