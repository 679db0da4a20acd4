package gex_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// Tests of the collectives through shared memory (coll_shm.go,
// docs/coll.md "Shared memory"): which teams take the path, barrier and
// named-barrier semantics on it (flat and hierarchical), the broadcast
// ring, and a rank dying while the others wait on its flag.

// wantPath fails the job unless tm's collectives travel as want says.
func (e *rankEnv) wantPath(tm *gex.TM, want, what string) {
	e.t.Helper()
	if got := gex.CollPath(tm); got != want {
		e.Fatalf("%s: collective path %q, want %q", what, got, want)
	}
}

// TestShmCollPath: the primordial team and Split teams of at least two
// members in one neighbourhood are flat; over several neighbourhoods
// (pretend hosts) hierarchical; teams by Dup and Create, and jobs with one
// rank per neighbourhood, keep AMs. A Split team's line is given back when
// the team is destroyed or does not use it.
func TestShmCollPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		o    jobOpts
		prim string
	}{
		{"2", 2, jobOpts{}, "shm"},
		{"3", 3, jobOpts{}, "shm"},
		{"4", 4, jobOpts{}, "shm"},
		{"4-supernode1", 4, jobOpts{supernode: 1}, "am"},
		{"4-hosts2x2", 4, jobOpts{hosts: []string{"a", "a", "b", "b"}}, "shm-hier"},
		{"3-hosts2+1", 3, jobOpts{hosts: []string{"a", "a", "b"}}, "shm-hier"},
		{"2-hosts1+1", 2, jobOpts{hosts: []string{"a", "b"}}, "am"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, tc.n, tc.o, func(e *rankEnv) {
				e.wantPath(e.tm, tc.prim, "primordial team")
				lines := gex.CollShmLines(e.c)
				if tc.prim == "am" && tc.o.supernode == 1 && lines != 1 {
					e.Fatalf("%d lines in use, want 1 (the primordial team's)", lines)
				}
				color := int(e.rank) % 2
				sub, _, err := e.tm.Split(color, 0, nil, gex.FlagTMNoScratch)
				e.Check(err, "Split")
				members := (tc.n + 1 - color) / 2
				want := "am"
				if members >= 2 && tc.prim == "shm" {
					want = "shm"
				}
				e.wantPath(sub, want, fmt.Sprintf("Split team of %d", members))
				if wantLines := lines + map[bool]int{true: 1, false: 0}[want == "shm"]; gex.CollShmLines(e.c) != wantLines {
					e.Fatalf("after Split: %d lines in use, want %d", gex.CollShmLines(e.c), wantLines)
				}
				e.collBarrier(sub)
				_, err = sub.Destroy(0)
				e.Check(err, "Destroy")
				if gex.CollShmLines(e.c) != lines {
					e.Fatalf("after Destroy: %d lines in use, want %d", gex.CollShmLines(e.c), lines)
				}
				dup, _, err := e.tm.Dup(nil, gex.FlagTMNoScratch)
				e.Check(err, "Dup")
				e.wantPath(dup, "am", "Dup team")
				_, err = dup.Destroy(0)
				e.Check(err, "Destroy(Dup)")
			})
		})
	}
}

// namedBarriers runs GASNet-1 named barriers through BarrierNamedNB with
// the spec's matching rules ("Barriers", GASNet-1 spec): equal ids match,
// an anonymous notify matches anything, different ids or a MISMATCH flag
// fail on every rank; EX barriers in between.
func namedBarriers(e *rankEnv, rounds int) {
	named := func(id int32, flags uint32, wantMismatch bool, what string) {
		e.t.Helper()
		ev, err := e.tm.BarrierNamedNB(id, flags)
		e.Check(err, what+": BarrierNamedNB")
		err = ev.Wait()
		e.tm.BarrierNamedEnd()
		switch {
		case wantMismatch && !errors.Is(err, gex.ErrBarrierMismatch):
			e.Fatalf("%s: Wait = %v, want GASNET_ERR_BARRIER_MISMATCH", what, err)
		case !wantMismatch && err != nil:
			e.Fatalf("%s: Wait = %v, want nil", what, err)
		}
	}
	last := e.size - 1
	for k := int32(0); k < int32(rounds); k++ {
		named(k, 0, false, "equal ids")
		id := k
		if e.rank == last {
			id = k + 1000
		}
		named(id, 0, e.size > 1, "the last rank's id differs")
		fl := uint32(0)
		if e.rank == 0 {
			fl = gex.BarrierFlagAnonymous
		}
		named(k, fl, false, "rank 0 anonymous, the others equal ids")
		fl = 0
		if e.rank == last {
			fl = gex.BarrierFlagMismatch
		}
		named(k, fl, true, "the last rank passes MISMATCH")
		e.collBarrier(e.tm)
		named(0, gex.BarrierFlagAnonymous, false, "all anonymous")
		// A different id on a rank whose peers are all anonymous matches.
		fl, id = gex.BarrierFlagAnonymous, 0
		if e.rank == last {
			fl, id = 0, 77
		}
		named(id, fl, false, "one named among anonymous")
	}
}

// TestShmBarrierNamed: the named barrier's semantics are the same on the
// flat and hierarchical shared-memory paths as on AMs.
func TestShmBarrierNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		o    jobOpts
		path string
	}{
		{"flat-2", 2, jobOpts{}, "shm"},
		{"flat-3", 3, jobOpts{}, "shm"},
		{"flat-4", 4, jobOpts{}, "shm"},
		{"hier-4", 4, jobOpts{hosts: []string{"a", "a", "b", "b"}}, "shm-hier"},
		{"am-4", 4, jobOpts{supernode: 1}, "am"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance(t, tc.n, tc.o, func(e *rankEnv) {
				e.wantPath(e.tm, tc.path, "primordial team")
				namedBarriers(e, 10)
			})
		})
	}
}

// bcastRing broadcasts every size from every root, from the heap and from
// the root's segment, in place on the root, and several at once, and checks
// every byte.
func bcastRing(e *rankEnv, sizes []int) {
	n := int(e.size)
	k := 0
	for _, sz := range sizes {
		dst := make([]byte, sz)
		heap := make([]byte, sz)
		for root := 0; root < n; root++ {
			for _, from := range []string{"heap", "segment", "in place"} {
				k++
				src := heap
				if from == "segment" {
					src = e.seg.Bytes()[:sz]
				}
				if gex.Rank(root) == e.rank {
					bcastPattern(src, gex.Rank(root), k)
				}
				d := dst
				if from == "in place" && gex.Rank(root) == e.rank {
					d = src
				}
				clear(dst)
				ev, err := e.tm.BroadcastNB(gex.Rank(root), d, src, sz, 0)
				e.wait(ev, err, fmt.Sprintf("BroadcastNB of %d bytes from rank %d (%s)", sz, root, from))
				want := make([]byte, sz)
				bcastPattern(want, gex.Rank(root), k)
				if !bytes.Equal(d, want) {
					i := 0
					for i < sz && d[i] == want[i] {
						i++
					}
					e.Fatalf("broadcast of %d bytes from rank %d (%s): byte %d = %d, want %d", sz, root, from, i, d[i], want[i])
				}
			}
		}
	}
	// Several in flight at once, two of them from the same root (whose
	// ring the second waits for).
	const inFlight = 3
	sz := sizes[len(sizes)-1]
	var dsts, srcs [inFlight][]byte
	var evs [inFlight]gex.Event
	for i := range evs {
		dsts[i], srcs[i] = make([]byte, sz), make([]byte, sz)
		root := gex.Rank(i % 2 % n)
		if root == e.rank {
			bcastPattern(srcs[i], root, 1000+i)
		}
		var err error
		evs[i], err = e.tm.BroadcastNB(root, dsts[i], srcs[i], sz, 0)
		e.Check(err, "BroadcastNB in flight")
	}
	for i := range evs {
		e.Check(evs[i].Wait(), "Wait in flight")
		want := make([]byte, sz)
		bcastPattern(want, gex.Rank(i%2%n), 1000+i)
		if !bytes.Equal(dsts[i], want) {
			e.Fatalf("broadcast %d of %d in flight: wrong bytes", i, inFlight)
		}
	}
}

// TestShmBroadcastRing: broadcasts through the roots' rings and segments,
// sizes from the threshold to past several turns of the ring, on 2, 3 and
// 4 ranks; two teams broadcasting from the same root at once.
func TestShmBroadcastRing(t *testing.T) {
	sizes := []int{16 << 10, 64<<10 + 3, 5*64<<10 + 5, 1<<20 + 1}
	if raceEnabled {
		sizes = []int{16 << 10, 5*64<<10 + 5}
	}
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			conformance(t, n, jobOpts{segSize: 2 << 20}, func(e *rankEnv) {
				e.wantPath(e.tm, "shm", "primordial team")
				bcastRing(e, sizes)
				// The even ranks' team and the primordial team broadcast
				// from job rank 0 at the same time: one ring, two teams.
				sub, _, err := e.tm.Split(int(e.rank)%2, 0, nil, gex.FlagTMNoScratch)
				e.Check(err, "Split")
				sz := 200 << 10
				a, b := make([]byte, sz), make([]byte, sz)
				if e.rank == 0 {
					bcastPattern(a, 0, 1)
					bcastPattern(b, 0, 2)
				}
				ev1, err := e.tm.BroadcastNB(0, a, a, sz, 0)
				e.Check(err, "BroadcastNB (primordial)")
				ev2 := gex.EventInvalid
				if sub.QuerySize() > 1 && e.rank%2 == 0 {
					ev2, err = sub.BroadcastNB(0, b, b, sz, 0)
					e.Check(err, "BroadcastNB (even ranks)")
				}
				e.Check(ev1.Wait(), "Wait (primordial)")
				if ev2 != gex.EventInvalid {
					e.Check(ev2.Wait(), "Wait (even ranks)")
					want := make([]byte, sz)
					bcastPattern(want, 0, 2)
					if !bytes.Equal(b, want) {
						e.Fatalf("the even ranks' broadcast delivered wrong bytes")
					}
				}
				want := make([]byte, sz)
				bcastPattern(want, 0, 1)
				if !bytes.Equal(a, want) {
					e.Fatalf("the primordial broadcast delivered wrong bytes")
				}
				e.collBarrier(e.tm)
				_, err = sub.Destroy(0)
				e.Check(err, "Destroy")
			})
		})
	}
}

// TestShmBroadcastSizeMismatch: a member expecting another size than the
// root sends gets an error naming the root, copies nothing beyond its dst,
// and the team's collectives go on.
func TestShmBroadcastSizeMismatch(t *testing.T) {
	conformance(t, 3, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		sz := 32 << 10
		if e.rank == 1 {
			sz = 20 << 10
		}
		buf := make([]byte, 40<<10)
		ev, err := e.tm.BroadcastNB(0, buf, buf, sz, 0)
		e.Check(err, "BroadcastNB")
		err = ev.Wait()
		switch {
		case e.rank == 1 && (!errors.Is(err, gex.ErrBadArg) || !regexp.MustCompile(`rank 0 broadcasts 32768 bytes where this rank expects 20480`).MatchString(err.Error())):
			e.Fatalf("mismatched broadcast: Wait = %v, want GASNET_ERR_BAD_ARG naming rank 0 and both sizes", err)
		case e.rank != 1 && err != nil:
			e.Fatalf("broadcast: Wait = %v, want nil", err)
		}
		if e.rank == 1 && !bytes.Equal(buf[20<<10:], make([]byte, 20<<10)) {
			e.Fatalf("the mismatched broadcast wrote past the %d bytes this rank asked for", sz)
		}
		bcastRing(e, []int{16 << 10})
	})
}

// hierBody checks the hierarchical path: barrier ordering against puts
// across hosts, named barriers, broadcasts and reductions.
func hierBody(e *rankEnv) {
	e.wantPath(e.tm, "shm-hier", "primordial team")
	n := int(e.size)
	barrierOrdering(e, 200)
	namedBarriers(e, 5)
	for root := 0; root < n; root++ {
		b := make([]byte, 40<<10)
		if root == int(e.rank) {
			bcastPattern(b, gex.Rank(root), root)
		}
		ev, err := e.tm.BroadcastNB(gex.Rank(root), b, b, len(b), 0)
		e.wait(ev, err, "BroadcastNB")
		want := make([]byte, len(b))
		bcastPattern(want, gex.Rank(root), root)
		if !bytes.Equal(b, want) {
			e.Fatalf("broadcast from rank %d delivered wrong bytes", root)
		}
	}
	src, dst := make([]byte, 8), make([]byte, 8)
	src[0] = byte(e.rank + 1)
	ev, err := e.tm.ReduceToAllNB(dst, src, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
	e.wait(ev, err, "ReduceToAllNB")
	if dst[0] != byte(n*(n+1)/2) {
		e.Fatalf("ReduceToAll: sum %d, want %d", dst[0], n*(n+1)/2)
	}
}

// TestShmHierarchical: two hosts of two ranks each, as pretend hosts (loop
// and smp: shared memory inside a host, the AM rings between them) and as
// network namespaces (tcp conduit: TCP between the hosts).
func TestShmHierarchical(t *testing.T) {
	t.Run("pretend", func(t *testing.T) {
		conformance(t, 4, jobOpts{segSize: 1 << 16, hosts: []string{"a", "a", "b", "b"}}, hierBody)
	})
	t.Run("netns", func(t *testing.T) {
		if os.Getenv(envConduit) == "loop" {
			t.Skipf("%s=loop: the tcp conduit runs between processes", envConduit)
		}
		o := jobOpts{segSize: 1 << 16, env: []string{"GEX_CONDUIT=tcp"}, launch: inNetns(t, 2)}
		runSMP(t, 4, o, hierBody)
	})
}

// TestShmBarrierRankDies: rank 1 of 3 is killed while ranks 0 and 2 wait
// for it in a shared-memory barrier (its flag never changes): their waits
// fail naming it (and a member not arrived: rank 1, or the other survivor
// if that one had not reached the barrier yet) and the job ends, within
// seconds.
func TestShmBarrierRankDies(t *testing.T) {
	if os.Getenv(envConduit) == "loop" {
		t.Skipf("%s=loop: dying is a process ending", envConduit)
	}
	var out string
	spmdtest.Run(t, 3, func(t *testing.T) {
		_, _, tm, err := gex.ClientInit("DIES", 0)
		if err != nil {
			t.Fatal(err)
		}
		if p := gex.CollPath(tm); p != "shm" {
			t.Fatalf("collective path %q, want shm", p)
		}
		ev, _ := tm.BarrierNB(0)
		if err := ev.Wait(); err != nil {
			t.Fatal(err)
		}
		me := tm.QueryRank()
		if me == 1 {
			fmt.Printf("rank 1 dies at %d\n", time.Now().UnixNano())
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		ev, _ = tm.BarrierNB(0)
		fmt.Printf("rank %d: barrier: %v\n", me, ev.Wait())
		time.Sleep(time.Minute) // the job ends under this rank
		t.Fatal("the job did not end")
	}, spmdtest.Output(&out), spmdtest.Timeout(30*time.Second), spmdtest.EndsEarly(), spmdtest.ExpectExit(1))
	if spmdtest.InRank() {
		return
	}
	ended := time.Now()
	if !regexp.MustCompile(`(?m)^gexrun: rank 1 \(pid \d+\).*killed by signal`).MatchString(out) {
		t.Errorf("the job's output lacks the launcher's line naming rank 1:\n%s", out)
	}
	for _, r := range []int{0, 2} {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^\[%d\] rank %d: barrier: gex: Event.Wait: .*rank 1 .*\(pending: Event.Wait for Barrier \(peer: rank \d\)\) \(GASNET_ERR_RESOURCE\)$`, r, r))
		if !re.MatchString(out) {
			t.Errorf("rank %d's wait did not fail naming rank 1:\n%s", r, out)
		}
	}
	m := regexp.MustCompile(`rank 1 dies at (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rank 1 did not say when it died:\n%s", out)
	}
	var ns int64
	fmt.Sscan(m[1], &ns)
	if d := ended.Sub(time.Unix(0, ns)); d > 5*time.Second {
		t.Errorf("the job ended %v after rank 1 died, want within 5s", d)
	}
}

// TestShmReduceInFlight: small reductions through the contribution
// buffers, many initiated before any is waited on (each buffer is reused
// every second one, so initiations wait for the members to finish with it),
// ReduceToOne to rotating roots (non-roots complete at once and run ahead)
// mixed with ReduceToAll and barriers; then a Split team that reduced is
// destroyed and its line serves the next Split team.
func TestShmReduceInFlight(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			conformance(t, n, jobOpts{}, func(e *rankEnv) {
				const k = 40
				type check struct {
					dst, want []byte
					root      int // -1: every rank
				}
				run := func(tm *gex.TM, what string) {
					size := int(tm.QuerySize())
					me := int(tm.QueryRank())
					before := gex.CollShmSmallOps(tm)
					if before < 0 {
						e.Fatalf("%s: no contribution buffers", what)
					}
					var evs []gex.Event
					var checks []check
					for i := 0; i < k; i++ {
						cnt := 1 + i*7%128 // up to the 1 KiB of a buffer
						src, sum := make([]uint64, cnt), make([]uint64, cnt)
						for j := range src {
							src[j] = uint64(me+1) * uint64(i+j+1)
							sum[j] = uint64(size*(size+1)/2) * uint64(i+j+1)
						}
						dst := make([]byte, 8*cnt)
						var ev gex.Event
						var err error
						root := -1
						switch i % 4 {
						case 0, 2:
							ev, err = tm.ReduceToAllNB(dst, u64s(src...), gex.DTU64, 8, cnt, gex.OPAdd, nil, nil, 0)
						case 1:
							root = i % size
							ev, err = tm.ReduceToOneNB(gex.Rank(root), dst, u64s(src...), gex.DTU64, 8, cnt, gex.OPAdd, nil, nil, 0)
						case 3:
							ev, err = tm.BarrierNB(0)
							dst = nil
						}
						e.Check(err, fmt.Sprintf("%s: collective %d", what, i))
						evs = append(evs, ev)
						if dst != nil && (root < 0 || root == me) {
							checks = append(checks, check{dst, u64s(sum...), root})
						}
					}
					e.Check(gex.EventWaitAll(evs, 0), what+": EventWaitAll")
					for i, c := range checks {
						if !bytes.Equal(c.dst, c.want) {
							e.Fatalf("%s: reduction %d (root %d): wrong sum (first difference at byte %d)", what, i, c.root, firstDiff(c.dst, c.want))
						}
					}
					if got := gex.CollShmSmallOps(tm) - before; got != 3*k/4 {
						e.Fatalf("%s: %d reductions through the contribution buffers, want %d", what, got, 3*k/4)
					}
				}
				run(e.tm, "primordial team")
				for round := 0; round < 3; round++ {
					sub, _, err := e.tm.Split(0, -int(e.rank), nil, gex.FlagTMNoScratch) // reversed rank order
					e.Check(err, "Split")
					run(sub, fmt.Sprintf("split team %d", round))
					_, err = sub.Destroy(0)
					e.Check(err, "Destroy")
				}
			})
		})
	}
}

// TestShmNoAllocs: the shared-memory collectives do not allocate once the
// pools are warm (STYLE.md, "Budgets are tests"): the flat barrier, a small
// reduction, a broadcast through the ring (rotating roots) on 2 ranks, and
// the hierarchical barrier, small reductions and broadcasts (rotating
// roots) on 2 pretend hosts of 2 ranks. Every rank
// measures the same number of calls, so the collectives match up.
func TestShmNoAllocs(t *testing.T) {
	t.Run("flat", func(t *testing.T) {
		conformance(t, 2, jobOpts{}, func(e *rankEnv) {
			e.wantPath(e.tm, "shm", "primordial team")
			src, dst := make([]byte, 8), make([]byte, 8)
			big, bigDst := make([]byte, 64<<10), make([]byte, 64<<10)
			root := gex.Rank(0)
			assertNoAllocs(e, "over 2 ranks through shared memory", 200, func(check func(error)) []allocCase {
				return []allocCase{
					{"BarrierNB+Wait", func() {
						ev, err := e.tm.BarrierNB(0)
						check(err)
						check(ev.Wait())
					}},
					{"ReduceToAllNB(8 B)+Wait", func() {
						ev, err := e.tm.ReduceToAllNB(dst, src, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
						check(err)
						check(ev.Wait())
					}},
					{"ReduceToOneNB(8 B, alternating roots)+Wait", func() {
						root ^= 1
						ev, err := e.tm.ReduceToOneNB(root, dst, src, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
						check(err)
						check(ev.Wait())
					}},
					{"BroadcastNB(64 KiB, alternating roots)+Wait", func() {
						root ^= 1
						ev, err := e.tm.BroadcastNB(root, bigDst, big, len(big), 0)
						check(err)
						check(ev.Wait())
					}},
				}
			})
		})
	})
	t.Run("hier", func(t *testing.T) {
		if raceEnabled {
			// sync.Pool drops a quarter of its items under the race
			// detector, and the loop job's four ranks share one
			// allocation counter: the events of six barriers per call
			// add up to whole allocations.
			t.Skip("allocation counts are not exact under the race detector with four ranks in one process")
		}
		conformance(t, 4, jobOpts{hosts: []string{"a", "a", "b", "b"}}, func(e *rankEnv) {
			e.wantPath(e.tm, "shm-hier", "primordial team")
			src, dst := make([]byte, 8), make([]byte, 8)
			big, bigDst := make([]byte, 64<<10), make([]byte, 64<<10)
			root := gex.Rank(0)
			assertNoAllocs(e, "over 2 hosts of 2 ranks", 100, func(check func(error)) []allocCase {
				return []allocCase{
					{"BarrierNB+Wait", func() {
						ev, err := e.tm.BarrierNB(0)
						check(err)
						check(ev.Wait())
					}},
					{"ReduceToAllNB(8 B)+Wait", func() {
						ev, err := e.tm.ReduceToAllNB(dst, src, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
						check(err)
						check(ev.Wait())
					}},
					{"ReduceToOneNB(8 B, rotating roots)+Wait", func() {
						root = (root + 1) % 4
						ev, err := e.tm.ReduceToOneNB(root, dst, src, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
						check(err)
						check(ev.Wait())
					}},
					{"BroadcastNB(8 B, rotating roots)+Wait", func() {
						root = (root + 1) % 4
						ev, err := e.tm.BroadcastNB(root, dst, src, len(src), 0)
						check(err)
						check(ev.Wait())
					}},
					{"BroadcastNB(64 KiB, rotating roots)+Wait", func() {
						root = (root + 1) % 4
						ev, err := e.tm.BroadcastNB(root, bigDst, big, len(big), 0)
						check(err)
						check(ev.Wait())
					}},
				}
			})
		})
	})
}

// TestShmBarrierCompletesAtInitiation: on the shared-memory path, an
// anonymous barrier whose peers have all arrived, with nothing else of the
// team in flight, completes inside BarrierNB (EventInvalid: no event, no
// pending entry); one that finds a peer's named-barrier record does not
// (the engine merges the record) and still matches it. Rank 1 calls its
// barrier only after rank 0 has initiated its own and said so through a
// flag in rank 1's segment.
func TestShmBarrierCompletesAtInitiation(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		pv, err := gex.PeerView[int64](e.tm, 1-e.rank)
		e.Check(err, "PeerView")
		own := gex.View[int64](e.seg)
		shm := gex.CollPath(e.tm) == "shm"
		for round, named := range []bool{false, true, false} {
			flag := int64(round + 1)
			if e.rank == 0 {
				var ev gex.Event
				if named {
					ev, err = e.tm.BarrierNamedNB(7, 0)
				} else {
					ev, err = e.tm.BarrierNB(0)
				}
				e.Check(err, "rank 0's barrier")
				atomic.StoreInt64(&pv[8], flag) // rank 0 has arrived
				e.Check(ev.Wait(), "rank 0's barrier: Wait")
				if named {
					e.tm.BarrierNamedEnd()
				}
				continue
			}
			for atomic.LoadInt64(&own[8]) != flag {
				runtime.Gosched()
			}
			ev, err := e.tm.BarrierNB(0)
			e.Check(err, "BarrierNB")
			if now := ev == gex.EventInvalid; shm && now == named {
				e.Fatalf("round %d (rank 0 named: %v): BarrierNB complete at initiation %v, want %v", round, named, now, !named)
			}
			e.Check(ev.Wait(), "BarrierNB: Wait")
		}
	})
}

// TestShmBarrierPolite: 4 ranks whose waits are polite (the rule told the
// host has one CPU, so on any machine) pass anonymous and named barriers
// and small reductions through the shared-memory path, where a waiting rank polls instead of
// yielding while the ranks it waits for run on other CPUs (polite.go):
// after every barrier each rank sees every peer's count of barriers
// entered at least at its own, every sum is right, and every rank's CPU
// word names a CPU of this machine.
func TestShmBarrierPolite(t *testing.T) {
	runSMP(t, 4, jobOpts{segSize: 1 << 16, env: []string{"GEXGO_TEST_CPUS=1"}}, func(e *rankEnv) {
		if !gex.Polite(e.c) {
			e.Fatalf("4 ranks with GEXGO_TEST_CPUS=1: waits not polite")
		}
		e.wantPath(e.tm, "shm", "primordial team")
		own := gex.View[int64](e.seg)
		peers := make([][]int64, e.size)
		for p := range peers {
			v, err := gex.PeerView[int64](e.tm, gex.Rank(p))
			e.Check(err, "PeerView")
			peers[p] = v
		}
		for i := int64(1); i <= 3000; i++ {
			atomic.StoreInt64(&own[0], i)
			ev, err := e.tm.BarrierNB(0)
			e.wait(ev, err, fmt.Sprintf("barrier %d", i))
			for p, v := range peers {
				if got := atomic.LoadInt64(&v[0]); got < i {
					e.Fatalf("after barrier %d: rank %d has entered %d barriers", i, p, got)
				}
			}
		}
		namedBarriers(e, 10)
		// Small reductions wait on the same arrive words.
		dst := make([]byte, 8)
		for i := uint64(1); i <= 1000; i++ {
			ev, err := e.tm.ReduceToAllNB(dst, u64s(i*uint64(e.rank+1)), gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
			e.wait(ev, err, fmt.Sprintf("ReduceToAllNB %d", i))
			if got, want := binary.LittleEndian.Uint64(dst), i*10; got != want {
				e.Fatalf("ReduceToAllNB %d: sum %d, want %d", i, got, want)
			}
		}
		for p := 0; p < int(e.size); p++ {
			if w := gex.CPUWord(e.c, p); w < 1 || w > runtime.NumCPU() {
				e.Fatalf("rank %d's CPU word is %d, want 1..%d", p, w, runtime.NumCPU())
			}
		}
	})
}
