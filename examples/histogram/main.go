// Command histogram counts values into a histogram spread over the ranks, by
// remote atomic increments, then reads it back and checks it. Run it with the
// launcher:
//
//	go run ./cmd/gexrun -n 4 ./examples/histogram -values 1000000 -bins 4096
//
// What it shows:
//   - an atomic domain over uint64 (ADCreate with the operations it will
//     use), and OpNBI(OPInc) to bump a counter in whichever rank's segment
//     holds the bin, many increments in flight, completed by NBIWait;
//   - the bins as typed memory: each rank's share is gex.View[uint64](seg),
//     read locally after a barrier;
//   - reading a peer's share with gex.GetSlice (an RMA get of []uint64 at an
//     element index), as a rank that collects the whole histogram does;
//   - a typed reduction (gex.ReduceToAll) to agree on the total.
//
// Each rank draws -values pseudo-random values (a generator seeded by its
// rank) and increments bin value%bins; the bins are dealt to the ranks in
// blocks of bins/N. Every rank recomputes all ranks' draws serially and
// checks its share; rank 0 gathers the whole histogram with GetSlice and
// checks it too, and the total must be N*values. Any difference exits
// non-zero.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gexgo/gexgo/gex"
)

func main() {
	values := flag.Int("values", 100000, "values each rank counts")
	bins := flag.Int("bins", 1024, "bins of the histogram (a multiple of the number of ranks)")
	flag.Parse()

	c, _, tm, err := gex.ClientInit("HISTOGRAM", 0)
	check(err, "ClientInit")
	me, n := tm.QueryRank(), tm.QuerySize()
	if *bins <= 0 || *bins%int(n) != 0 {
		fail("-bins %d must be a positive multiple of the number of ranks %d", *bins, n)
	}
	per := *bins / int(n) // bins per rank: bin b is element b%per on rank b/per
	segSize := (uint64(per)*8 + gex.PageSize - 1) / gex.PageSize * gex.PageSize
	seg, err := gex.SegmentAttach(tm, segSize) // zero-filled, ends with a barrier
	check(err, "SegmentAttach")
	mine := gex.View[uint64](seg)[:per]

	// Every rank creates the domain (a collective call) with the operations it uses.
	ad, err := gex.ADCreate[uint64](tm, gex.DTU64, gex.OPInc, 0)
	check(err, "ADCreate")

	for _, v := range draws(me, *values) {
		b := int(v % uint64(*bins))
		owner := gex.Rank(b / per)
		addr, err := tm.RemoteAddr(owner, uintptr(b%per*8))
		check(err, "RemoteAddr")
		// nil result: OPInc fetches nothing. Completion is tracked with NBI.
		check(ad.OpNBI(nil, owner, addr, gex.OPInc, 0, 0, 0), "OpNBI(OPInc)")
	}
	check(c.NBIWait(gex.ECRMW, 0), "NBIWait")
	check(tm.Barrier(), "Barrier") // every increment, from everyone, is done

	// The serial histogram, from every rank's draws.
	want := make([]uint64, *bins)
	for r := gex.Rank(0); r < n; r++ {
		for _, v := range draws(r, *values) {
			want[v%uint64(*bins)]++
		}
	}
	for i, got := range mine {
		if b := int(me)*per + i; got != want[b] {
			fail("rank %d: bin %d holds %d, the serial count is %d", me, b, got, want[b])
		}
	}
	if me == 0 {
		all := make([]uint64, *bins)
		for r := gex.Rank(0); r < n; r++ {
			check(gex.GetSlice(tm, all[int(r)*per:int(r+1)*per], r, 0, 0), "GetSlice")
		}
		for b := range all {
			if all[b] != want[b] {
				fail("bin %d read back with GetSlice holds %d, the serial count is %d", b, all[b], want[b])
			}
		}
	}
	var sum uint64
	for _, v := range mine {
		sum += v
	}
	total := []uint64{sum}
	check(gex.ReduceToAll(tm, total, total, gex.OPAdd), "ReduceToAll")
	if total[0] != uint64(n)*uint64(*values) {
		fail("the bins hold %d counts in all, want %d", total[0], uint64(n)*uint64(*values))
	}
	check(ad.Destroy(), "AD Destroy")
	if me == 0 {
		fmt.Printf("histogram: %d ranks counted %d values into %d bins by remote atomics; every bin matches the serial count\n", n, total[0], *bins)
	}
	// The normal end: a final barrier (nobody leaves while a peer may still
	// need it), then Close, which also sends what is still batched.
	check(tm.Barrier(), "Barrier")
	check(c.Close(), "Close")
}

// draws are rank r's values: an xorshift64* sequence seeded by r.
func draws(r gex.Rank, count int) []uint64 {
	x := uint64(r)*0x9e3779b97f4a7c15 + 1
	out := make([]uint64, count)
	for i := range out {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		out[i] = x * 0x2545f4914f6cdd1d
	}
	return out
}

func check(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "histogram: "+format+"\n", args...)
	os.Exit(1)
}
