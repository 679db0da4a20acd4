package gex_test

import (
	"os"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
)

// BenchmarkVIS8: the CPU cost of the mapped path (a put or get to self
// through the mapping) at gexbench vis's shape: 64 KiB of 8-byte chunks at
// 50% density on both sides. Loop conduit only.
func BenchmarkVIS8(b *testing.B) {
	const chunk, payload = 8, 64 << 10
	_, _, tm := selfClient(b)
	seg, err := gex.SegmentAttach(tm, 2*payload)
	if err != nil {
		b.Fatal(err)
	}
	base := seg.QueryAddr()
	for _, bc := range visShapes(tm, 0, base, chunk, payload) {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(payload)
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestVISAMProfile runs gexbench vis's 8-byte shapes on the AM path (loop
// conduit, both ranks in this process) for profiling: GEX_VIS_PROFILE=1 go
// test -run VISAMProfile -cpuprofile cpu.out ./gex/.
func TestVISAMProfile(t *testing.T) {
	if os.Getenv("GEX_VIS_PROFILE") == "" {
		t.Skip("set GEX_VIS_PROFILE=1 to run")
	}
	const chunk, payload, reps = 8, 64 << 10, 300
	loopJob(t, 2, jobOpts{segSize: 2 * payload, supernode: 1}, func(e *rankEnv) {
		if e.rank == 1 {
			return // polls in the closing barrier
		}
		bs := rmaSeg(e, 1)
		base, tm := bs.Owner, e.tm
		for _, bc := range visShapes(tm, 1, base, chunk, payload) {
			t0 := time.Now()
			for range reps {
				if err := bc.f(); err != nil {
					e.Fatalf("%s: %v", bc.name, err)
				}
			}
			d := time.Since(t0)
			t.Logf("%s: %.2f GB/s", bc.name, float64(reps*payload)/d.Seconds()/1e9)
		}
	})
}

// visCase is one VIS call of the gexbench vis shape.
type visCase struct {
	name string
	f    func() error
}

// visShapes are gexbench vis's calls on rank's segment at base: payload
// bytes in chunks of chunk bytes at 50% density, on both sides.
func visShapes(tm *gex.TM, rank gex.Rank, base gex.Addr, chunk, payload int) []visCase {
	n := payload / chunk
	local := make([]byte, 2*payload)
	vecR, vecL, addrs := make([]gex.Memvec, n), make([][]byte, n), make([]gex.Addr, n)
	for i := range n {
		off := 2 * chunk * i
		vecR[i] = gex.Memvec{Addr: base + gex.Addr(off), Len: chunk}
		addrs[i] = base + gex.Addr(off)
		vecL[i] = local[off : off+chunk]
	}
	str, count := []int{2 * chunk}, []int{n}
	return []visCase{
		{"VectorPut", func() error { return tm.VectorPutBlocking(rank, vecR, vecL, 0) }},
		{"VectorGet", func() error { return tm.VectorGetBlocking(vecL, rank, vecR, 0) }},
		{"IndexedPut", func() error { return tm.IndexedPutBlocking(rank, addrs, chunk, vecL, chunk, 0) }},
		{"IndexedGet", func() error { return tm.IndexedGetBlocking(vecL, chunk, rank, addrs, chunk, 0) }},
		{"StridedPut", func() error { return tm.StridedPutBlocking(rank, base, str, local, 0, str, chunk, count, 0) }},
		{"StridedGet", func() error { return tm.StridedGetBlocking(local, 0, str, rank, base, str, chunk, count, 0) }},
	}
}
