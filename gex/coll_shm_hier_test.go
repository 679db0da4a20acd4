package gex_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Tests of the hierarchical broadcast and reductions (coll_shm_hier.go,
// docs/coll.md "Shared memory"): two hosts of two ranks, as pretend hosts
// and as network namespaces, over the primordial team (hosts in contiguous
// blocks of team ranks), a Split team in reversed order (contiguous, the
// leaders not job rank 0) and a Split team whose ranks alternate between
// the hosts (not contiguous: OPUserNC keeps the AM algorithms there).

// hierTeams are the teams hierColls runs over: name, team, contiguous.
func hierTeams(e *rankEnv) []struct {
	name   string
	tm     *gex.TM
	contig bool
} {
	rev, _, err := e.tm.Split(0, -int(e.rank), nil, gex.FlagTMNoScratch)
	e.Check(err, "Split (reversed)")
	// Job ranks 0,1 are host a and 2,3 host b: keys 0,2,1,3 give the team
	// order 0,2,1,3, hosts a,b,a,b.
	alt, _, err := e.tm.Split(0, int(e.rank%2)*2+int(e.rank/2), nil, gex.FlagTMNoScratch)
	e.Check(err, "Split (alternating)")
	return []struct {
		name   string
		tm     *gex.TM
		contig bool
	}{{"primordial", e.tm, true}, {"reversed", rev, true}, {"alternating", alt, false}}
}

// hierColls runs broadcasts of every size from every root (heap and
// segment sources, in place), every built-in reduction, OPUser and
// OPUserNC to every root and to all over tm, checking the results and that
// they took the hierarchical path.
func hierColls(e *rankEnv, tm *gex.TM, what string, contig bool) {
	e.wantPath(tm, "shm-hier", what)
	n, me := int(tm.QuerySize()), tm.QueryRank()
	before := gex.CollShmHierOps(tm)
	hier := 0
	for k, size := range []int{1, 8, 1000, 40 << 10, 64 << 10, 300<<10 + 3} {
		for root := gex.Rank(0); root < gex.Rank(n); root++ {
			want := make([]byte, size)
			bcastPattern(want, root, k)
			dst := make([]byte, size)
			ev, err := tm.BroadcastNB(root, dst, want, size, 0)
			e.wait(ev, err, fmt.Sprintf("%s: BroadcastNB(%d B, root %d)", what, size, root))
			if !bytes.Equal(dst, want) {
				e.Fatalf("%s: broadcast of %d B from %d: wrong bytes (first difference at %d)", what, size, root, firstDiff(dst, want))
			}
			if size >= gex.HierBcastMin {
				hier++
			}
			// From the root's segment, in place.
			if size > 64<<10 {
				continue
			}
			seg := e.seg.Bytes()[:size]
			if me == root {
				copy(seg, want)
			} else {
				clear(seg)
			}
			ev, err = tm.BroadcastNB(root, seg, seg, size, 0)
			e.wait(ev, err, what+": BroadcastNB from the segment, in place")
			if !bytes.Equal(seg, want) {
				e.Fatalf("%s: broadcast of %d B from %d's segment: wrong bytes (first difference at %d)", what, size, root, firstDiff(seg, want))
			}
			if size >= gex.HierBcastMin {
				hier++
			}
			e.collBarrier(tm) // the segment is written again next
		}
	}
	seed := 1000
	for _, rc := range reduceCases {
		for _, op := range rc.ops {
			for _, cnt := range []int{1, 5, 1024 / rc.sz} {
				seed++
				in := make([][]byte, n)
				for r := range in {
					in[r] = reduceInput(rc, op, gex.Rank(r), cnt, seed)
				}
				want := reduceModel(rc, op, in, cnt)
				for root := gex.Rank(0); root < gex.Rank(n); root++ {
					dst := make([]byte, rc.sz*cnt)
					ev, err := tm.ReduceToOneNB(root, dst, in[me], rc.dt, rc.sz, cnt, op, nil, nil, 0)
					e.wait(ev, err, what+": ReduceToOneNB")
					if me == root {
						if err := checkReduce(rc, dst, want); err != nil {
							e.Fatalf("%s: ReduceToOne %v %v count %d root %d: %v", what, rc.dt, op, cnt, root, err)
						}
					}
				}
				dst := make([]byte, rc.sz*cnt)
				ev, err := tm.ReduceToAllNB(dst, in[me], rc.dt, rc.sz, cnt, op, nil, nil, 0)
				e.wait(ev, err, what+": ReduceToAllNB")
				if err := checkReduce(rc, dst, want); err != nil {
					e.Fatalf("%s: ReduceToAll %v %v count %d: %v", what, rc.dt, op, cnt, err)
				}
				hier += n + 1
				// The same bits on every member: rank 0's result,
				// broadcast, equals everyone's.
				if rc.dt == gex.DTDBL && op == gex.OPAdd {
					got := make([]byte, len(dst))
					ev, err := tm.BroadcastNB(0, got, dst, len(dst), 0)
					e.wait(ev, err, what+": BroadcastNB of the result")
					if !bytes.Equal(got, dst) {
						e.Fatalf("%s: ReduceToAll DBL ADD: rank 0's result differs from this rank's in its bits", what)
					}
				}
			}
		}
	}
	// OPUser with client data, and OPUserNC: 2x2 matrix products in rank
	// order, which only the rank-ordered fold gets right.
	const m = 1000003
	cnt := 9
	sums, mats := make([]uint64, cnt), make([][]mat2, n)
	var mineSum, mineMat []byte
	for r := 0; r < n; r++ {
		rng := rand.New(rand.NewPCG(7, uint64(r)))
		vals, b := make([]uint64, cnt), make([]byte, 16*cnt)
		for i := range vals {
			vals[i] = rng.Uint64N(m)
			sums[i] = (sums[i] + vals[i]) % m
			mats[r] = append(mats[r], mat2{rng.Uint32() % 7, rng.Uint32() % 7, rng.Uint32() % 7, rng.Uint32() % 7})
			putMat(b[16*i:], mats[r][i])
		}
		if gex.Rank(r) == me {
			mineSum, mineMat = u64s(vals...), b
		}
	}
	wantNC := make([]byte, 16*cnt)
	for i := 0; i < cnt; i++ {
		p := mat2{1, 0, 0, 1}
		for r := 0; r < n; r++ {
			p = p.mul(mats[r][i])
		}
		putMat(wantNC[16*i:], p)
	}
	for _, c := range []struct {
		name   string
		src    []byte
		dt     gex.DT
		sz     int
		op     gex.OP
		fn     gex.ReduceFn
		cdata  any
		want   []byte
		onHier bool
	}{
		{"USER addMod", mineSum, gex.DTU64, 8, gex.OPUser, addMod, uint64(m), u64s(sums...), true},
		{"USER_NC matrix product", mineMat, gex.DTUser, 16, gex.OPUserNC, matMulNC, nil, wantNC, contig},
	} {
		for root := gex.Rank(0); root < gex.Rank(n); root++ {
			dst := make([]byte, len(c.want))
			ev, err := tm.ReduceToOneNB(root, dst, c.src, c.dt, c.sz, cnt, c.op, c.fn, c.cdata, 0)
			e.wait(ev, err, what+": "+c.name+" ReduceToOneNB")
			if me == root && !bytes.Equal(dst, c.want) {
				e.Fatalf("%s: %s ReduceToOne root %d: wrong result (first difference at byte %d)", what, c.name, root, firstDiff(dst, c.want))
			}
		}
		dst := make([]byte, len(c.want))
		ev, err := tm.ReduceToAllNB(dst, c.src, c.dt, c.sz, cnt, c.op, c.fn, c.cdata, 0)
		e.wait(ev, err, what+": "+c.name+" ReduceToAllNB")
		if !bytes.Equal(dst, c.want) {
			e.Fatalf("%s: %s ReduceToAll: wrong result (first difference at byte %d)", what, c.name, firstDiff(dst, c.want))
		}
		if c.onHier {
			hier += n + 1
		}
	}
	if got := gex.CollShmHierOps(tm) - before; got != hier {
		e.Fatalf("%s: %d hierarchical broadcasts and reductions, want %d", what, got, hier)
	}
}

// hierInFlight initiates k broadcasts, reductions and barriers over tm
// before waiting for any (rotating roots; reductions reuse each
// contribution buffer every second one, broadcasts the rings), then checks
// every result.
func hierInFlight(e *rankEnv, tm *gex.TM, what string) {
	const k = 48
	n, me := int(tm.QuerySize()), tm.QueryRank()
	type check struct {
		dst, want []byte
	}
	var evs []gex.Event
	var checks []check
	for i := 0; i < k; i++ {
		root := gex.Rank(i / 4 % n)
		var ev gex.Event
		var err error
		switch i % 4 {
		case 0:
			size := 1 + i*613
			if i%8 == 4 {
				size = 100 << 10
			}
			want := make([]byte, size)
			bcastPattern(want, root, i)
			dst := make([]byte, size)
			ev, err = tm.BroadcastNB(root, dst, want, size, 0)
			checks = append(checks, check{dst, want})
		case 1, 2:
			cnt := 1 + i*5%128
			src, sum := make([]uint64, cnt), make([]uint64, cnt)
			for j := range src {
				src[j] = uint64(me+1) * uint64(i+j+1)
				sum[j] = uint64(n*(n+1)/2) * uint64(i+j+1)
			}
			dst := make([]byte, 8*cnt)
			if i%4 == 1 {
				ev, err = tm.ReduceToAllNB(dst, u64s(src...), gex.DTU64, 8, cnt, gex.OPAdd, nil, nil, 0)
				checks = append(checks, check{dst, u64s(sum...)})
			} else {
				ev, err = tm.ReduceToOneNB(root, dst, u64s(src...), gex.DTU64, 8, cnt, gex.OPAdd, nil, nil, 0)
				if me == root {
					checks = append(checks, check{dst, u64s(sum...)})
				}
			}
		case 3:
			ev, err = tm.BarrierNB(0)
		}
		e.Check(err, fmt.Sprintf("%s: collective %d", what, i))
		evs = append(evs, ev)
	}
	e.Check(gex.EventWaitAll(evs, 0), what+": EventWaitAll")
	for i, c := range checks {
		if !bytes.Equal(c.dst, c.want) {
			e.Fatalf("%s: checked result %d: wrong bytes (first difference at %d)", what, i, firstDiff(c.dst, c.want))
		}
	}
}

func hierCollBody(e *rankEnv) {
	for _, t := range hierTeams(e) {
		hierColls(e, t.tm, t.name+" team", t.contig)
		hierInFlight(e, t.tm, t.name+" team")
		if t.tm != e.tm {
			_, err := t.tm.Destroy(0)
			e.Check(err, "Destroy")
		}
	}
}

// TestShmHierColls: hierarchical broadcasts and reductions over two hosts
// of two ranks, pretend hosts (loop and smp; spinning and sleeping waits)
// and network namespaces (tcp conduit between them).
func TestShmHierColls(t *testing.T) {
	t.Run("pretend", func(t *testing.T) {
		conformance(t, 4, jobOpts{segSize: 1 << 16, hosts: []string{"a", "a", "b", "b"}}, hierCollBody)
	})
	// Sleeping waits (the flags' readiness decides when a rank sleeps) and
	// progress by the receive goroutine.
	t.Run("pretend-block", func(t *testing.T) {
		conformance(t, 4, jobOpts{segSize: 1 << 16, hosts: []string{"a", "a", "b", "b"}, waitMode: gex.WaitBlock, rcv: true}, hierCollBody)
	})
	t.Run("netns", func(t *testing.T) {
		if os.Getenv(envConduit) == "loop" {
			t.Skipf("%s=loop: the tcp conduit runs between processes", envConduit)
		}
		o := jobOpts{segSize: 1 << 16, env: []string{"GEX_CONDUIT=tcp"}, launch: inNetns(t, 2)}
		runSMP(t, 4, o, hierCollBody)
	})
}
