package gex_test

import (
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// benchColl times op over a 2-rank loop job (ranks are goroutines, the
// collectives run through the same collective areas as between processes):
// both ranks call it b.N times; rank 0's loop is timed.
func benchColl(b *testing.B, op func(tm *gex.TM, i int) (gex.Event, error)) {
	lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	lj.Run(func(rank int) {
		c, _, tm, err := lj.ClientInit(rank, "BENCH", 0)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		run := func(n int) {
			for i := 0; i < n; i++ {
				ev, err := op(tm, i)
				if err == nil {
					err = ev.Wait()
				}
				if err != nil {
					b.Error(err)
					c.Exit(1)
				}
			}
		}
		run(1000)
		if rank == 0 {
			b.ResetTimer()
		}
		run(b.N)
		if rank == 0 {
			b.StopTimer()
		}
		ev, _ := tm.BarrierNB(0)
		ev.Wait()
	})
}

// BenchmarkShmBarrier: BarrierNB + Wait over 2 ranks (flat, shared memory).
func BenchmarkShmBarrier(b *testing.B) {
	benchColl(b, func(tm *gex.TM, _ int) (gex.Event, error) { return tm.BarrierNB(0) })
}

// BenchmarkShmReduceToAll8: an 8-byte U64 ADD ReduceToAllNB + Wait over 2
// ranks (the contribution buffers).
func BenchmarkShmReduceToAll8(b *testing.B) {
	src, dst := make([]byte, 8), make([]byte, 8)
	benchColl(b, func(tm *gex.TM, _ int) (gex.Event, error) {
		return tm.ReduceToAllNB(dst, src, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
	})
}
