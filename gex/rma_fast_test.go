package gex_test

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
)

// BenchmarkMapped times every spec-shaped call that has a mapped fast path
// (rma_fast_unsafe.go) on this rank's own segment, with what each comes
// down to measured in the same run: copy() of 8 bytes whose length is known
// only at run time (ref/copy8) and a sync/atomic add (ref/atomicAdd). The
// machine's load moves all rows together; compare rows of one run. Each
// iteration of b.Loop is a batch of 10000 calls.
func BenchmarkMapped(b *testing.B) {
	tm, base := benchSelf(b)
	c := tm.QueryClient()
	ad64, err := gex.ADCreate[uint64](tm, gex.DTU64, gex.OPFAdd|gex.OPAdd|gex.OPGet, 0)
	if err != nil {
		b.Fatal(err)
	}
	ad32, err := gex.ADCreate[uint32](tm, gex.DTU32, gex.OPFAdd, 0)
	if err != nil {
		b.Fatal(err)
	}
	src, dst := make([]byte, 8), make([]byte, 8)
	a := base + 64
	var r64 uint64
	var r32 uint32
	var word atomic.Uint64
	n8 := len(src) // 8, unknown to the compiler inside copy8
	for _, bc := range []struct {
		name string
		f    func() error
	}{
		{"ref/copy8", func() error { copy(dst[:n8], src[:n8]); return nil }},
		{"ref/atomicAdd", func() error { word.Add(1); return nil }},
		{"PutBlocking8", func() error { return tm.PutBlocking(0, a, src, 0) }},
		{"GetBlocking8", func() error { return tm.GetBlocking(dst, 0, a, 0) }},
		{"PutNBI8", func() error { return tm.PutNBI(0, a, src, nil, 0) }},
		{"PutNBI8Group", func() error { return tm.PutNBI(0, a, src, gex.EventGroup, 0) }},
		{"GetNBI8", func() error { return tm.GetNBI(dst, 0, a, 0) }},
		{"PutNB8+Wait", func() error { return waitNB(tm.PutNB(0, a, src, nil, 0)) }},
		{"GetNB8+Wait", func() error { return waitNB(tm.GetNB(dst, 0, a, 0)) }},
		{"PutBlockingVal8", func() error { return tm.PutBlockingVal(0, a, 7, 8, 0) }},
		{"PutNBIVal8", func() error { return tm.PutNBIVal(0, a, 7, 8, 0) }},
		{"PutNBVal8+Wait", func() error { return waitNB(tm.PutNBVal(0, a, 7, 8, 0)) }},
		{"GetBlockingVal8", func() error { _, err := tm.GetBlockingVal(0, a, 8, 0); return err }},
		{"PutBlockingVal4", func() error { return tm.PutBlockingVal(0, a, 7, 4, 0) }},
		{"GetBlockingVal4", func() error { _, err := tm.GetBlockingVal(0, a, 4, 0); return err }},
		{"FADD64/OpNB+Wait", func() error { return waitNB(ad64.OpNB(&r64, 0, a, gex.OPFAdd, 1, 0, 0)) }},
		{"FADD64/OpNBI", func() error { return ad64.OpNBI(&r64, 0, a, gex.OPFAdd, 1, 0, 0) }},
		{"FADD32/OpNB+Wait", func() error { return waitNB(ad32.OpNB(&r32, 0, a+8, gex.OPFAdd, 1, 0, 0)) }},
		{"ADD64/OpNBI", func() error { return ad64.OpNBI(nil, 0, a, gex.OPAdd, 1, 0, 0) }},
		{"GET64/OpNB+Wait", func() error { return waitNB(ad64.OpNB(&r64, 0, a, gex.OPGet, 0, 0, 0)) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			// min-ns/op: the best of batches of 10000 calls, the figure a
			// loaded machine disturbs least (a batch lasts tens of µs).
			best := time.Duration(math.MaxInt64)
			for b.Loop() {
				t0 := time.Now()
				for range 10000 {
					if err := bc.f(); err != nil {
						b.Fatal(err)
					}
				}
				best = min(best, time.Since(t0))
			}
			b.ReportMetric(float64(best.Nanoseconds())/10000, "min-ns/op")
		})
	}
	if err := c.NBIWait(gex.ECAll, 0); err != nil {
		b.Fatal(err)
	}
}

// waitNB waits for the event of an NB call that succeeded.
func waitNB(ev gex.Event, err error) error {
	if err != nil {
		return err
	}
	return ev.Wait()
}
