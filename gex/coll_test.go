package gex_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Tests of the collectives (GASNet-EX "Collectives (Coll)"): every body runs
// on loop and smp with 1 to 4 ranks.

var collSizes = []int{1, 2, 3, 4}

// wait synchronizes ev and fails the job on error.
func (e *rankEnv) wait(ev gex.Event, err error, what string) {
	e.t.Helper()
	e.Check(err, what)
	e.Check(ev.Wait(), what+": Wait")
}

// collBarrier is a gex barrier over tm.
func (e *rankEnv) collBarrier(tm *gex.TM) {
	e.t.Helper()
	ev, err := tm.BarrierNB(0)
	e.wait(ev, err, "BarrierNB")
}

// TestCollBarrierOrdering: no rank leaves a barrier before every rank arrived.
// Before barrier k each rank puts k into slot k%4 of its right neighbour at
// distance d (varying with k); after it, each rank must find k in its own slot
// from its left neighbour. A rank leaving early would read a stale value.
func TestCollBarrierOrdering(t *testing.T) {
	for _, n := range collSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			for _, sn := range []int{0, 1} {
				conformance(t, n, jobOpts{segSize: 1 << 16, supernode: sn}, func(e *rankEnv) {
					iters := 300
					if raceEnabled {
						iters = 60
					}
					barrierOrdering(e, iters)
				})
			}
		})
	}
}

// barrierOrdering: before barrier k each rank puts k into slot k%4 of its
// right neighbour at distance d (varying with k); after it, each rank must
// find k in its own slot. A rank leaving a barrier early would read a stale
// value.
func barrierOrdering(e *rankEnv, iters int) {
	n := int(e.size)
	peerBase := make([]gex.Addr, n)
	for r := range peerBase {
		bs, ev, err := e.tm.QueryBoundSegmentNB(gex.Rank(r), 0)
		e.wait(ev, err, "QueryBoundSegmentNB")
		peerBase[r] = bs.Owner
	}
	e.collBarrier(e.tm)
	own := e.seg.Bytes()
	for k := 1; k <= iters; k++ {
		d := 1 + k%max(1, n-1)
		right := (int(e.rank) + d) % n
		var v [8]byte
		binary.LittleEndian.PutUint64(v[:], uint64(k))
		e.Check(e.tm.PutBlocking(gex.Rank(right), peerBase[right]+gex.Addr(8*(k%4)), v[:], 0), "PutBlocking")
		e.collBarrier(e.tm)
		if got := binary.LittleEndian.Uint64(own[8*(k%4):]); got != uint64(k) {
			e.Fatalf("after barrier %d: slot holds %d, want %d (a rank left the barrier early)", k, got, k)
		}
	}
}

// bcastPattern is what root broadcasts in call k of n bytes.
func bcastPattern(b []byte, root gex.Rank, k int) {
	for i := range b {
		b[i] = byte(i*7 + int(root)*31 + k*13 + i>>9)
	}
}

// TestCollBroadcast: every root, 0, 1, 8, 4096 and 1 MiB + 1 bytes.
func TestCollBroadcast(t *testing.T) {
	sizes := []int{0, 1, 8, 4096, 1<<20 + 1}
	for _, n := range collSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			conformance(t, n, jobOpts{}, func(e *rankEnv) {
				for k, size := range sizes {
					for root := gex.Rank(0); root < e.size; root++ {
						src := make([]byte, size)
						want := make([]byte, size)
						bcastPattern(want, root, k)
						if e.rank == root {
							copy(src, want)
						}
						dst := bytes.Repeat([]byte{0xee}, size+3)
						ev, err := e.tm.BroadcastNB(root, dst, src, size, 0)
						e.wait(ev, err, "BroadcastNB")
						if !bytes.Equal(dst[:size], want) {
							e.Fatalf("broadcast of %d bytes from root %d: wrong bytes (first difference at %d)", size, root, firstDiff(dst[:size], want))
						}
						if !bytes.Equal(dst[size:], []byte{0xee, 0xee, 0xee}) {
							e.Fatalf("broadcast of %d bytes from root %d wrote past nbytes", size, root)
						}
					}
				}
			})
		})
	}
}

// TestCollBroadcastSegment: broadcasts whose source lies in the root's
// segment - through the mapping inside a neighbourhood (from 16 KiB up), and
// down the AM tree when the segments are not mapped (supernode size 1).
func TestCollBroadcastSegment(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		for _, sn := range []int{0, 1} {
			t.Run(fmt.Sprintf("%d/supernode=%d", n, sn), func(t *testing.T) {
				conformance(t, n, jobOpts{segSize: 2 << 20, supernode: sn}, func(e *rankEnv) {
					seg := e.seg.Bytes()
					for k, size := range []int{8, 16 << 10, 64<<10 + 3, 1<<20 + 1} {
						for root := gex.Rank(0); root < e.size; root++ {
							want := make([]byte, size)
							bcastPattern(want, root, k)
							src := seg[100 : 100+size]
							if e.rank == root {
								copy(src, want)
							}
							dst := bytes.Repeat([]byte{0xee}, size)
							ev, err := e.tm.BroadcastNB(root, dst, src, size, 0)
							e.wait(ev, err, "BroadcastNB")
							if !bytes.Equal(dst, want) {
								e.Fatalf("broadcast of %d bytes from root %d's segment: wrong bytes (first difference at %d)", size, root, firstDiff(dst, want))
							}
							e.collBarrier(e.tm) // the root rewrites src next round
						}
					}
				})
			})
		}
	}
}

// reduceCase is one data type with its valid operators.
type reduceCase struct {
	dt  gex.DT
	sz  int
	ops []gex.OP
}

var reduceCases = []reduceCase{
	{gex.DTI32, 4, []gex.OP{gex.OPAdd, gex.OPMult, gex.OPMin, gex.OPMax, gex.OPAnd, gex.OPOr, gex.OPXor}},
	{gex.DTU32, 4, []gex.OP{gex.OPAdd, gex.OPMult, gex.OPMin, gex.OPMax, gex.OPAnd, gex.OPOr, gex.OPXor}},
	{gex.DTI64, 8, []gex.OP{gex.OPAdd, gex.OPMult, gex.OPMin, gex.OPMax, gex.OPAnd, gex.OPOr, gex.OPXor}},
	{gex.DTU64, 8, []gex.OP{gex.OPAdd, gex.OPMult, gex.OPMin, gex.OPMax, gex.OPAnd, gex.OPOr, gex.OPXor}},
	{gex.DTFLT, 4, []gex.OP{gex.OPAdd, gex.OPMult, gex.OPMin, gex.OPMax}},
	{gex.DTDBL, 8, []gex.OP{gex.OPAdd, gex.OPMult, gex.OPMin, gex.OPMax}},
}

// reduceInput is rank r's src for a case: random values, small for MULT so
// products stay finite.
func reduceInput(rc reduceCase, op gex.OP, r gex.Rank, cnt, seed int) []byte {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(r)))
	b := make([]byte, rc.sz*cnt)
	for i := 0; i < cnt; i++ {
		switch rc.dt {
		case gex.DTFLT:
			v := float32(rng.NormFloat64() * 100)
			if op == gex.OPMult {
				v = float32(0.5 + rng.Float64())
			}
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		case gex.DTDBL:
			v := rng.NormFloat64() * 1e6
			if op == gex.OPMult {
				v = 0.5 + rng.Float64()
			}
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
		case gex.DTI32, gex.DTU32:
			binary.LittleEndian.PutUint32(b[4*i:], rng.Uint32())
		default:
			binary.LittleEndian.PutUint64(b[8*i:], rng.Uint64())
		}
	}
	return b
}

// reduceModel folds the inputs in rank order, element by element, in float64
// for the floating-point types.
func reduceModel(rc reduceCase, op gex.OP, in [][]byte, cnt int) []float64 {
	out := make([]float64, cnt)
	for i := 0; i < cnt; i++ {
		var acc float64
		var iacc uint64
		for r, b := range in {
			var x uint64
			var f float64
			switch rc.dt {
			case gex.DTFLT:
				f = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
			case gex.DTDBL:
				f = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
			case gex.DTI32:
				x = uint64(int64(int32(binary.LittleEndian.Uint32(b[4*i:]))))
			case gex.DTU32:
				x = uint64(binary.LittleEndian.Uint32(b[4*i:]))
			default:
				x = binary.LittleEndian.Uint64(b[8*i:])
			}
			if r == 0 {
				acc, iacc = f, x
				continue
			}
			signed := rc.dt == gex.DTI32 || rc.dt == gex.DTI64
			switch op {
			case gex.OPAdd:
				acc += f
				iacc += x
			case gex.OPMult:
				acc *= f
				iacc *= x
			case gex.OPMin:
				acc = math.Min(acc, f)
				if signed && int64(x) < int64(iacc) || !signed && x < iacc {
					iacc = x
				}
			case gex.OPMax:
				acc = math.Max(acc, f)
				if signed && int64(x) > int64(iacc) || !signed && x > iacc {
					iacc = x
				}
			case gex.OPAnd:
				iacc &= x
			case gex.OPOr:
				iacc |= x
			case gex.OPXor:
				iacc ^= x
			}
			if rc.dt == gex.DTI32 {
				iacc = uint64(int64(int32(iacc)))
			} else if rc.dt == gex.DTU32 {
				iacc = uint64(uint32(iacc))
			}
		}
		if rc.dt == gex.DTFLT || rc.dt == gex.DTDBL {
			out[i] = acc
		} else {
			out[i] = math.Float64frombits(iacc)
		}
	}
	return out
}

// checkReduce compares a result with the model. Integers must match exactly;
// floats within a relative 1e-5 (FLT) or 1e-12 (DBL) of the model's
// magnitude: ADD and MULT reassociate in a tree.
func checkReduce(rc reduceCase, got []byte, want []float64) error {
	for i, w := range want {
		switch rc.dt {
		case gex.DTFLT, gex.DTDBL:
			var g float64
			tol := 1e-12
			if rc.dt == gex.DTFLT {
				g = float64(math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])))
				tol = 1e-5
				w = float64(float32(w))
			} else {
				g = math.Float64frombits(binary.LittleEndian.Uint64(got[8*i:]))
			}
			if math.Abs(g-w) > tol*math.Max(1, math.Abs(w))*4 {
				return fmt.Errorf("element %d = %g, want %g", i, g, w)
			}
		case gex.DTI32, gex.DTU32:
			if g, w := binary.LittleEndian.Uint32(got[4*i:]), uint32(math.Float64bits(w)); g != w {
				return fmt.Errorf("element %d = %#x, want %#x", i, g, w)
			}
		default:
			if g, w := binary.LittleEndian.Uint64(got[8*i:]), math.Float64bits(w); g != w {
				return fmt.Errorf("element %d = %#x, want %#x", i, g, w)
			}
		}
	}
	return nil
}

// TestCollReduce: every built-in type and operator, ReduceToOne to every root
// and ReduceToAll, against the sequential model.
func TestCollReduce(t *testing.T) {
	for _, n := range collSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			conformance(t, n, jobOpts{}, func(e *rankEnv) {
				seed := 0
				for _, rc := range reduceCases {
					for _, op := range rc.ops {
						cnts := []int{1, 5, 3000}
						if rc.dt == gex.DTU64 && op == gex.OPAdd {
							cnts = append(cnts, 20000) // 160 KB: the tree, not recursive doubling
						}
						for _, cnt := range cnts {
							seed++
							in := make([][]byte, n)
							for r := range in {
								in[r] = reduceInput(rc, op, gex.Rank(r), cnt, seed)
							}
							want := reduceModel(rc, op, in, cnt)
							src := in[e.rank]
							for root := gex.Rank(0); root < e.size; root++ {
								dst := make([]byte, rc.sz*cnt)
								ev, err := e.tm.ReduceToOneNB(root, dst, src, rc.dt, rc.sz, cnt, op, nil, nil, 0)
								e.wait(ev, err, "ReduceToOneNB")
								if e.rank == root {
									if err := checkReduce(rc, dst, want); err != nil {
										e.Fatalf("ReduceToOne %v %v count %d root %d: %v", rc.dt, op, cnt, root, err)
									}
								}
							}
							dst := make([]byte, rc.sz*cnt)
							ev, err := e.tm.ReduceToAllNB(dst, src, rc.dt, rc.sz, cnt, op, nil, nil, 0)
							e.wait(ev, err, "ReduceToAllNB")
							if err := checkReduce(rc, dst, want); err != nil {
								e.Fatalf("ReduceToAll %v %v count %d: %v", rc.dt, op, cnt, err)
							}
						}
					}
				}
			})
		})
	}
}

// TestCollProgressModes: collectives complete whichever goroutine makes
// progress - the receive goroutine while the caller tests its event, or a
// caller sleeping in the blocking wait mode.
func TestCollProgressModes(t *testing.T) {
	for _, o := range []jobOpts{{rcv: true, waitMode: gex.WaitSpin}, {waitMode: gex.WaitBlock}} {
		t.Run(fmt.Sprintf("rcv=%v/wait=%v", o.rcv, o.waitMode), func(t *testing.T) {
			conformance(t, 3, o, func(e *rankEnv) {
				for i := 0; i < 200; i++ {
					dst := make([]byte, 8)
					ev, err := e.tm.ReduceToAllNB(dst, u64s(uint64(i)), gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
					e.Check(err, "ReduceToAllNB")
					if o.rcv {
						// Test never polls: the receive goroutine must
						// make the progress.
						for ev.Test() != nil {
							runtime.Gosched()
						}
					} else {
						e.Check(ev.Wait(), "Wait")
					}
					if got := binary.LittleEndian.Uint64(dst); got != 3*uint64(i) {
						e.Fatalf("round %d: sum %d, want %d", i, got, 3*i)
					}
					e.collBarrier(e.tm)
				}
			})
		})
	}
}
