package gex_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Tests of team construction (GASNet-EX "Operations on gex_TM_t", Memory
// Kinds "Teams") and of collectives over split teams, user-defined reductions,
// and many collectives in flight.

// u64s encodes vs as native little-endian bytes.
func u64s(vs ...uint64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return b
}

// mat2 is a 2x2 matrix of uint32, the element of the non-commutative test.
type mat2 [4]uint32

func (a mat2) mul(b mat2) mat2 {
	return mat2{a[0]*b[0] + a[1]*b[2], a[0]*b[1] + a[1]*b[3], a[2]*b[0] + a[3]*b[2], a[2]*b[1] + a[3]*b[3]}
}

func getMat(b []byte) mat2 {
	return mat2{binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])}
}

func putMat(b []byte, m mat2) {
	for i, v := range m {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
}

// matMulNC is a USER_NC operator: arg2 = arg1 * arg2 (matrix product, left
// operand first).
func matMulNC(arg1, arg2 []byte, count int, _ any) {
	for i := 0; i < count; i++ {
		putMat(arg2[16*i:], getMat(arg1[16*i:]).mul(getMat(arg2[16*i:])))
	}
}

// addMod is a USER operator on U64: arg2 = (arg1 + arg2) mod cdata.
func addMod(arg1, arg2 []byte, count int, cdata any) {
	m := cdata.(uint64)
	for i := 0; i < count; i++ {
		x, y := binary.LittleEndian.Uint64(arg1[8*i:]), binary.LittleEndian.Uint64(arg2[8*i:])
		binary.LittleEndian.PutUint64(arg2[8*i:], (x+y)%m)
	}
}

// byteAdd is a USER operator on DT_USER elements of any size: byte-wise sum.
func byteAdd(arg1, arg2 []byte, count int, cdata any) {
	n := count * cdata.(int)
	for i := 0; i < n; i++ {
		arg2[i] += arg1[i]
	}
}

// TestCollUserOps: USER with client data, USER on DT_USER with element sizes
// 1, 3, 12 and 1000, and USER_NC (2x2 matrix products, which only the
// rank-ordered fold gets right), to every root and to all.
func TestCollUserOps(t *testing.T) {
	for _, n := range collSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			conformance(t, n, jobOpts{}, func(e *rankEnv) {
				rngOf := func(r gex.Rank, k int) *rand.Rand { return rand.New(rand.NewPCG(uint64(k), uint64(r))) }
				reduceBoth := func(what string, src []byte, dt gex.DT, sz, cnt int, op gex.OP, fn gex.ReduceFn, cdata any, want []byte) {
					for root := gex.Rank(0); root < e.size; root++ {
						dst := make([]byte, sz*cnt)
						ev, err := e.tm.ReduceToOneNB(root, dst, src, dt, sz, cnt, op, fn, cdata, 0)
						e.wait(ev, err, what+" ReduceToOneNB")
						if e.rank == root && !bytes.Equal(dst, want) {
							e.Fatalf("%s ReduceToOne root %d: wrong result (first difference at byte %d)", what, root, firstDiff(dst, want))
						}
					}
					dst := make([]byte, sz*cnt)
					ev, err := e.tm.ReduceToAllNB(dst, src, dt, sz, cnt, op, fn, cdata, 0)
					e.wait(ev, err, what+" ReduceToAllNB")
					if !bytes.Equal(dst, want) {
						e.Fatalf("%s ReduceToAll: wrong result (first difference at byte %d)", what, firstDiff(dst, want))
					}
					// In place: src and dst the same on every rank.
					inplace := slices.Clone(src)
					ev, err = e.tm.ReduceToAllNB(inplace, inplace, dt, sz, cnt, op, fn, cdata, 0)
					e.wait(ev, err, what+" ReduceToAllNB in place")
					if !bytes.Equal(inplace, want) {
						e.Fatalf("%s ReduceToAll in place: wrong result", what)
					}
				}

				// USER with client data: sums modulo m.
				const m = 1000003
				cnt := 100
				want := make([]uint64, cnt)
				var mine []byte
				for r := gex.Rank(0); r < e.size; r++ {
					rng := rngOf(r, 1)
					vals := make([]uint64, cnt)
					for i := range vals {
						vals[i] = rng.Uint64N(m)
						want[i] = (want[i] + vals[i]) % m
					}
					if r == e.rank {
						mine = u64s(vals...)
					}
				}
				reduceBoth("USER addMod", mine, gex.DTU64, 8, cnt, gex.OPUser, addMod, uint64(m), u64s(want...))

				// DT_USER of several element sizes.
				for _, sz := range []int{1, 3, 12, 1000} {
					cnt := 7
					want := make([]byte, sz*cnt)
					for r := gex.Rank(0); r < e.size; r++ {
						b := make([]byte, sz*cnt)
						rng := rngOf(r, sz)
						for i := range b {
							b[i] = byte(rng.Uint32())
						}
						for i := range b {
							want[i] += b[i]
						}
						if r == e.rank {
							mine = b
						}
					}
					reduceBoth(fmt.Sprintf("DT_USER size %d", sz), mine, gex.DTUser, sz, cnt, gex.OPUser, byteAdd, sz, want)
				}

				// USER_NC: products of 2x2 matrices in rank order.
				cnt = 9
				mats := make([][]mat2, n)
				for r := range mats {
					rng := rngOf(gex.Rank(r), 99)
					b := make([]byte, 16*cnt)
					for i := 0; i < cnt; i++ {
						mats[r] = append(mats[r], mat2{rng.Uint32() % 7, rng.Uint32() % 7, rng.Uint32() % 7, rng.Uint32() % 7})
						putMat(b[16*i:], mats[r][i])
					}
					if gex.Rank(r) == e.rank {
						mine = b
					}
				}
				fold := func(order []int) []byte {
					out := make([]byte, 16*cnt)
					for i := 0; i < cnt; i++ {
						p := mat2{1, 0, 0, 1}
						for _, r := range order {
							p = p.mul(mats[r][i])
						}
						putMat(out[16*i:], p)
					}
					return out
				}
				order := make([]int, n)
				for r := range order {
					order[r] = r
				}
				wantNC := fold(order)
				slices.Reverse(order)
				if n > 1 && bytes.Equal(fold(order), wantNC) {
					e.Fatalf("test inputs commute: the USER_NC check could not see the order")
				}
				reduceBoth("USER_NC matrix product", mine, gex.DTUser, 16, cnt, gex.OPUserNC, matMulNC, nil, wantNC)
			})
		})
	}
}

// TestCollManyInFlight: 24 collectives of every kind initiated back to back
// before any is synchronized, over the primordial team and a duplicate of it
// interleaved, then all waited for at once.
func TestCollManyInFlight(t *testing.T) {
	for _, n := range collSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			conformance(t, n, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
				dup, _, err := e.tm.Dup(e.seg.Bytes()[:gex.ScratchSize], 0)
				e.Check(err, "Dup")
				const k = 24
				var evs []gex.Event
				type check struct {
					dst, want []byte
				}
				var checks []check
				for i := 0; i < k; i++ {
					tm := e.tm
					if i%2 == 1 {
						tm = dup
					}
					var ev gex.Event
					switch i % 3 {
					case 0:
						ev, err = tm.BarrierNB(0)
					case 1:
						root := gex.Rank(i % n)
						size := 1 + i*37
						if i == 7 {
							size = 200 << 10
						}
						want := make([]byte, size)
						bcastPattern(want, root, i)
						dst := make([]byte, size)
						ev, err = tm.BroadcastNB(root, dst, want, size, 0)
						checks = append(checks, check{dst, want})
					case 2:
						cnt := i + 1
						src := make([]uint64, cnt)
						sum := make([]uint64, cnt)
						for j := range src {
							src[j] = uint64(int(e.rank)+1) * uint64(i+j)
							sum[j] = uint64(n*(n+1)/2) * uint64(i+j)
						}
						dst := make([]byte, 8*cnt)
						ev, err = tm.ReduceToAllNB(dst, u64s(src...), gex.DTU64, 8, cnt, gex.OPAdd, nil, nil, 0)
						checks = append(checks, check{dst, u64s(sum...)})
					}
					e.Check(err, fmt.Sprintf("collective %d", i))
					evs = append(evs, ev)
				}
				e.Check(gex.EventWaitAll(evs, 0), "EventWaitAll")
				for i, c := range checks {
					if !bytes.Equal(c.dst, c.want) {
						e.Fatalf("collective check %d: wrong result (first difference at byte %d)", i, firstDiff(c.dst, c.want))
					}
				}
				e.collBarrier(dup)
				_, err = dup.Destroy(0)
				e.Check(err, "Destroy")
			})
		})
	}
}

// teamRankCheck verifies a split team's rank order and translations.
func teamRankCheck(e *rankEnv, tm *gex.TM, members []gex.Rank) {
	e.t.Helper()
	if int(tm.QuerySize()) != len(members) {
		e.Fatalf("team size %d, want %d", tm.QuerySize(), len(members))
	}
	if j := members[tm.QueryRank()]; j != e.rank {
		e.Fatalf("team rank %d is job rank %d, want this rank (%d)", tm.QueryRank(), j, e.rank)
	}
	for r, j := range members {
		got, err := tm.TranslateRankToJobrank(gex.Rank(r))
		e.Check(err, "TranslateRankToJobrank")
		if got != j {
			e.Fatalf("TranslateRankToJobrank(%d) = %d, want %d", r, got, j)
		}
		back, err := tm.TranslateJobrankToRank(j)
		e.Check(err, "TranslateJobrankToRank")
		if back != gex.Rank(r) {
			e.Fatalf("TranslateJobrankToRank(%d) = %d, want %d", j, back, r)
		}
		loc, err := tm.TranslateRankToEP(gex.Rank(r), 0)
		e.Check(err, "TranslateRankToEP")
		if loc.Rank != j || loc.EPIndex != 0 {
			e.Fatalf("TranslateRankToEP(%d) = %+v, want job rank %d index 0", r, loc, j)
		}
	}
	for j := gex.Rank(0); j < e.size; j++ {
		if !slices.Contains(members, j) {
			if r, err := tm.TranslateJobrankToRank(j); err != nil || r != gex.RankInvalid {
				e.Fatalf("TranslateJobrankToRank(%d) of a non-member = %d, %v; want RankInvalid", j, r, err)
			}
		}
	}
}

// teamCollCheck runs a broadcast from every root and a ReduceToAll over tm
// and checks them against the members (job ranks in team order).
func teamCollCheck(e *rankEnv, tm *gex.TM, members []gex.Rank, k int) {
	e.t.Helper()
	for root := gex.Rank(0); root < tm.QuerySize(); root++ {
		want := make([]byte, 1000)
		bcastPattern(want, members[root], k)
		dst := make([]byte, 1000)
		ev, err := tm.BroadcastNB(root, dst, want, len(want), 0)
		e.wait(ev, err, "team BroadcastNB")
		if !bytes.Equal(dst, want) {
			e.Fatalf("team broadcast from root %d: wrong bytes", root)
		}
	}
	// The USER_NC fold of the job ranks as decimal digits sees team order.
	dst := make([]byte, 8)
	concat := func(a, b []byte, cnt int, _ any) {
		x, y := binary.LittleEndian.Uint64(a), binary.LittleEndian.Uint64(b)
		p := uint64(1)
		for q := y; q > 0 || p == 1; q /= 10 {
			p *= 10
			if q < 10 {
				break
			}
		}
		binary.LittleEndian.PutUint64(b, x*p+y)
	}
	ev, err := tm.ReduceToAllNB(dst, u64s(uint64(e.rank)+1), gex.DTUser, 8, 1, gex.OPUserNC, concat, nil, 0)
	e.wait(ev, err, "team ReduceToAllNB")
	var want uint64
	for _, j := range members {
		want = want*10 + uint64(j) + 1
	}
	if got := binary.LittleEndian.Uint64(dst); got != want {
		e.Fatalf("team USER_NC fold of job ranks+1 = %d, want %d (team order)", got, want)
	}
}

// TestTeamSplit: odd/even split with keys reversing the order, a split where
// rank 0 takes part without joining, and (4 ranks) the rows and columns of a
// 2x2 grid used concurrently.
func TestTeamSplit(t *testing.T) {
	for _, n := range collSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			conformance(t, n, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
				seg := e.seg.Bytes()
				sz, _, err := func() (uintptr, int, error) {
					_, s, err := e.tm.Split(int(e.rank%2), 0, nil, gex.FlagTMScratchSizeRecommended)
					return s, 0, err
				}()
				e.Check(err, "Split query")
				if sz == 0 {
					e.Fatalf("scratch-size query of a joining caller returned 0")
				}
				// Odd/even, keys reverse the order.
				oe, _, err := e.tm.Split(int(e.rank%2), -int(e.rank), seg[0:sz], 0)
				e.Check(err, "Split odd/even")
				var members []gex.Rank
				for j := e.size - 1; ; j-- {
					if j%2 == e.rank%2 {
						members = append(members, j)
					}
					if j == 0 {
						break
					}
				}
				teamRankCheck(e, oe, members)
				teamCollCheck(e, oe, members, 1)

				// Rank 0 takes part without joining.
				color := 5
				if e.rank == 0 {
					color = gex.ColorNone
				}
				rest, _, err := e.tm.Split(color, 0, seg[sz:2*sz], 0)
				e.Check(err, "Split with ColorNone")
				if e.rank == 0 {
					if rest != nil {
						e.Fatalf("Split with ColorNone returned a team")
					}
				} else {
					var m []gex.Rank
					for j := gex.Rank(1); j < e.size; j++ {
						m = append(m, j)
					}
					teamRankCheck(e, rest, m)
					teamCollCheck(e, rest, m, 2)
				}

				if n == 4 {
					row, _, err := e.tm.Split(int(e.rank/2), 0, seg[2*sz:3*sz], 0)
					e.Check(err, "Split rows")
					col, _, err := e.tm.Split(int(e.rank%2), 0, seg[3*sz:4*sz], 0)
					e.Check(err, "Split columns")
					// Both teams' collectives in flight at once.
					rowSum, colSum := make([]byte, 8), make([]byte, 8)
					rowB, colB := make([]byte, 64), make([]byte, 64)
					var evs []gex.Event
					for i := 0; i < 10; i++ {
						ev1, err1 := row.ReduceToAllNB(rowSum, u64s(uint64(e.rank)+1), gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
						ev2, err2 := col.ReduceToAllNB(colSum, u64s(uint64(e.rank)+1), gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
						e.Check(errors.Join(err1, err2), "grid ReduceToAllNB")
						e.Check(gex.EventWaitAll([]gex.Event{ev1, ev2}, 0), "grid reductions")
						rb := bytes.Repeat([]byte{byte(10 + e.rank/2)}, 64)
						cb := bytes.Repeat([]byte{byte(20 + e.rank%2)}, 64)
						ev3, err3 := row.BroadcastNB(gex.Rank(i%2), rowB, rb, 64, 0)
						ev4, err4 := col.BroadcastNB(gex.Rank((i+1)%2), colB, cb, 64, 0)
						ev5, err5 := row.BarrierNB(0)
						ev6, err6 := col.BarrierNB(0)
						e.Check(errors.Join(err3, err4, err5, err6), "grid collectives")
						evs = append(evs[:0], ev3, ev4, ev5, ev6)
						e.Check(gex.EventWaitAll(evs, 0), "grid collectives")
						r0 := uint64(e.rank/2) * 2
						if got := binary.LittleEndian.Uint64(rowSum); got != (r0+1)+(r0+2) {
							e.Fatalf("row sum %d, want %d", got, (r0+1)+(r0+2))
						}
						c0 := uint64(e.rank % 2)
						if got := binary.LittleEndian.Uint64(colSum); got != (c0+1)+(c0+3) {
							e.Fatalf("column sum %d, want %d", got, (c0+1)+(c0+3))
						}
						if rowB[0] != byte(10+e.rank/2) || colB[63] != byte(20+e.rank%2) {
							e.Fatalf("grid broadcasts: row %d column %d", rowB[0], colB[63])
						}
					}
					for _, tm := range []*gex.TM{row, col} {
						if _, err := tm.Destroy(gex.FlagGloballyQuiesced); err != nil {
							e.Fatalf("Destroy grid team: %v", err)
						}
					}
				}
				e.collBarrier(e.tm)
				sc, err := oe.Destroy(0)
				e.Check(err, "Destroy odd/even")
				if len(sc) != int(sz) || &sc[0] != &seg[0] {
					e.Fatalf("Destroy returned scratch %p+%d, want the granted %p+%d", sc, len(sc), &seg[0], sz)
				}
				if rest != nil {
					_, err = rest.Destroy(0)
					e.Check(err, "Destroy rest")
				}
			})
		})
	}
}

// TestTeamCreate: Create with every scratch option, two disjoint teams from
// one call, a caller naming no team, job-rank addressing, and Dup.
func TestTeamCreate(t *testing.T) {
	for _, n := range collSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			conformance(t, n, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
				seg := e.seg.Bytes()
				base := e.seg.QueryAddr()
				// Reverse order, symmetric scratch by offset.
				var all []gex.EPLocation
				var rev []gex.Rank
				for r := int(e.size) - 1; r >= 0; r-- {
					all = append(all, gex.EPLocation{Rank: gex.Rank(r)})
					rev = append(rev, gex.Rank(r))
				}
				tms, _, err := e.tm.Create(all, []gex.Addr{4096}, 4096, gex.FlagTMSymmetricScratch|gex.FlagScratchSegOffset)
				e.Check(err, "Create symmetric")
				if len(tms) != 1 {
					e.Fatalf("Create returned %d teams, want 1", len(tms))
				}
				teamRankCheck(e, tms[0], rev)
				teamCollCheck(e, tms[0], rev, 3)
				sc, err := tms[0].Destroy(0)
				e.Check(err, "Destroy")
				if &sc[0] != &seg[4096] || len(sc) != 4096 {
					e.Fatalf("Destroy returned the wrong scratch")
				}

				// Two disjoint teams (lower and upper half), job ranks, local
				// scratch by address; with one rank the upper team is empty
				// and that caller names nothing.
				half := (int(e.size) + 1) / 2
				var mine []gex.EPLocation
				var mineRanks []gex.Rank
				lo, hi := 0, half
				if int(e.rank) >= half {
					lo, hi = half, int(e.size)
				}
				for r := lo; r < hi; r++ {
					mine = append(mine, gex.EPLocation{Rank: gex.Rank(r)})
					mineRanks = append(mineRanks, gex.Rank(r))
				}
				tms, _, err = e.tm.Create(mine, []gex.Addr{base + 8192}, 4096, gex.FlagTMLocalScratch|gex.FlagRankIsJobrank)
				e.Check(err, "Create halves")
				teamRankCheck(e, tms[0], mineRanks)
				teamCollCheck(e, tms[0], mineRanks, 4)
				_, err = tms[0].Destroy(0)
				e.Check(err, "Destroy half")

				// Global scratch: one address per member; only rank 0 and the
				// last rank create a team, the others name nothing.
				var pair []gex.EPLocation
				var pairRanks []gex.Rank
				if e.rank == 0 || e.rank == e.size-1 {
					pairRanks = slices.Compact([]gex.Rank{0, e.size - 1})
					for _, r := range pairRanks {
						pair = append(pair, gex.EPLocation{Rank: r})
					}
				}
				addrs := make([]gex.Addr, len(pair))
				for i := range addrs {
					addrs[i] = gex.Addr(12288 + 4096*i)
				}
				tms, _, err = e.tm.Create(pair, addrs, 4096, gex.FlagTMGlobalScratch|gex.FlagScratchSegOffset)
				e.Check(err, "Create global")
				if len(pair) == 0 {
					if len(tms) != 0 {
						e.Fatalf("Create with no args returned %d teams", len(tms))
					}
				} else {
					teamRankCheck(e, tms[0], pairRanks)
					teamCollCheck(e, tms[0], pairRanks, 5)
					_, err = tms[0].Destroy(0)
					e.Check(err, "Destroy global")
				}

				// No scratch: point-to-point works, collectives are refused.
				tms, _, err = e.tm.Create(all, nil, 0, gex.FlagTMNoScratch)
				e.Check(err, "Create no scratch")
				if _, err := tms[0].BarrierNB(0); !errors.Is(err, gex.ErrBadArg) {
					e.Fatalf("BarrierNB on a NO_SCRATCH team: %v, want ErrBadArg", err)
				}
				if sc, err := tms[0].Destroy(0); err != nil || sc != nil {
					e.Fatalf("Destroy of a NO_SCRATCH team = %v, %v; want nil scratch", sc, err)
				}

				// Dup keeps membership and order.
				d, _, err := e.tm.Dup(seg[16384:20480], 0)
				e.Check(err, "Dup")
				var ident []gex.Rank
				for r := gex.Rank(0); r < e.size; r++ {
					ident = append(ident, r)
				}
				teamRankCheck(e, d, ident)
				teamCollCheck(e, d, ident, 6)
				_, err = d.Destroy(0)
				e.Check(err, "Destroy dup")
			})
		})
	}
}

// TestTeamErrors: bad arguments, quiescence checks and TM-pairs.
func TestTeamErrors(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		seg := e.seg.Bytes()
		bad := func(what string, err error) {
			e.t.Helper()
			if !errors.Is(err, gex.ErrBadArg) {
				e.Fatalf("%s: %v, want ErrBadArg", what, err)
			}
		}
		_, _, err := e.tm.Split(-2, 0, seg[:4096], 0)
		bad("Split color -2", err)
		_, _, err = e.tm.Split(0, 0, make([]byte, 4096), 0)
		bad("Split with scratch outside the segment", err)
		_, _, err = e.tm.Split(0, 0, nil, 0)
		bad("Split without scratch", err)
		_, _, err = e.tm.Split(0, 0, nil, gex.FlagTMScratchSizeMin|gex.FlagTMScratchSizeRecommended)
		bad("Split with both query flags", err)
		if _, sz, err := e.tm.Split(gex.ColorNone, 0, nil, gex.FlagTMScratchSizeRecommended); err != nil || sz != 0 {
			e.Fatalf("query for a non-joining caller = %d, %v; want 0", sz, err)
		}
		_, _, err = e.tm.Create([]gex.EPLocation{{Rank: 0}, {Rank: 0}}, nil, 0, gex.FlagTMNoScratch)
		bad("Create with a repeated member", err)
		_, _, err = e.tm.Create([]gex.EPLocation{{Rank: 5}}, nil, 0, gex.FlagTMNoScratch)
		bad("Create with a rank out of range", err)
		_, _, err = e.tm.Create([]gex.EPLocation{{Rank: e.rank, EPIndex: 1}}, nil, 0, gex.FlagTMNoScratch)
		bad("Create naming this process's endpoint 1, which does not exist", err)
		_, _, err = e.tm.Create([]gex.EPLocation{{Rank: 0}, {Rank: 1}}, []gex.Addr{0}, 4096, gex.FlagTMNoScratch|gex.FlagTMLocalScratch)
		bad("Create with two scratch options", err)
		_, err = e.tm.Destroy(0)
		bad("Destroy of the primordial team", err)
		_, err = e.tm.BroadcastNB(2, nil, nil, 0, 0)
		bad("BroadcastNB root out of range", err)
		_, err = e.tm.ReduceToAllNB(make([]byte, 8), make([]byte, 8), gex.DTDBL, 8, 1, gex.OPXor, nil, nil, 0)
		bad("ReduceToAllNB XOR on doubles", err)
		_, err = e.tm.ReduceToAllNB(make([]byte, 8), make([]byte, 8), gex.DTUser, 8, 1, gex.OPAdd, nil, nil, 0)
		bad("ReduceToAllNB DT_USER with ADD", err)
		_, err = e.tm.ReduceToAllNB(make([]byte, 8), make([]byte, 8), gex.DTU64, 8, 1, gex.OPUser, nil, nil, 0)
		bad("ReduceToAllNB USER without a function", err)
		_, err = e.tm.ReduceToAllNB(make([]byte, 8), make([]byte, 8), gex.DTU64, 4, 1, gex.OPAdd, nil, nil, 0)
		bad("ReduceToAllNB dt_sz mismatch", err)
		_, err = e.tm.ReduceToAllNB(make([]byte, 8), make([]byte, 4), gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
		bad("ReduceToAllNB short src", err)
		_, err = e.tm.BarrierNB(gex.FlagImmediate)
		bad("BarrierNB with flags", err)

		// Quiescence: a collective in flight or a live atomic domain.
		tm, _, err := e.tm.Split(0, 0, seg[:4096], 0)
		e.Check(err, "Split")
		var ev gex.Event
		if e.rank == 0 {
			ev, err = tm.BarrierNB(0)
			e.Check(err, "BarrierNB")
			// Rank 1 calls the barrier only after the test's barrier
			// below, so it cannot complete yet.
			_, err = tm.Destroy(0)
			bad("Destroy with a barrier in flight", err)
			e.Barrier()
		} else {
			e.Barrier()
			ev, err = tm.BarrierNB(0)
			e.Check(err, "BarrierNB")
		}
		e.Check(ev.Wait(), "barrier Wait")
		ad, err := gex.ADCreate[uint64](tm, gex.DTU64, gex.OPAdd, 0)
		e.Check(err, "ADCreate")
		_, err = tm.Destroy(0)
		bad("Destroy with a live atomic domain", err)
		e.Check(ad.Destroy(), "AD.Destroy")
		_, err = tm.Destroy(0)
		e.Check(err, "Destroy")
		_, err = tm.BarrierNB(0)
		bad("BarrierNB on a destroyed team", err)
		_, err = tm.Destroy(0)
		bad("Destroy twice", err)

		// TM-pairs: equal for equal arguments, point-to-point only.
		p1, err := gex.TMPair(e.ep, 0)
		e.Check(err, "TMPair")
		p2, _ := gex.TMPair(e.ep, 0)
		if p1 != p2 || p1 == e.tm {
			e.Fatalf("TMPair values: equal arguments must compare equal and differ from teams")
		}
		_, err = gex.TMPair(e.ep, gex.MaxEPs)
		bad("TMPair remote index beyond MaxEPs", err)
		_, err = p1.BarrierNB(0)
		bad("BarrierNB on a TM-pair", err)
		_, _, err = p1.Split(0, 0, seg[:4096], 0)
		bad("Split of a TM-pair", err)
		_, err = gex.ADCreate[uint64](p1, gex.DTU64, gex.OPAdd, 0)
		bad("ADCreate on a TM-pair", err)
		peer := 1 - e.rank
		bs, qev, err := p1.QueryBoundSegmentNB(peer, 0)
		e.wait(qev, err, "QueryBoundSegmentNB on a TM-pair")
		msg := []byte(fmt.Sprintf("from %d", e.rank))
		e.Check(p1.PutBlocking(peer, bs.Owner+100, msg, 0), "PutBlocking on a TM-pair")
		e.Barrier()
		if want := fmt.Sprintf("from %d", peer); string(seg[100:100+len(want)]) != want {
			e.Fatalf("put through a TM-pair: segment holds %q, want %q", seg[100:100+len(want)], want)
		}
		if max, err := p1.MaxRequestMedium(peer, 0, 0); err != nil || max <= 0 {
			e.Fatalf("AMMaxRequestMedium on a TM-pair = %d, %v", max, err)
		}
	})
}

// TestTeamResplitLoop: 1,000 rounds of split, collectives, destroy leave no
// teams, goroutines or memory behind.
func TestTeamResplitLoop(t *testing.T) {
	conformance(t, 4, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		const rounds = 1000
		seg := e.seg.Bytes()
		teams0 := gex.CollTeams(e.c)
		var ms runtime.MemStats
		round := func(i int) {
			tm, _, err := e.tm.Split(int(e.rank)%2, i%3, seg[:4096], 0)
			e.Check(err, "Split")
			dst := make([]byte, 8)
			ev, err := tm.ReduceToAllNB(dst, u64s(uint64(i)), gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
			e.wait(ev, err, "ReduceToAllNB")
			if got := binary.LittleEndian.Uint64(dst); got != uint64(i)*uint64(tm.QuerySize()) {
				e.Fatalf("round %d: sum %d", i, got)
			}
			_, err = tm.Destroy(0)
			e.Check(err, "Destroy")
		}
		for i := 0; i < 50; i++ { // warm the pools
			round(i)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap0, g0 := ms.HeapAlloc, runtime.NumGoroutine()
		for i := 0; i < rounds; i++ {
			round(i)
		}
		e.collBarrier(e.tm)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if got := gex.CollTeams(e.c); got != teams0 {
			e.Fatalf("after %d split/destroy rounds the engine holds %d teams, want %d", rounds, got, teams0)
		}
		if g := runtime.NumGoroutine(); g > g0 {
			e.Fatalf("goroutines grew from %d to %d over %d rounds", g0, g, rounds)
		}
		// On loop the heap is shared by all ranks and the test: a bound of
		// 2 MiB catches a leak of a team (or its buffers) per round.
		if ms.HeapAlloc > heap0+2<<20 {
			e.Fatalf("heap grew from %d to %d bytes over %d rounds", heap0, ms.HeapAlloc, rounds)
		}
	})
}
