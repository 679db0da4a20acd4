package gex_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// The typed helpers (typed.go) over the spec calls: each test runs on loop
// and smp, with shared-memory RMA (supernode 0) and with the AM protocol
// (supernode 1: no peer mapped).

func TestTypedPutGetSlice(t *testing.T) {
	for _, sn := range []int{0, 1} {
		t.Run(fmt.Sprintf("supernode=%d", sn), func(t *testing.T) {
			conformance(t, 3, jobOpts{segSize: 1 << 16, supernode: sn}, typedPutGetBody)
		})
	}
}

// typedPutGetBody: every rank writes three blocks of float64 into the next
// rank's segment (blocking, NB, NBI) at element indices, then reads its own
// segment through View and the previous rank's through GetSlice*.
func typedPutGetBody(e *rankEnv) {
	next, prev := (e.rank+1)%e.size, (e.rank+e.size-1)%e.size
	block := func(from gex.Rank, k int) []float64 {
		s := make([]float64, 100)
		for i := range s {
			s[i] = float64(from)*1e6 + float64(k)*1e3 + float64(i) + 0.5
		}
		return s
	}
	e.Check(gex.PutSlice(e.tm, next, 10, block(e.rank, 0), 0), "PutSlice")
	ev, err := gex.PutSliceNB(e.tm, next, 110, block(e.rank, 1), nil, 0)
	e.Check(err, "PutSliceNB")
	e.Check(ev.Wait(), "PutSliceNB Wait")
	e.Check(gex.PutSliceNBI(e.tm, next, 210, block(e.rank, 2), nil, 0), "PutSliceNBI")
	e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut)")
	e.Check(e.tm.Barrier(), "Barrier")

	mine := gex.View[float64](e.seg)
	if len(mine) != (1<<16)/8 {
		e.Fatalf("View[float64] has %d elements, want %d", len(mine), (1<<16)/8)
	}
	for k := 0; k < 3; k++ {
		want := block(prev, k)
		for i, w := range want {
			if got := mine[10+100*k+i]; got != w {
				e.Fatalf("View[float64][%d] = %v, want %v (block %d from rank %d)", 10+100*k+i, got, w, k, prev)
			}
		}
	}
	// Read back what this rank wrote into next, three ways.
	got := make([]float64, 100)
	e.Check(gex.GetSlice(e.tm, got, next, 10, 0), "GetSlice")
	checkFloats(e, "GetSlice", got, block(e.rank, 0))
	ev, err = gex.GetSliceNB(e.tm, got, next, 110, 0)
	e.Check(err, "GetSliceNB")
	e.Check(ev.Wait(), "GetSliceNB Wait")
	checkFloats(e, "GetSliceNB", got, block(e.rank, 1))
	e.Check(gex.GetSliceNBI(e.tm, got, next, 210, 0), "GetSliceNBI")
	e.Check(e.c.NBIWait(gex.ECGet, 0), "NBIWait(ECGet)")
	checkFloats(e, "GetSliceNBI", got, block(e.rank, 2))

	// A 4-byte type indexes in its own units: element 3 of []uint32 is byte 12.
	e.Check(e.tm.Barrier(), "Barrier")
	e.Check(gex.PutSlice(e.tm, next, 3, []uint32{0xdeadbeef}, 0), "PutSlice uint32")
	e.Check(e.tm.Barrier(), "Barrier")
	if got := gex.View[uint32](e.seg)[3]; got != 0xdeadbeef {
		e.Fatalf("View[uint32][3] = %#x after PutSlice at index 3, want 0xdeadbeef", got)
	}

	// Bounds: the error names the index, the length and the segment's size
	// in elements; nothing is written.
	elems := (1 << 16) / 8
	for _, tc := range []struct{ index, n int }{{elems - 1, 2}, {-1, 1}, {elems + 1, 0}} {
		err := gex.PutSlice(e.tm, next, tc.index, make([]float64, tc.n), 0)
		want := fmt.Sprintf("elements [%d, +%d) out of range: rank %d's segment holds %d elements of 8 bytes", tc.index, tc.n, next, elems)
		if !errors.Is(err, gex.ErrBadArg) || !strings.Contains(err.Error(), want) {
			e.Fatalf("PutSlice at %d of %d elements: %v; want ErrBadArg saying %q", tc.index, tc.n, err, want)
		}
	}
	if err := gex.GetSlice(e.tm, got, next, 0, gex.FlagPeerSegOffset); !errors.Is(err, gex.ErrBadArg) || !strings.Contains(err.Error(), "FlagPeerSegOffset is implied") {
		e.Fatalf("GetSlice with FlagPeerSegOffset: %v; want ErrBadArg (the index is already an offset)", err)
	}
	if err := gex.PutSlice(e.tm, e.size, 0, got, 0); !errors.Is(err, gex.ErrBadArg) || !strings.Contains(err.Error(), "out of range: team size") {
		e.Fatalf("PutSlice to rank %d: %v; want ErrBadArg naming the team size", e.size, err)
	}
}

func checkFloats(e *rankEnv, what string, got, want []float64) {
	for i := range want {
		if got[i] != want[i] {
			e.Fatalf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestTypedPeerView(t *testing.T) {
	for _, sn := range []int{0, 1} {
		t.Run(fmt.Sprintf("supernode=%d", sn), func(t *testing.T) {
			conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: sn}, func(e *rankEnv) {
				peer := 1 - e.rank
				v, err := gex.PeerView[int64](e.tm, peer)
				if sn == 1 {
					if err == nil || !strings.Contains(err.Error(), "not mapped here") {
						e.Fatalf("PeerView of an unmapped peer: %v, want an error saying it is not mapped", err)
					}
					return
				}
				e.Check(err, "PeerView")
				v[5] = int64(100 + e.rank) // a store into the peer's memory
				e.Check(e.tm.Barrier(), "Barrier")
				if got := gex.View[int64](e.seg)[5]; got != int64(100+peer) {
					e.Fatalf("own element 5 = %d after the peer stored through PeerView, want %d", got, 100+peer)
				}
			})
		})
	}
}

func TestTypedRemoteAddr(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		peer := 1 - e.rank
		bs, _, err := e.tm.QueryBoundSegmentNB(peer, 0)
		e.Check(err, "QueryBoundSegmentNB")
		a, err := e.tm.RemoteAddr(peer, 128)
		e.Check(err, "RemoteAddr")
		if a != bs.Owner+128 {
			e.Fatalf("RemoteAddr(%d, 128) = %#x, want the peer's segment base %#x + 128", peer, a, bs.Owner)
		}
		// The address is the one the spec calls take.
		e.Check(e.tm.PutBlockingVal(peer, a, uint64(7+e.rank), 8, 0), "PutBlockingVal at RemoteAddr")
		e.Check(e.tm.Barrier(), "Barrier")
		if got := gex.View[uint64](e.seg)[16]; got != uint64(7+peer) {
			e.Fatalf("word at offset 128 = %d, want %d", got, 7+peer)
		}
		if _, err := e.tm.RemoteAddr(peer, 1<<16); !errors.Is(err, gex.ErrBadArg) || !strings.Contains(err.Error(), "offset 65536 out of range [0, 65536)") {
			e.Fatalf("RemoteAddr past the end: %v; want ErrBadArg naming the bound", err)
		}
	})
}

// TestOwnSegmentAddressHint: an address computed from the caller's own
// segment and sent to a peer gets an error that says how to get the right
// one, unless it happens to lie in the peer's segment too (processes may map
// their segments at the same addresses; then it is a legitimate address
// there). Addresses in neither segment get the plain error.
func TestOwnSegmentAddressHint(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: 1}, func(e *rankEnv) {
		peer := 1 - e.rank
		bs, _, err := e.tm.QueryBoundSegmentNB(peer, 0)
		e.Check(err, "QueryBoundSegmentNB")
		own := e.seg.QueryAddr() + 64
		inPeer := own >= bs.Owner && uint64(own-bs.Owner) < bs.Size
		ad, err := gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPAdd, 0)
		e.Check(err, "ADCreate")
		defer ad.Destroy()
		calls := map[string]func(gex.Addr) error{
			"PutBlocking": func(a gex.Addr) error { return e.tm.PutBlocking(peer, a, make([]byte, 8), 0) },
			"GetNB": func(a gex.Addr) error {
				ev, err := e.tm.GetNB(make([]byte, 8), peer, a, 0)
				if err != nil {
					return err
				}
				return ev.Wait()
			},
			"AD OpNBI": func(a gex.Addr) error {
				if err := ad.OpNBI(nil, peer, a, gex.OPAdd, 1, 0, 0); err != nil {
					return err
				}
				return e.c.NBIWait(gex.ECAll, 0)
			},
		}
		calls["StridedPutBlocking"] = func(a gex.Addr) error {
			return e.tm.StridedPutBlocking(peer, a, []int{8}, make([]byte, 16), 0, []int{8}, 8, []int{2}, 0)
		}
		calls["VectorGetBlocking"] = func(a gex.Addr) error {
			return e.tm.VectorGetBlocking([][]byte{make([]byte, 8)}, peer, []gex.Memvec{{Addr: a, Len: 8}}, 0)
		}
		if !inPeer { // an AM to a handler nobody registered must not be sent
			calls["RequestLong"] = func(a gex.Addr) error { return e.tm.RequestLong(peer, 250, make([]byte, 8), a, gex.EventNow, 0) }
		}
		for name, call := range calls {
			err := call(own)
			switch {
			case inPeer && err != nil:
				e.Fatalf("%s at an address inside the peer's segment (which is also inside ours): %v; want success", name, err)
			case !inPeer && (!errors.Is(err, gex.ErrBadArg) || !strings.Contains(err.Error(), "own segment (offset 64)") || !strings.Contains(err.Error(), "tm.RemoteAddr(rank, 64)")):
				e.Fatalf("%s at our own segment's address: %v; want ErrBadArg pointing to tm.RemoteAddr(rank, 64)", name, err)
			}
			// Outside both segments: the plain error, no hint.
			far := gex.Addr(math.MaxUint64 - 1<<20)
			if err := call(far); !errors.Is(err, gex.ErrBadArg) || strings.Contains(err.Error(), "RemoteAddr") {
				e.Fatalf("%s at %#x: %v; want ErrBadArg without the own-segment hint", name, far, err)
			}
		}
		if !inPeer {
			e.Logf("own-segment addresses are outside the peer's segment: the hint was checked")
		}
		e.Check(e.tm.Barrier(), "Barrier")
	})
}

func TestTypedCollectives(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			conformance(t, n, jobOpts{segSize: 1 << 16}, typedCollBody)
		})
	}
}

func typedCollBody(e *rankEnv) {
	n := int(e.size)
	r := int(e.rank)
	// ReduceToAll over int32 (DTI32) and float64 (DTDBL).
	src := []int32{int32(r), int32(-r), 1}
	dst := make([]int32, 3)
	e.Check(gex.ReduceToAll(e.tm, dst, src, gex.OPAdd), "ReduceToAll int32")
	if want := []int32{int32(n * (n - 1) / 2), -int32(n * (n - 1) / 2), int32(n)}; fmt.Sprint(dst) != fmt.Sprint(want) {
		e.Fatalf("ReduceToAll[int32] OPAdd = %v, want %v", dst, want)
	}
	f := []float64{float64(r) + 0.25}
	e.Check(gex.ReduceToAll(e.tm, f, f, gex.OPMax), "ReduceToAll float64 in place")
	if f[0] != float64(n-1)+0.25 {
		e.Fatalf("ReduceToAll[float64] OPMax in place = %v, want %v", f[0], float64(n-1)+0.25)
	}
	// A named type over uint64 reduces as DTU64.
	type count uint64
	cs := []count{1 << uint(r)}
	e.Check(gex.ReduceToAll(e.tm, cs, cs, gex.OPOr), "ReduceToAll named uint64")
	if cs[0] != count(1<<uint(n)-1) {
		e.Fatalf("ReduceToAll[count] OPOr = %b, want %b", cs[0], 1<<uint(n)-1)
	}
	// ReduceToOne: the result on the root only.
	root := gex.Rank(n - 1)
	one := []int64{-1}
	e.Check(gex.ReduceToOne(e.tm, root, one, []int64{int64(r + 1)}, gex.OPMult), "ReduceToOne")
	fact := int64(1)
	for i := 2; i <= n; i++ {
		fact *= int64(i)
	}
	if e.rank == root && one[0] != fact {
		e.Fatalf("ReduceToOne[int64] OPMult on root = %d, want %d", one[0], fact)
	} else if e.rank != root && one[0] != -1 {
		e.Fatalf("ReduceToOne wrote %d into dst on non-root rank", one[0])
	}
	// A user operator: "first" is associative and not commutative, so the
	// result shows the fold is in rank order; int16 has no built-in DT.
	u := []int16{int16(10 + r), int16(20 + r)}
	e.Check(gex.ReduceToAllFunc(e.tm, u, u, func(a, b int16) int16 { return a }), "ReduceToAllFunc")
	if u[0] != 10 || u[1] != 20 {
		e.Fatalf("ReduceToAllFunc(first) = %v, want [10 20] (rank 0's elements)", u)
	}
	last := []int16{-1}
	e.Check(gex.ReduceToOneFunc(e.tm, 0, last, []int16{int16(r)}, func(a, b int16) int16 { return b }), "ReduceToOneFunc")
	if e.rank == 0 && last[0] != int16(n-1) {
		e.Fatalf("ReduceToOneFunc(last) = %d, want %d (the highest rank's element)", last[0], n-1)
	}
	if err := gex.ReduceToAll(e.tm, u, u, gex.OPAdd); !errors.Is(err, gex.ErrBadArg) || !strings.Contains(err.Error(), "element type int16 has no GASNet-EX data type") {
		e.Fatalf("ReduceToAll[int16]: %v; want ErrBadArg naming the type", err)
	}
	// Broadcast from the last rank.
	b := make([]complex128, 2)
	var bsrc []complex128
	if e.rank == root {
		bsrc = []complex128{1 + 2i, complex(float64(r), -1)}
	}
	e.Check(gex.Broadcast(e.tm, root, b, bsrc), "Broadcast")
	if b[0] != 1+2i || b[1] != complex(float64(n-1), -1) {
		e.Fatalf("Broadcast[complex128] = %v, want [(1+2i) (%d-1i)]", b, n-1)
	}
	e.Check(e.tm.Barrier(), "Barrier")
}

func TestDTOf(t *testing.T) {
	type celsius float64
	check := func(name string, got gex.DT, ok bool, want gex.DT, wantOK bool) {
		if got != want || ok != wantOK {
			t.Errorf("DTOf[%s] = %v, %v; want %v, %v", name, got, ok, want, wantOK)
		}
	}
	dt, ok := gex.DTOf[int32]()
	check("int32", dt, ok, gex.DTI32, true)
	dt, ok = gex.DTOf[uint32]()
	check("uint32", dt, ok, gex.DTU32, true)
	dt, ok = gex.DTOf[int]()
	check("int", dt, ok, gex.DTI64, true)
	dt, ok = gex.DTOf[uint64]()
	check("uint64", dt, ok, gex.DTU64, true)
	dt, ok = gex.DTOf[float32]()
	check("float32", dt, ok, gex.DTFLT, true)
	dt, ok = gex.DTOf[celsius]()
	check("celsius", dt, ok, gex.DTDBL, true)
	dt, ok = gex.DTOf[uint8]()
	check("uint8", dt, ok, 0, false)
	dt, ok = gex.DTOf[complex64]()
	check("complex64", dt, ok, 0, false)
}

// TestTypedNoAllocs: the typed RMA helpers add no allocation to the spec
// calls' mapped path (to self and to a neighbourhood peer).
func TestTypedNoAllocs(t *testing.T) {
	cases := func(tm *gex.TM, r gex.Rank, check func(error)) []allocCase {
		src, dst := make([]float64, 1), make([]float64, 512)
		return []allocCase{
			{"PutSlice of 1 float64", func() { check(gex.PutSlice(tm, r, 8, src, 0)) }},
			{"GetSlice of 512 float64", func() { check(gex.GetSlice(tm, dst, r, 8, 0)) }},
			{"PutSliceNBI of 1 float64", func() { check(gex.PutSliceNBI(tm, r, 8, src, nil, 0)) }},
			{"GetSliceNB+Wait of 512 float64", func() {
				ev, err := gex.GetSliceNB(tm, dst, r, 8, 0)
				check(err)
				check(ev.Wait())
			}},
		}
	}
	run := func(rep allocReporter, c *gex.Client, tm *gex.TM, r gex.Rank, _ gex.Addr) {
		assertNoAllocs(rep, fmt.Sprintf("to rank %d", r), 200, func(check func(error)) []allocCase { return cases(tm, r, check) })
	}
	allocsOnSelf(t, run)
	allocsOnPeer(t, run)
}
