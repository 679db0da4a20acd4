package gex_test

import (
	"fmt"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Allocation budgets of VIS on the shared-memory path (STYLE.md: "Budgets
// are tests"): strided, vector and indexed puts and gets, NBI and Blocking,
// to self and to a mapped neighbourhood peer, do not allocate (validation,
// the overlap checks and the copy loops included). Loop conduit only
// (testing.AllocsPerRun counts the whole process).

// runVISAllocs measures 1 KiB at 50% density in 8-byte chunks between a
// local buffer and rank r's segment at base (which has room for 2 KiB).
func runVISAllocs(rep allocReporter, c *gex.Client, tm *gex.TM, r gex.Rank, base gex.Addr) {
	const chunk, n = 8, 128
	local, vecR, vecL, addrs := visLists(base, chunk, n)
	str, count := []int{2 * chunk}, []int{n}
	str2, count2 := []int{2 * chunk, 16 * chunk}, []int{8, n / 8} // two levels
	assertNoAllocs(rep, fmt.Sprintf("to rank %d", r), 100, func(check func(error)) []allocCase {
		nbi := func(ec gex.EC, err error) {
			check(err)
			check(c.NBIWait(ec, 0))
		}
		return []allocCase{
			{"StridedPutBlocking", func() { check(tm.StridedPutBlocking(r, base, str, local, 0, str, chunk, count, 0)) }},
			{"StridedGetBlocking", func() { check(tm.StridedGetBlocking(local, 0, str, r, base, str, chunk, count, 0)) }},
			{"StridedPutNBI", func() { nbi(gex.ECPut, tm.StridedPutNBI(r, base, str, local, 0, str, chunk, count, 0)) }},
			{"StridedGetNBI", func() { nbi(gex.ECGet, tm.StridedGetNBI(local, 0, str, r, base, str, chunk, count, 0)) }},
			{"StridedPutBlocking(2 levels)", func() { check(tm.StridedPutBlocking(r, base, str2, local, 0, str2, chunk, count2, 0)) }},
			{"StridedGetNBI(2 levels)", func() { nbi(gex.ECGet, tm.StridedGetNBI(local, 0, str2, r, base, str2, chunk, count2, 0)) }},
			{"VectorPutBlocking", func() { check(tm.VectorPutBlocking(r, vecR, vecL, 0)) }},
			{"VectorGetBlocking", func() { check(tm.VectorGetBlocking(vecL, r, vecR, 0)) }},
			{"VectorPutNBI", func() { nbi(gex.ECPut, tm.VectorPutNBI(r, vecR, vecL, 0)) }},
			{"VectorGetNBI", func() { nbi(gex.ECGet, tm.VectorGetNBI(vecL, r, vecR, 0)) }},
			{"IndexedPutBlocking", func() { check(tm.IndexedPutBlocking(r, addrs, chunk, vecL, chunk, 0)) }},
			{"IndexedGetBlocking", func() { check(tm.IndexedGetBlocking(vecL, chunk, r, addrs, chunk, 0)) }},
			{"IndexedPutNBI", func() { nbi(gex.ECPut, tm.IndexedPutNBI(r, addrs, chunk, vecL, chunk, 0)) }},
			{"IndexedGetNBI", func() { nbi(gex.ECGet, tm.IndexedGetNBI(vecL, chunk, r, addrs, chunk, 0)) }},
		}
	})
}

func TestVISNoAllocsSelf(t *testing.T) { allocsOnSelf(t, runVISAllocs) }

func TestVISNoAllocsPeer(t *testing.T) { allocsOnPeer(t, runVISAllocs) }
