package gex_test

import (
	"testing"

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

// visCase is one VIS call of the gexbench vis shape.
type visCase struct {
	name string
	f    func() error
}

// visShapes are gexbench vis's calls on rank's segment at base: payload
// bytes in chunks of chunk bytes at 50% density, on both sides.
func visShapes(tm *gex.TM, rank gex.Rank, base gex.Addr, chunk, payload int) []visCase {
	n := payload / chunk
	local, vecR, vecL, addrs := visLists(base, chunk, n)
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

// visLists lays out n chunks of chunk bytes at 50% density (chunk i at
// 2*chunk*i) on both sides: a local buffer, the remote Memvecs and addresses
// from base, and the local chunks.
func visLists(base gex.Addr, chunk, n int) (local []byte, vecR []gex.Memvec, vecL [][]byte, addrs []gex.Addr) {
	local = make([]byte, 2*chunk*n)
	vecR, vecL, addrs = make([]gex.Memvec, n), make([][]byte, n), make([]gex.Addr, n)
	for i := range n {
		off := 2 * chunk * i
		vecR[i] = gex.Memvec{Addr: base + gex.Addr(off), Len: chunk}
		addrs[i] = base + gex.Addr(off)
		vecL[i] = local[off : off+chunk]
	}
	return local, vecR, vecL, addrs
}
