package gex_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Conformance of VIS, GASNet-EX "Vector/Indexed/Strided (VIS)" and the
// GASNet-1 VIS proposal it refers to, on both paths (mapped: copy loops; AM:
// pack/unpack), against a byte model. Each rank owns a zone of its peer's
// segment and is the only writer there, so it can model the zone exactly.

const visZone = 512 << 10

// visRun is a contiguous run of a test shape: offset (into the zone or the
// local buffer) and length, in transfer order.
type visRun struct{ off, n int }

// visShape is one random transfer: the runs of each side in transfer order,
// and how to issue it.
type visShape struct {
	kind    string // vector, indexed, strided
	remote  []visRun
	local   []visRun
	lsize   int // local buffer size
	ilenR   int // indexed
	ilenL   int
	elemsz  int // strided
	count   []int
	rstride []int
	lstride []int
	rbase   int
	lbase   int
}

// layout places runs of the given lengths in a region without overlap,
// with random gaps, in a random order when shuffle; returns the runs in
// transfer order and the region size.
func layout(rng *rand.Rand, lens []int, shuffle bool) ([]visRun, int) {
	runs := make([]visRun, len(lens))
	at := 0
	order := rng.Perm(len(lens))
	if !shuffle {
		for i := range order {
			order[i] = i
		}
	}
	for _, i := range order {
		at += rng.IntN(3) * rng.IntN(17)
		runs[i] = visRun{at, lens[i]}
		at += lens[i]
	}
	return runs, at
}

// splitLens splits total into chunks of 1..maxc bytes.
func splitLens(rng *rand.Rand, total, maxc int) []int {
	var l []int
	for total > 0 {
		n := min(total, 1+rng.IntN(maxc))
		l = append(l, n)
		total -= n
	}
	return l
}

func chunkMax(rng *rand.Rand) int {
	return []int{1, 8, 64, 512, 4096, 64 << 10}[rng.IntN(6)]
}

// stridedSide builds strides for one side: the levels nested in a random
// order (transposes), with random padding and signs (reflections). It returns
// the strides, the base offset, the extent, and the runs in transfer order.
func stridedSide(rng *rand.Rand, elemsz int, count []int) (strides []int, base, size int, runs []visRun) {
	L := len(count)
	strides = make([]int, L)
	perm := rng.Perm(L)
	ext := elemsz + rng.IntN(2)*rng.IntN(5)
	for _, k := range perm {
		strides[k] = ext
		ext = ext*count[k] + rng.IntN(2)*rng.IntN(9)
	}
	lo := 0
	for k := range strides {
		if rng.IntN(3) == 0 {
			strides[k] = -strides[k]
			lo += (count[k] - 1) * strides[k]
		}
	}
	base = -lo
	size = ext + 16
	forEachIndex(count, func(idx []int) {
		off := base
		for k := range idx {
			off += idx[k] * strides[k]
		}
		runs = append(runs, visRun{off, elemsz})
	})
	return strides, base, size, runs
}

// forEachIndex calls f with every index vector of a strided shape, level 0
// varying fastest (the EX metadata convention). A zero count means none.
func forEachIndex(count []int, f func(idx []int)) {
	for _, n := range count {
		if n == 0 {
			return
		}
	}
	idx := make([]int, len(count))
	for {
		f(idx)
		k := 0
		for ; k < len(count); k++ {
			idx[k]++
			if idx[k] < count[k] {
				break
			}
			idx[k] = 0
		}
		if k == len(count) {
			return
		}
	}
}

func drawShape(rng *rand.Rand, put bool) visShape {
	var s visShape
	switch rng.IntN(3) {
	case 0:
		s.kind = "vector"
		total := 1 + rng.IntN(96<<10)
		if rng.IntN(3) == 0 {
			total = 1 + rng.IntN(300)
		}
		var n int
		s.remote, _ = layout(rng, splitLens(rng, total, chunkMax(rng)), true)
		s.local, n = layout(rng, splitLens(rng, total, chunkMax(rng)), !put || rng.IntN(2) == 0)
		s.lsize = n
	case 1:
		s.kind = "indexed"
		u := []int{1, 4, 8, 64, 512}[rng.IntN(5)]
		a, b := 1+rng.IntN(4), 1+rng.IntN(4)
		m := 1 + rng.IntN(max(1, (32<<10)/(u*a*b)))
		m = min(m, 300)
		s.ilenR, s.ilenL = u*a, u*b
		lr := make([]int, b*m)
		for i := range lr {
			lr[i] = s.ilenR
		}
		ll := make([]int, a*m)
		for i := range ll {
			ll[i] = s.ilenL
		}
		s.remote, _ = layout(rng, lr, true)
		s.local, s.lsize = layout(rng, ll, true)
	default:
		s.kind = "strided"
		L := 1 + rng.IntN(4)
		s.elemsz = []int{1, 3, 8, 64, 512, 4096}[rng.IntN(6)]
		s.count = make([]int, L)
		budget := max(1, (48<<10)/s.elemsz)
		for k := range s.count {
			s.count[k] = 1 + rng.IntN(max(1, min(12, budget)))
			budget = max(1, budget/s.count[k])
		}
		s.rstride, s.rbase, _, s.remote = stridedSide(rng, s.elemsz, s.count)
		s.lstride, s.lbase, s.lsize, s.local = stridedSide(rng, s.elemsz, s.count)
	}
	return s
}

func (s *visShape) remoteExtent() int {
	e := 0
	for _, r := range s.remote {
		e = max(e, r.off+r.n)
	}
	return e
}

// transfer moves the bytes of src's runs in src into dst's runs in dst (the
// reference semantics: gather, then scatter).
func transfer(dst []byte, druns []visRun, src []byte, sruns []visRun) {
	var stream []byte
	for _, r := range sruns {
		stream = append(stream, src[r.off:r.off+r.n]...)
	}
	for _, r := range druns {
		copy(dst[r.off:r.off+r.n], stream[:r.n])
		stream = stream[r.n:]
	}
}

type visFlavour int

const (
	visBlocking visFlavour = iota
	visNBI
	visNB
)

func (f visFlavour) String() string { return [...]string{"Blocking", "NBI", "NB"}[f] }

// issue runs the shape as a put (local buffer -> zone at base) or a get and
// waits for completion.
func (s *visShape) issue(e *rankEnv, f visFlavour, put bool, peer gex.Rank, base gex.Addr, local []byte, flags gex.Flags) error {
	tm := e.tm
	var ev gex.Event
	var err error
	switch s.kind {
	case "vector":
		rv := make([]gex.Memvec, len(s.remote))
		for i, r := range s.remote {
			rv[i] = gex.Memvec{Addr: base + gex.Addr(r.off), Len: r.n}
		}
		lv := make([][]byte, len(s.local))
		for i, r := range s.local {
			lv[i] = local[r.off : r.off+r.n]
		}
		switch {
		case put && f == visBlocking:
			err = tm.VectorPutBlocking(peer, rv, lv, flags)
		case put && f == visNBI:
			err = tm.VectorPutNBI(peer, rv, lv, flags)
		case put:
			ev, err = tm.VectorPutNB(peer, rv, lv, flags)
		case f == visBlocking:
			err = tm.VectorGetBlocking(lv, peer, rv, flags)
		case f == visNBI:
			err = tm.VectorGetNBI(lv, peer, rv, flags)
		default:
			ev, err = tm.VectorGetNB(lv, peer, rv, flags)
		}
	case "indexed":
		ra := make([]gex.Addr, len(s.remote))
		for i, r := range s.remote {
			ra[i] = base + gex.Addr(r.off)
		}
		lv := make([][]byte, len(s.local))
		for i, r := range s.local {
			lv[i] = local[r.off : r.off+r.n+min(3, len(local)-r.off-r.n)] // longer slices are fine: the first len bytes count
		}
		switch {
		case put && f == visBlocking:
			err = tm.IndexedPutBlocking(peer, ra, s.ilenR, lv, s.ilenL, flags)
		case put && f == visNBI:
			err = tm.IndexedPutNBI(peer, ra, s.ilenR, lv, s.ilenL, flags)
		case put:
			ev, err = tm.IndexedPutNB(peer, ra, s.ilenR, lv, s.ilenL, flags)
		case f == visBlocking:
			err = tm.IndexedGetBlocking(lv, s.ilenL, peer, ra, s.ilenR, flags)
		case f == visNBI:
			err = tm.IndexedGetNBI(lv, s.ilenL, peer, ra, s.ilenR, flags)
		default:
			ev, err = tm.IndexedGetNB(lv, s.ilenL, peer, ra, s.ilenR, flags)
		}
	default:
		ra := base + gex.Addr(s.rbase)
		switch {
		case put && f == visBlocking:
			err = tm.StridedPutBlocking(peer, ra, s.rstride, local, s.lbase, s.lstride, s.elemsz, s.count, flags)
		case put && f == visNBI:
			err = tm.StridedPutNBI(peer, ra, s.rstride, local, s.lbase, s.lstride, s.elemsz, s.count, flags)
		case put:
			ev, err = tm.StridedPutNB(peer, ra, s.rstride, local, s.lbase, s.lstride, s.elemsz, s.count, flags)
		case f == visBlocking:
			err = tm.StridedGetBlocking(local, s.lbase, s.lstride, peer, ra, s.rstride, s.elemsz, s.count, flags)
		case f == visNBI:
			err = tm.StridedGetNBI(local, s.lbase, s.lstride, peer, ra, s.rstride, s.elemsz, s.count, flags)
		default:
			ev, err = tm.StridedGetNB(local, s.lbase, s.lstride, peer, ra, s.rstride, s.elemsz, s.count, flags)
		}
	}
	if err != nil {
		return err
	}
	switch f {
	case visNBI:
		return e.c.NBIWait(gex.ECAll, 0)
	case visNB:
		return ev.Wait()
	}
	return nil
}

func visOps() int {
	if raceEnabled {
		return 25
	}
	return 80
}

// TestVISRandomModel: random vector, indexed and strided puts and gets (1–4
// stride levels, transposes and reflections, chunks of 1 B to 64 KiB) in
// every flavour, from every rank into its zone of its peer's segment,
// checked against a byte model of the zone after every get and at the end.
func TestVISRandomModel(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 2 * visZone, supernode: sn}, visModel)
	})
}

func visModel(e *rankEnv) {
	peer := (e.rank + 1) % e.size
	base := rmaSeg(e, peer).Owner + gex.Addr(uint64(e.rank)*visZone)
	model := make([]byte, visZone)
	rng := rand.New(rand.NewPCG(uint64(e.rank)+1, 0x715))
	seed := uint64(e.rank) * 1000
	for i := 0; i < visOps(); i++ {
		put := rng.IntN(2) == 0
		f := visFlavour(rng.IntN(3))
		s := drawShape(rng, put)
		if s.remoteExtent() > visZone {
			continue
		}
		seed++
		what := fmt.Sprintf("op %d: %s %v put=%v", i, s.kind, f, put)
		if put {
			local := rmaCopy(seed, s.lsize)
			e.Check(s.issue(e, f, true, peer, base, local, 0), what)
			transfer(model, s.remote, local, s.local)
			continue
		}
		local := rmaCopy(seed, s.lsize)
		want := append([]byte(nil), local...)
		transfer(want, s.local, model, s.remote)
		e.Check(s.issue(e, f, false, peer, base, local, 0), what)
		if d := firstDiff(local, want); d >= 0 {
			e.Fatalf("%s: local byte %d is %#x, want %#x", what, d, local[d], want[d])
		}
	}
	got := make([]byte, visZone)
	e.Check(e.tm.GetBlocking(got, peer, base, 0), "GetBlocking(zone)")
	if d := firstDiff(got, model); d >= 0 {
		e.Fatalf("zone byte %d is %#x, want %#x", d, got[d], model[d])
	}
	e.Barrier()
}

// TestVISDegenerate: the degenerate cases of EX VIS ("Degenerate cases"):
// elemsz 0 ignores every other argument; stridelevels 0 is a contiguous copy
// of elemsz bytes with strides and count ignored; a zero count is a no-op
// that ignores tm, rank and addresses (strides must still be valid); zero
// totals of vector/indexed lists move nothing.
func TestVISDegenerate(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: sn}, func(e *rankEnv) {
			peer := (e.rank + 1) % e.size
			seg := rmaSeg(e, peer)
			base := seg.Owner + gex.Addr(e.rank)*4096
			tm := e.tm
			buf := rmaCopy(uint64(e.rank), 64)
			// elemsz 0: bad rank, bad address, nil everything — all ignored.
			e.Check(tm.StridedPutBlocking(99, 0, nil, nil, -5, nil, 0, []int{3, -1}, 0), "elemsz 0 put")
			e.Check(tm.StridedGetBlocking(nil, 7, nil, 99, 1, nil, 0, nil, 0), "elemsz 0 get")
			// count 0: rank and addresses ignored, strides valid.
			e.Check(tm.StridedPutBlocking(99, 1, []int{8, 8}, nil, 0, []int{8, 8}, 8, []int{4, 0}, 0), "count 0 put")
			ev, err := tm.StridedGetNB(nil, 0, []int{1}, 99, 1, []int{1}, 8, []int{0}, 0)
			e.Check(err, "count 0 get")
			e.Check(ev.Wait(), "count 0 get Wait")
			expectRMAErr(e, "count 0 with short strides", tm.StridedPutBlocking(99, 1, []int{8}, nil, 0, []int{8}, 8, []int{4, 0}, 0), "stride")
			// stridelevels 0: contiguous copy of elemsz; strides ignored.
			e.Check(tm.StridedPutBlocking(peer, base, nil, buf, 4, nil, 32, nil, 0), "stridelevels 0 put")
			got := make([]byte, 40)
			e.Check(tm.StridedGetBlocking(got, 8, []int{-99}, peer, base, []int{12345}, 32, []int{}, 0), "stridelevels 0 get")
			wantBytes(e, "stridelevels 0 round trip", got[8:], buf[4:36])
			wantFilled(e, "stridelevels 0 untouched", got[:8], 0)
			// empty vector/indexed lists and zero-length entries.
			e.Check(tm.VectorPutBlocking(peer, nil, nil, 0), "empty vector put")
			e.Check(tm.VectorPutBlocking(peer, []gex.Memvec{{Addr: 1, Len: 0}}, [][]byte{{}}, 0), "zero-length vector entries (address ignored)")
			e.Check(tm.IndexedPutBlocking(peer, []gex.Addr{1, 2}, 0, nil, 5, 0), "indexed with dstlen 0 and no sources")
			e.Check(tm.VectorGetBlocking(nil, peer, nil, 0), "empty vector get")
			ev, err = tm.IndexedGetNB(nil, 0, peer, nil, 0, 0)
			e.Check(err, "empty indexed get")
			e.Check(ev.Wait(), "empty indexed get Wait")
			e.Barrier()
		})
	})
}

// TestVISErrors: bad arguments name the argument and the bound; overlapping
// destinations are rejected, overlapping sources are allowed.
func TestVISErrors(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: sn}, func(e *rankEnv) {
			peer := (e.rank + 1) % e.size
			seg := rmaSeg(e, peer)
			base := seg.Owner + gex.Addr(e.rank)*8192
			end := seg.Owner + gex.Addr(seg.Size)
			tm := e.tm
			src := rmaCopy(uint64(e.rank)+7, 256)
			expectRMAErr(e, "vector outside", tm.VectorPutBlocking(peer, []gex.Memvec{{Addr: base, Len: 8}, {Addr: end - 4, Len: 8}}, [][]byte{src[:16]}, 0), "dstlist[1]", "segment")
			expectRMAErr(e, "vector totals", tm.VectorPutBlocking(peer, []gex.Memvec{{Addr: base, Len: 8}}, [][]byte{src[:9]}, 0), "totals")
			expectRMAErr(e, "vector negative", tm.VectorGetBlocking([][]byte{src[:8]}, peer, []gex.Memvec{{Addr: base, Len: -8}}, 0), "srclist[0]")
			expectRMAErr(e, "indexed outside", tm.IndexedGetBlocking([][]byte{src[:8]}, 8, peer, []gex.Addr{end}, 8, 0), "srclist[0]", "segment")
			expectRMAErr(e, "indexed short local", tm.IndexedPutBlocking(peer, []gex.Addr{base}, 8, [][]byte{src[:4], src[:4], src[:4]}, 4, 0), "totals")
			expectRMAErr(e, "indexed short slice", tm.IndexedPutBlocking(peer, []gex.Addr{base}, 8, [][]byte{src[:4]}, 8, 0), "srclist[0]", "fewer")
			expectRMAErr(e, "strided outside", tm.StridedPutBlocking(peer, end-64, []int{32}, src, 0, []int{8}, 8, []int{4}, 0), "dstaddr", "segment")
			expectRMAErr(e, "strided reflection below base", tm.StridedPutBlocking(peer, seg.Owner+8, []int{-16}, src, 0, []int{8}, 8, []int{4}, 0), "segment")
			expectRMAErr(e, "strided local outside", tm.StridedPutBlocking(peer, base, []int{8}, src, 0, []int{-8}, 8, []int{4}, 0), "src", "buffer")
			expectRMAErr(e, "negative count", tm.StridedPutBlocking(peer, base, []int{8}, src, 0, []int{8}, 8, []int{-1}, 0), "count[0]")
			expectRMAErr(e, "bad rank", tm.VectorPutBlocking(e.size, []gex.Memvec{{Addr: base, Len: 8}}, [][]byte{src[:8]}, 0), "rank")
			expectRMAErr(e, "bad flag", tm.VectorPutBlocking(peer, nil, nil, gex.FlagAMShort), "flags")
			expectRMAErr(e, "leaf LC on a get", tm.VectorGetNBI(nil, peer, nil, gex.FlagEnableLeafLC), "ENABLE_LEAF_LC")
			expectRMAErr(e, "leaf LC on a blocking put", tm.VectorPutBlocking(peer, nil, nil, gex.FlagEnableLeafLC), "ENABLE_LEAF_LC")
			// Overlapping destinations.
			expectRMAErr(e, "vector dst overlap", tm.VectorPutBlocking(peer, []gex.Memvec{{Addr: base + 8, Len: 8}, {Addr: base, Len: 9}}, [][]byte{src[:17]}, 0), "overlap")
			expectRMAErr(e, "indexed dst overlap", tm.IndexedPutBlocking(peer, []gex.Addr{base, base + 100, base + 4}, 8, [][]byte{src[:24]}, 24, 0), "overlap")
			expectRMAErr(e, "strided dst overlap (stride 0)", tm.StridedPutBlocking(peer, base, []int{0}, src, 0, []int{8}, 8, []int{2}, 0), "overlap")
			expectRMAErr(e, "strided dst overlap (stride < elemsz)", tm.StridedPutBlocking(peer, base, []int{4}, src, 0, []int{8}, 8, []int{2}, 0), "overlap")
			local := make([]byte, 64)
			expectRMAErr(e, "local dst overlap", tm.VectorGetBlocking([][]byte{local[:8], local[4:12]}, peer, []gex.Memvec{{Addr: base, Len: 16}}, 0), "overlap")
			expectRMAErr(e, "strided local dst overlap", tm.StridedGetBlocking(local, 0, []int{0}, peer, base, []int{8}, 8, []int{2}, 0), "overlap")
			// A non-nested but disjoint strided pattern is accepted (elemsz 1,
			// strides 3 and 5: offsets 0,3,6,5,8,11).
			e.Check(tm.StridedPutBlocking(peer, base, []int{3, 5}, src, 0, []int{1, 3}, 1, []int{3, 2}, 0), "disjoint non-nested strided put")
			// Overlapping sources are allowed: a stride-0 source broadcasts.
			e.Check(tm.StridedPutBlocking(peer, base, []int{8}, src, 0, []int{0}, 8, []int{4}, 0), "stride-0 source")
			got := make([]byte, 32)
			e.Check(tm.GetBlocking(got, peer, base, 0), "GetBlocking")
			for i := 0; i < 4; i++ {
				wantBytes(e, "broadcast element", got[i*8:i*8+8], src[:8])
			}
			e.Check(tm.VectorPutBlocking(peer, []gex.Memvec{{Addr: base, Len: 8}, {Addr: base + 8, Len: 8}}, [][]byte{src[:8], src[:8]}, 0), "same source twice")
			if rs := rmaSeg(e, e.rank); rs.Local != nil {
				// Self (mapped): a source overlapping the destination.
				mine := e.seg.Bytes()
				a := rs.Owner + gex.Addr(e.rank)*8192
				expectRMAErr(e, "self src/dst overlap", tm.VectorPutBlocking(e.rank, []gex.Memvec{{Addr: a, Len: 16}}, [][]byte{mine[e.rank*8192+8 : e.rank*8192+24]}, 0), "overlap")
			}
			e.Barrier()
		})
	})
}

// TestVISLocalCompletion: with FlagEnableLeafLC the source may be reused once
// local completion is signalled (NBI: NBITest/NBIWait(ECLC), as for
// EventGroup; NB: the leaf from EventQueryLeaf(root, ECLC)); the target
// receives the bytes as they were at initiation.
func TestVISLocalCompletion(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 1 << 20, supernode: sn}, func(e *rankEnv) {
			peer := (e.rank + 1) % e.size
			base := rmaSeg(e, peer).Owner + gex.Addr(e.rank)*(512<<10)
			const n, chunk = 256 << 10, 8
			src := rmaCopy(uint64(e.rank)+11, n)
			want := append([]byte(nil), src...)
			vecs := make([][]byte, n/chunk)
			for i := range vecs {
				vecs[i] = src[i*chunk : (i+1)*chunk]
			}
			dst := []gex.Memvec{{Addr: base, Len: n}}
			root, err := e.tm.VectorPutNB(peer, dst, vecs, gex.FlagEnableLeafLC)
			e.Check(err, "VectorPutNB(ENABLE_LEAF_LC)")
			leaf, err := gex.EventQueryLeaf(root, gex.ECLC)
			e.Check(err, "EventQueryLeaf")
			e.Check(leaf.Wait(), "leaf Wait")
			fill(src, 0xee) // reuse after local completion
			e.Check(root.Wait(), "root Wait")
			got := make([]byte, n)
			e.Check(e.tm.GetBlocking(got, peer, base, 0), "GetBlocking")
			wantBytes(e, "NB put after source reuse", got, want)

			copy(src, want)
			e.Check(e.tm.StridedPutNBI(peer, base, []int{16}, src, 0, []int{16}, 8, []int{n / 16}, gex.FlagEnableLeafLC), "StridedPutNBI(ENABLE_LEAF_LC)")
			e.Check(e.c.NBIWait(gex.ECLC, 0), "NBIWait(ECLC)")
			fill(src, 0xdd)
			e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut)")
			e.Check(e.tm.GetBlocking(got, peer, base, 0), "GetBlocking")
			for i := 0; i < n; i += 16 {
				wantBytes(e, "strided NBI put after source reuse", got[i:i+8], want[i:i+8])
			}
			e.Barrier()
		})
	})
}

const visPCHandler gex.AMIndex = 200

// TestVISPeerCompletion: an armed handler runs at the target, once, after the
// data of the next VIS put of the arming goroutine is there, with the
// payload; gets and other goroutines' puts do not consume it; handler 0
// disarms; FlagImmediate is refused while armed.
func TestVISPeerCompletion(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 1 << 20, supernode: sn}, visPeerCompletion)
	})
}

func visPeerCompletion(e *rankEnv) {
	peer := (e.rank + 1) % e.size
	mine := e.seg.Bytes()
	var calls atomic.Int32
	var bad atomic.Value
	// the peer (rank 1 - e.rank) writes its zone of my segment: offset peer*512K
	zone := mine[int(peer)*(512<<10):]
	expect := atomic.Pointer[[]byte]{}
	e.Check(e.ep.RegisterHandlers([]gex.AMEntry{{Index: visPCHandler, Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: 0, Name: "vis-pc",
		Fn: func(tk *gex.Token, p []byte, _ []gex.AMArg) {
			w := expect.Load()
			switch {
			case w == nil:
				bad.Store("handler ran with no put expected")
			case !bytes.Equal(zone[:len(*w)], *w):
				bad.Store(fmt.Sprintf("handler ran before the data was there (n=%d, first diff %d)", len(*w), firstDiff(zone[:len(*w)], *w)))
			case string(p) != "done:"+fmt.Sprint(len(*w)):
				bad.Store(fmt.Sprintf("payload %q", p))
			}
			calls.Add(1)
		}}}), "RegisterHandlers")
	base := rmaSeg(e, peer).Owner + gex.Addr(e.rank)*(512<<10)
	sizes := []int{64, 200 << 10} // one message, and several (AM path)
	for i, n := range sizes {
		src := rmaCopy(uint64(e.rank)*10+uint64(i), n)
		vec := make([][]byte, 0, n/8)
		for k := 0; k < n; k += 8 {
			vec = append(vec, src[k:k+8])
		}
		payload := []byte("done:" + fmt.Sprint(n))
		// What the peer writes into my zone this round, before it can start.
		w := rmaCopy(uint64(peer)*10+uint64(i), n)
		expect.Store(&w)
		e.Barrier()
		e.Check(e.c.VISSetPeerCompletionHandler(visPCHandler, payload, 0), "arm")
		expectRMAErr(e, "IMMEDIATE while armed", e.tm.VectorPutBlocking(peer, []gex.Memvec{{Addr: base, Len: n}}, vec, gex.FlagImmediate), "IMMEDIATE")
		// A get does not consume it; neither does another goroutine's put.
		tmp := make([][]byte, 1)
		tmp[0] = make([]byte, 8)
		e.Check(e.tm.VectorGetBlocking(tmp, peer, []gex.Memvec{{Addr: base, Len: 8}}, 0), "get while armed")
		other := make(chan error)
		go func() {
			other <- e.tm.PutBlocking(peer, base+gex.Addr(n), []byte{1}, 0)
		}()
		e.Check(<-other, "other goroutine's put")
		e.Check(e.tm.VectorPutBlocking(peer, []gex.Memvec{{Addr: base, Len: n}}, vec, 0), "armed put")
		// The next put is not notified.
		e.Check(e.tm.VectorPutBlocking(peer, []gex.Memvec{{Addr: base + gex.Addr(n), Len: 8}}, vec[:1], 0), "unarmed put")
		e.Barrier()
	}
	// Disarm: nothing runs.
	e.Check(e.c.VISSetPeerCompletionHandler(visPCHandler, nil, 0), "arm")
	e.Check(e.c.VISSetPeerCompletionHandler(0, nil, 0), "disarm")
	e.Check(e.tm.VectorPutBlocking(peer, []gex.Memvec{{Addr: base + 300<<10, Len: 8}}, [][]byte{make([]byte, 8)}, 0), "disarmed put")
	expectRMAErr(e, "payload too long", e.c.VISSetPeerCompletionHandler(visPCHandler, make([]byte, gex.VISMaxPeerCompletion+1), 0), "GEX_VIS_MAX_PEERCOMPLETION")
	e.Barrier()
	if b := bad.Load(); b != nil {
		e.Fatalf("%v", b)
	}
	if got := calls.Load(); got != int32(len(sizes)) {
		e.Fatalf("peer completion handler ran %d times, want %d", got, len(sizes))
	}
}

// TestVISDecodeRunsRefuses: the target's run-list decoder refuses runs
// outside its segment and lists that do not cover exactly the data.
func TestVISDecodeRunsRefuses(t *testing.T) {
	seg := make([]byte, 64)
	list := gex.VISEncodeRuns(nil, [][2]uint64{{0x1000, 8}, {0x1038, 8}})
	if err := gex.VISDecodeRuns(list, 0x1000, 64, 16, seg); err != nil {
		t.Fatalf("valid list: %v", err)
	}
	for _, tc := range []struct {
		name  string
		runs  [][2]uint64
		total int
	}{
		{"past the end", [][2]uint64{{0x1039, 8}}, 8},
		{"below the base", [][2]uint64{{0xfff, 8}}, 8},
		{"short", [][2]uint64{{0x1000, 8}}, 9},
		{"long", [][2]uint64{{0x1000, 8}, {0x1010, 8}}, 9},
		{"wrap", [][2]uint64{{0x1000, 8}, {0xffffffffffffffff, 2}}, 10},
	} {
		if err := gex.VISDecodeRuns(gex.VISEncodeRuns(nil, tc.runs), 0x1000, 64, tc.total, seg); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

// TestVISRunListEntries: entries of many runs (path (b) merges runs of one
// length and gap) are accepted exactly when every run lies in the segment,
// and refused when they leave it, exceed the data or are malformed.
func TestVISRunListEntries(t *testing.T) {
	const base, size = 0x10000, 4096
	every := func(from uint64, n, gap, count int) [][2]uint64 {
		var r [][2]uint64
		for i := range count {
			r = append(r, [2]uint64{uint64(int64(from) + int64(i)*int64(n+gap)), uint64(n)})
		}
		return r
	}
	ok := [][2]uint64{}
	ok = append(ok, every(base, 8, 8, 256)...)
	if list := gex.VISEncodeRunList(ok); len(list) > 16 {
		t.Errorf("256 regular runs take %d bytes of run list, want one short entry", len(list))
	}
	for _, tc := range []struct {
		name  string
		list  []byte
		total int
		good  bool
	}{
		{"forwards", gex.VISEncodeRunList(every(base, 8, 8, 256)), 2048, true},
		{"backwards", gex.VISEncodeRunList(every(base+size-8, 8, -24, 100)), 800, true},
		{"same byte", gex.VISEncodeRunList(every(base, 1, -1, 1000)), 1000, true},
		{"leaves the top", gex.VISEncodeRunList(every(base, 8, 8, 257)), 2056, false},
		{"leaves the bottom", gex.VISEncodeRunList(every(base+8, 8, -24, 3)), 24, false},
		{"exceeds the data", gex.VISEncodeRunList(every(base, 8, 8, 10)), 72, false},
		{"2^32 runs", []byte{0x80, 0x80, 0x04, 0x08, 0xff, 0xff, 0xff, 0xff, 0x0f}, 8, false},
		{"zero runs", []byte{0x80, 0x80, 0x04, 0x01, 0x00}, 1, false},
		{"zero-byte runs", []byte{0x80, 0x80, 0x04, 0x00, 0x05}, 0, false},
		{"truncated", []byte{0x80, 0x80, 0x04, 0x08}, 8, false},
	} {
		n, err := gex.VISDecodeRunsBytes(tc.list, base, size, tc.total)
		switch {
		case tc.good && (err != nil || n != tc.total):
			t.Errorf("%s: %d bytes, %v; want %d bytes accepted", tc.name, n, err, tc.total)
		case !tc.good && err == nil:
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
