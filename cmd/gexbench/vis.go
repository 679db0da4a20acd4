package main

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/gexgo/gexgo/gex"
)

// gexbench vis: VIS bandwidth (GASNet-EX "Vector/Indexed/Strided (VIS)"),
// as GASNet's testvis measures it: a 64 KiB payload at 50% density (chunks
// of c contiguous bytes every 2c bytes, on both sides) moved by one blocking
// VIS call, for c = 8 B and 512 B, with the vector, indexed and strided
// interfaces, puts and gets. The figures are payload bytes per second (GB/s,
// 10^9 B/s).

// visPayload is the payload of one VIS operation.
const visPayload = 64 << 10

// visSpan is the bytes a 50%-density payload spans on each side.
const visSpan = 2 * visPayload

// visShape is one measured transfer, its descriptors built once.
type visShape struct {
	chunk int
	vecR  []gex.Memvec
	vecL  [][]byte
	addrs []gex.Addr
	str   []int
	count []int
}

func (b *bench) visShape(local []byte, chunk int) *visShape {
	n := visPayload / chunk
	s := &visShape{chunk: chunk, vecR: make([]gex.Memvec, n), vecL: make([][]byte, n), addrs: make([]gex.Addr, n),
		str: []int{2 * chunk}, count: []int{n}}
	for i := 0; i < n; i++ {
		off := 2 * chunk * i
		s.vecR[i] = gex.Memvec{Addr: b.remote + gex.Addr(off), Len: chunk}
		s.addrs[i] = b.remote + gex.Addr(off)
		s.vecL[i] = local[off : off+chunk]
	}
	return s
}

// visOp returns one blocking VIS call of kind (vector, indexed, strided).
func (b *bench) visOp(kind string, put bool, s *visShape, local []byte) func() error {
	tm, c := b.tm, s.chunk
	switch {
	case kind == "vector" && put:
		return func() error { return tm.VectorPutBlocking(peer, s.vecR, s.vecL, 0) }
	case kind == "vector":
		return func() error { return tm.VectorGetBlocking(s.vecL, peer, s.vecR, 0) }
	case kind == "indexed" && put:
		return func() error { return tm.IndexedPutBlocking(peer, s.addrs, c, s.vecL, c, 0) }
	case kind == "indexed":
		return func() error { return tm.IndexedGetBlocking(s.vecL, c, peer, s.addrs, c, 0) }
	case put:
		return func() error {
			return tm.StridedPutBlocking(peer, b.remote, s.str, local, 0, s.str, c, s.count, 0)
		}
	}
	return func() error {
		return tm.StridedGetBlocking(local, 0, s.str, peer, b.remote, s.str, c, s.count, 0)
	}
}

// visOne measures op: samples of ~floodTarget each; median and best GB/s.
func (b *bench) visOne(op func() error) (bwStats, error) {
	for i := 0; i < 3; i++ { // warm up
		if err := op(); err != nil {
			return bwStats{}, err
		}
	}
	t0 := time.Now()
	if err := op(); err != nil {
		return bwStats{}, err
	}
	reps := b.cfg.reps
	if reps == 0 {
		one := max(time.Since(t0), time.Microsecond)
		reps = int(min(max(1, int64(floodTarget/one)), 1<<20))
	}
	bw := make([]float64, 0, b.cfg.samples)
	for s := 0; s < b.cfg.samples; s++ {
		t0 := time.Now()
		for r := 0; r < reps; r++ {
			if err := op(); err != nil {
				return bwStats{}, err
			}
		}
		sec := max(time.Since(t0), time.Nanosecond).Seconds()
		bw = append(bw, float64(reps)*visPayload/sec/1e6)
	}
	sort.Float64s(bw)
	return bwStats{median: median(bw), best: bw[len(bw)-1], reps: reps}, nil
}

// vis runs the VIS benchmark and checks, after each put, that the remote
// chunks hold the local ones (and, after each get, the reverse).
func (b *bench) vis() (*results, error) {
	long, short := b.pathName()
	res := &results{}
	fmt.Fprintf(&res.table, "gexbench vis: blocking VIS put/get bandwidth, rank 0 -> rank %d of %d; path: %s\n", peer, b.tm.QuerySize(), long)
	fmt.Fprintf(&res.table, "%s payload at 50%% density (chunk c every 2c bytes, both sides) per operation;\n"+
		"%d samples of %s operations; median and best sample, MB/s (10^6 B/s of payload)\n\n",
		sizeName(visPayload), b.cfg.samples, repsName(b.cfg.reps))
	fmt.Fprintf(&res.table, "%8s %8s %12s %12s %12s %12s\n", "kind", "chunk", "put median", "put best", "get median", "get best")
	local := make([]byte, visSpan)
	check := make([]byte, visSpan)
	for _, kind := range []string{"vector", "indexed", "strided"} {
		for _, chunk := range b.cfg.visChunks() {
			s := b.visShape(local, chunk)
			var st [2]bwStats
			for i, put := range []bool{true, false} {
				fillPattern(local, gex.Rank(2+i+chunk))
				var err error
				if st[i], err = b.visOne(b.visOp(kind, put, s, local)); err != nil {
					return nil, fmt.Errorf("%s %s of %d-byte chunks: %w", kind, map[bool]string{true: "put", false: "get"}[put], chunk, err)
				}
				if err := b.tm.GetBlocking(check, peer, b.remote, 0); err != nil {
					return nil, err
				}
				for off := 0; off < visSpan; off += 2 * chunk {
					if !bytes.Equal(check[off:off+chunk], local[off:off+chunk]) {
						return nil, fmt.Errorf("%s put=%v of %d-byte chunks: chunk at %d differs between rank 0 and rank 1", kind, put, chunk, off)
					}
				}
			}
			fmt.Fprintf(&res.table, "%8s %8s %12.1f %12.1f %12.1f %12.1f\n", kind, sizeName(chunk), st[0].median, st[0].best, st[1].median, st[1].best)
			res.add("vis-"+kind+"-put", short, chunk, "median", st[0].median, "MB/s")
			res.add("vis-"+kind+"-put", short, chunk, "best", st[0].best, "MB/s")
			res.add("vis-"+kind+"-get", short, chunk, "median", st[1].median, "MB/s")
			res.add("vis-"+kind+"-get", short, chunk, "best", st[1].best, "MB/s")
		}
	}
	return res, nil
}
