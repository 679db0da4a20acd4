package gex_test

import (
	"fmt"

	"github.com/gexgo/gexgo/gex"
)

// Each example runs a small job on the loop conduit (ranks as goroutines of
// this process), so that `go test` runs it; under gexrun the same body runs
// as processes after gex.ClientInit.

// loopJob2 runs body on each rank of a 2-rank loop job with a 64 KiB segment
// attached, and returns what each rank reported.
func loopJob2(body func(c *gex.Client, tm *gex.TM, seg *gex.Segment) string) [2]string {
	job, err := gex.NewLoopJob(gex.LoopConfig{Size: 2})
	if err != nil {
		panic(err)
	}
	var lines [2]string
	job.Run(func(rank int) {
		c, _, tm, err := job.ClientInit(rank, "EXAMPLE", 0)
		if err != nil {
			panic(err)
		}
		seg, err := gex.SegmentAttach(tm, 1<<16) // collective; ends with a barrier
		if err != nil {
			panic(err)
		}
		lines[rank] = body(c, tm, seg)
		if err := tm.Barrier(); err != nil { // nobody leaves while a peer may need it
			panic(err)
		}
		c.Close()
	})
	return lines
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// PutBlocking writes bytes into a peer's segment and returns once they are
// there; a barrier then tells the peer it may read them.
func ExampleTM_PutBlocking() {
	lines := loopJob2(func(c *gex.Client, tm *gex.TM, seg *gex.Segment) string {
		me := tm.QueryRank()
		peer := 1 - me
		dest, err := tm.RemoteAddr(peer, 0) // byte 0 of the peer's segment
		must(err)
		must(tm.PutBlocking(peer, dest, []byte(fmt.Sprintf("greetings from rank %d", me)), 0))
		must(tm.Barrier())
		return fmt.Sprintf("rank %d's segment holds %q", me, seg.Bytes()[:21])
	})
	fmt.Println(lines[0])
	fmt.Println(lines[1])
	// Output:
	// rank 0's segment holds "greetings from rank 1"
	// rank 1's segment holds "greetings from rank 0"
}

// A peer's segment lies at its own address in its own process: RemoteAddr
// names a location in it by offset, and the typed helpers take an element
// index instead. An address computed from one's own segment is refused with
// an error that says so.
func ExampleTM_RemoteAddr() {
	lines := loopJob2(func(c *gex.Client, tm *gex.TM, seg *gex.Segment) string {
		me := tm.QueryRank()
		peer := 1 - me
		at, err := tm.RemoteAddr(peer, 8*10) // element 10 of the peer's segment as []uint64
		must(err)
		must(tm.PutBlockingVal(peer, at, uint64(100+me), 8, 0))
		must(gex.PutSlice(tm, peer, 11, []uint64{uint64(200 + me)}, 0)) // element 11, by index
		wrong := seg.QueryAddr() + 8*12                                 // our own segment's address
		err = tm.PutBlocking(peer, wrong, make([]byte, 8), 0)
		must(tm.Barrier())
		v := gex.View[uint64](seg)
		return fmt.Sprintf("rank %d: elements 10, 11 = %d, %d; own address refused: %v", me, v[10], v[11], err != nil)
	})
	fmt.Println(lines[0])
	fmt.Println(lines[1])
	// Output:
	// rank 0: elements 10, 11 = 101, 201; own address refused: true
	// rank 1: elements 10, 11 = 100, 200; own address refused: true
}

// An atomic domain (ADCreate) over uint64 with the operations it will use;
// OpNB returns an event, and the fetched value is in result once it
// completed.
func ExampleADCreate() {
	lines := loopJob2(func(c *gex.Client, tm *gex.TM, seg *gex.Segment) string {
		ad, err := gex.ADCreate[uint64](tm, gex.DTU64, gex.OPFAdd|gex.OPGet, 0) // collective
		must(err)
		counter, err := tm.RemoteAddr(0, 0) // one counter, on rank 0
		must(err)
		var before uint64
		ev, err := ad.OpNB(&before, 0, counter, gex.OPFAdd, 5, 0, 0) // fetch-and-add 5
		must(err)
		must(ev.Wait())
		must(tm.Barrier())
		var total uint64
		ev, err = ad.OpNB(&total, 0, counter, gex.OPGet, 0, 0, 0)
		must(err)
		must(ev.Wait())
		must(tm.Barrier()) // every rank has read before anyone destroys the domain
		must(ad.Destroy())
		return fmt.Sprintf("rank %d: fetched 0 or 5: %v; the counter after both adds: %d", tm.QueryRank(), before == 0 || before == 5, total)
	})
	fmt.Println(lines[0])
	fmt.Println(lines[1])
	// Output:
	// rank 0: fetched 0 or 5: true; the counter after both adds: 10
	// rank 1: fetched 0 or 5: true; the counter after both adds: 10
}

// BarrierNB starts a barrier and returns at once: a rank may compute (or
// Test the event) until it needs the barrier complete. tm.Barrier is
// BarrierNB and Wait.
func ExampleTM_BarrierNB() {
	lines := loopJob2(func(c *gex.Client, tm *gex.TM, seg *gex.Segment) string {
		me := tm.QueryRank()
		gex.View[int64](seg)[0] = int64(10 * (me + 1)) // my contribution, in my own segment
		ev, err := tm.BarrierNB(0)
		must(err)
		work := 0
		for ev.Test() != nil { // not complete yet: overlap some work
			work++
			must(c.Poll()) // and let the library make progress
		}
		// After the barrier every rank's store is visible: read the peer's.
		v := make([]int64, 1)
		must(gex.GetSlice(tm, v, 1-me, 0, 0))
		return fmt.Sprintf("rank %d read %d from its peer", me, v[0])
	})
	fmt.Println(lines[0])
	fmt.Println(lines[1])
	// Output:
	// rank 0 read 20 from its peer
	// rank 1 read 10 from its peer
}

// NBI puts need no event each: NBIWait(ECPut) completes all of them at once.
func ExampleClient_NBIWait() {
	lines := loopJob2(func(c *gex.Client, tm *gex.TM, seg *gex.Segment) string {
		me := tm.QueryRank()
		peer := 1 - me
		for i := 0; i < 100; i++ {
			must(gex.PutSliceNBI(tm, peer, i, []int32{int32(i) * int32(me+1)}, nil, 0))
		}
		must(c.NBIWait(gex.ECPut, 0)) // every put above is complete at the peer
		must(tm.Barrier())
		sum := int32(0)
		for _, v := range gex.View[int32](seg)[:100] {
			sum += v
		}
		return fmt.Sprintf("rank %d: the peer's 100 puts sum to %d", me, sum)
	})
	fmt.Println(lines[0])
	fmt.Println(lines[1])
	// Output:
	// rank 0: the peer's 100 puts sum to 9900
	// rank 1: the peer's 100 puts sum to 4950
}

// A strided VIS put moves a column of a row-major matrix (elements a row
// apart) into a row of the peer's (contiguous) in one call.
func ExampleTM_StridedPutBlocking() {
	const rows, cols = 4, 5
	lines := loopJob2(func(c *gex.Client, tm *gex.TM, seg *gex.Segment) string {
		me := tm.QueryRank()
		peer := 1 - me
		m := gex.View[float64](seg)[:rows*cols] // my matrix, row-major
		for i := range m {
			m[i] = float64(10*(i/cols) + i%cols + 100*int(me))
		}
		must(tm.Barrier())                           // both matrices are filled before anyone overwrites a row
		dst, err := tm.RemoteAddr(peer, 8*rows*cols) // just past the peer's matrix
		must(err)
		// Column 2 of my matrix: rows elements of 8 bytes, cols*8 bytes apart
		// here; 8 bytes apart (contiguous) there.
		must(tm.StridedPutBlocking(peer, dst, []int{8}, seg.Bytes(), 8*2, []int{8 * cols}, 8, []int{rows}, 0))
		must(tm.Barrier())
		return fmt.Sprintf("rank %d received column 2 of its peer: %v", me, gex.View[float64](seg)[rows*cols:rows*cols+rows])
	})
	fmt.Println(lines[0])
	fmt.Println(lines[1])
	// Output:
	// rank 0 received column 2 of its peer: [102 112 122 132]
	// rank 1 received column 2 of its peer: [2 12 22 32]
}
