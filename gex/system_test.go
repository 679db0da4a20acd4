package gex_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// GASNet-EX "Operations on gex_Client_t", "... gex_Segment_t", "... gex_TM_t",
// "... gex_EP_t", "Neighborhood and Host", "Active Message (AM) limit
// queries", and gasnet_exit.

// gex_Client_Init: "clientName ... must match the pattern: [A-Z][A-Z0-9_]+".
// Supported flags: GEX_FLAG_USES_GASNET1 and GEX_FLAG_DEFER_THREADS.
func TestClientInitArgs(t *testing.T) {
	loopOnly(t)
	for _, name := range []string{"", "A", "lower", "Ab", "aB", "X-Y", "1AB", "_A", "A B", "ÄB", "AB\n"} {
		_, _, _, err := gex.ClientInit(name, 0)
		wantErr(t, fmt.Sprintf("gex.ClientInit(%q)", name), err, gex.ErrBadArg, "clientName")
		lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = lj.ClientInit(0, name, 0)
		wantErr(t, fmt.Sprintf("LoopJob.ClientInit(%q)", name), err, gex.ErrBadArg, "clientName")
	}
	for _, flags := range []gex.Flags{gex.FlagImmediate, gex.FlagAMShort, gex.FlagUsesGASNet1 | gex.FlagLCCopyYes} {
		_, _, _, err := gex.ClientInit("AB", flags)
		wantErr(t, fmt.Sprintf("gex.ClientInit(flags %v)", flags), err, gex.ErrBadArg, "flags")
	}
	for _, tc := range []struct {
		name  string
		flags gex.Flags
	}{{"AB", 0}, {"A1_", gex.FlagUsesGASNet1}, {"Z_9", gex.FlagDeferThreads}, {"GASNET_CLIENT", gex.FlagUsesGASNet1 | gex.FlagDeferThreads}} {
		lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		c, ep, tm, err := lj.ClientInit(0, tc.name, tc.flags)
		if err != nil {
			t.Errorf("ClientInit(%q, %v): %v", tc.name, tc.flags, err)
			continue
		}
		if c.QueryName() != tc.name || c.QueryFlags() != tc.flags {
			t.Errorf("QueryName/QueryFlags = %q/%v, want %q/%v", c.QueryName(), c.QueryFlags(), tc.name, tc.flags)
		}
		if ep == nil || tm == nil || tm.QueryEP() != ep || ep.QueryClient() != c || tm.QueryClient() != c {
			t.Errorf("ClientInit(%q) returned inconsistent objects", tc.name)
		}
		_ = c.Close()
	}
}

// gex_*_QueryCData: nil until set; gex_TM_Query*, gex_EP_Query*,
// gex_Segment_Query*.
func TestObjectQueries(t *testing.T) {
	const segSize = 8 * gex.PageSize
	conformance(t, 3, jobOpts{}, func(e *rankEnv) {
		c, ep, tm := e.c, e.ep, e.tm
		if c.QueryCData() != nil || ep.QueryCData() != nil || tm.QueryCData() != nil {
			e.Fatalf("CData of new objects is not nil")
		}
		type box struct{ n int }
		vc, ve, vt := &box{1}, &box{2}, &box{3}
		c.SetCData(vc)
		ep.SetCData(ve)
		tm.SetCData(vt)
		if c.QueryCData() != vc || ep.QueryCData() != ve || tm.QueryCData() != vt {
			e.Fatalf("CData did not round-trip")
		}
		c.SetCData(nil)
		if c.QueryCData() != nil {
			e.Fatalf("CData set to nil reads back %v", c.QueryCData())
		}
		if c.JobRank() != e.rank || c.JobSize() != 3 || tm.QueryRank() != c.JobRank() || tm.QuerySize() != 3 {
			e.Fatalf("JobRank/JobSize %d/%d, TM rank/size %d/%d", c.JobRank(), c.JobSize(), tm.QueryRank(), tm.QuerySize())
		}
		if tm.QueryEP() != ep || tm.QueryClient() != c || ep.QueryClient() != c || ep.QueryIndex() != 0 || c.QueryName() != "CONFORMANCE" {
			e.Fatalf("TM/EP queries name the wrong objects")
		}
		if ep.QuerySegment() != nil {
			e.Fatalf("EP has a segment before SegmentAttach")
		}
		seg, err := gex.SegmentAttach(tm, segSize)
		e.Check(err, "SegmentAttach")
		if ep.QuerySegment() != seg || seg.QueryClient() != c || seg.QuerySize() != segSize || seg.QueryFlags() != 0 ||
			seg.QueryAddr() == 0 || len(seg.Bytes()) != segSize {
			e.Fatalf("Segment queries: client ok %v, size %d, flags %v, addr %#x, len %d", seg.QueryClient() == c, seg.QuerySize(), seg.QueryFlags(), seg.QueryAddr(), len(seg.Bytes()))
		}
		if seg.QueryCData() != nil {
			e.Fatalf("CData of a new segment is not nil")
		}
		seg.SetCData("seg")
		if seg.QueryCData() != "seg" {
			e.Fatalf("segment CData did not round-trip")
		}
		if max := c.MaxLocalSegmentSize(); max < segSize || c.MaxGlobalSegmentSize() > max {
			e.Fatalf("MaxLocalSegmentSize %d, MaxGlobalSegmentSize %d", max, c.MaxGlobalSegmentSize())
		}
	})
}

// gex_TM_TranslateRankToJobrank "Requires 0 <= rank < gex_TM_QuerySize(tm)";
// gex_TM_TranslateJobrankToRank "Requires 0 <= jobrank <
// gex_System_QueryJobSize()"; gex_TM_TranslateRankToEP: "flags ... must
// currently be zero".
func TestTranslations(t *testing.T) {
	conformance(t, 3, jobOpts{}, func(e *rankEnv) {
		for r := gex.Rank(0); r < e.size; r++ {
			j, err := e.tm.TranslateRankToJobrank(r)
			e.Check(err, "TranslateRankToJobrank")
			back, err := e.tm.TranslateJobrankToRank(j)
			e.Check(err, "TranslateJobrankToRank")
			loc, err := e.tm.TranslateRankToEP(r, 0)
			e.Check(err, "TranslateRankToEP")
			// The primordial team holds every rank in job-rank order.
			if j != r || back != r || loc.Rank != r || loc.EPIndex != 0 {
				e.Fatalf("rank %d: jobrank %d, back %d, EP location %+v", r, j, back, loc)
			}
		}
		for _, bad := range []gex.Rank{e.size, e.size + 1, gex.RankInvalid} {
			j, err := e.tm.TranslateRankToJobrank(bad)
			wantErr(e.t, "TranslateRankToJobrank out of range", err, gex.ErrBadArg, "rank")
			if j != gex.RankInvalid {
				e.Fatalf("TranslateRankToJobrank(%d) = %d with an error, want RankInvalid", bad, j)
			}
			r, err := e.tm.TranslateJobrankToRank(bad)
			wantErr(e.t, "TranslateJobrankToRank out of range", err, gex.ErrBadArg, "jobrank")
			if r != gex.RankInvalid {
				e.Fatalf("TranslateJobrankToRank(%d) = %d with an error, want RankInvalid", bad, r)
			}
			_, err = e.tm.TranslateRankToEP(bad, 0)
			wantErr(e.t, "TranslateRankToEP out of range", err, gex.ErrBadArg, "rank")
		}
		_, err := e.tm.TranslateRankToEP(0, gex.FlagImmediate)
		wantErr(e.t, "TranslateRankToEP with flags", err, gex.ErrBadArg, "flags")
		if e.t.Failed() {
			e.Fatalf("translation checks failed")
		}
	})
}

// gex_Segment_Attach: "size ... must be a non-zero multiple of
// GASNET_PAGESIZE, not larger than gasnet_getMaxLocalSegmentSize()", "up to
// one call per process", and it is collective: a bad call on one rank must
// not leave its peers waiting.
func TestSegmentAttachSizeRules(t *testing.T) {
	loopOnly(t)
	const maxSeg = 1 << 20
	cases := []struct {
		name  string
		sizes []uint64 // per rank
		ok    bool
	}{
		{"all valid", []uint64{gex.PageSize, 2 * gex.PageSize, maxSeg}, true},
		{"zero on one rank", []uint64{gex.PageSize, 0, gex.PageSize}, false},
		{"zero everywhere", []uint64{0, 0, 0}, false},
		{"not a page multiple", []uint64{gex.PageSize, gex.PageSize, gex.PageSize + 1}, false},
		{"half a page", []uint64{gex.PageSize / 2, gex.PageSize, gex.PageSize}, false},
		{"above MaxLocalSegmentSize", []uint64{gex.PageSize, maxSeg + gex.PageSize, gex.PageSize}, false},
		{"far above", []uint64{1 << 40, 1 << 40, 1 << 40}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.sizes)
			lj, err := gex.NewLoopJob(gex.LoopConfig{Size: n, MaxSegSize: "1M"})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var errs []error
			lj.Run(func(rank int) {
				c, ep, tm, err := lj.ClientInit(rank, "SEGTEST", 0)
				if err != nil {
					t.Errorf("rank %d: ClientInit: %v", rank, err)
					return
				}
				defer c.Close()
				if got := c.MaxLocalSegmentSize(); got != maxSeg {
					t.Errorf("rank %d: MaxLocalSegmentSize %d with GASNET_MAX_SEGSIZE 1M, want %d", rank, got, maxSeg)
				}
				seg, err := gex.SegmentAttach(tm, tc.sizes[rank])
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				if err != nil {
					if !errors.Is(err, gex.ErrBadArg) && !errors.Is(err, gex.ErrResource) {
						t.Errorf("rank %d: SegmentAttach(%d): %v wraps neither ErrBadArg nor ErrResource", rank, tc.sizes[rank], err)
					}
					if seg != nil || ep.QuerySegment() != nil {
						t.Errorf("rank %d: failed SegmentAttach left a segment", rank)
					}
					for r := gex.Rank(0); r < gex.Rank(n); r++ {
						if bs, _, err := tm.QueryBoundSegmentNB(r, 0); err != nil || bs.Size != 0 {
							t.Errorf("rank %d: after a failed attach, rank %d's bound segment has size %d (%v)", rank, r, bs.Size, err)
						}
					}
					return
				}
				if seg.QuerySize() != tc.sizes[rank] {
					t.Errorf("rank %d: segment size %d, want %d", rank, seg.QuerySize(), tc.sizes[rank])
				}
				// One call per process: a second attach is refused everywhere.
				if _, err := gex.SegmentAttach(tm, gex.PageSize); !errors.Is(err, gex.ErrBadArg) {
					t.Errorf("rank %d: second SegmentAttach: %v, want ErrBadArg", rank, err)
				}
				if ep.QuerySegment() != seg {
					t.Errorf("rank %d: second attach replaced the segment", rank)
				}
			})
			if len(errs) != n {
				t.Fatalf("%d of %d ranks returned from SegmentAttach", len(errs), n)
			}
			for rank, err := range errs {
				if tc.ok && err != nil {
					t.Errorf("SegmentAttach(%v): a rank got %v", tc.sizes, err)
				}
				if !tc.ok && err == nil {
					t.Errorf("SegmentAttach(%v): result %d succeeded although a rank's size is invalid", tc.sizes, rank)
				}
			}
		})
	}
}

// gex_EP_QueryBoundSegmentNB: owneraddr "is the address which would be
// returned by gex_Segment_QueryAddr()" on the owner, localaddr is the segment
// "in the address space of the calling process, *if* mapped, and NULL
// otherwise", and queries naming the caller's own endpoint "are guaranteed to
// return GEX_EVENT_INVALID".
func TestQueryBoundSegment(t *testing.T) {
	for _, mode := range []struct {
		name      string
		supernode int
	}{{"nbrhd", 0}, {"no-nbrhd", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			const n, segSize = 3, 4 * gex.PageSize
			conformance(t, n, jobOpts{segSize: segSize, supernode: mode.supernode}, func(e *rankEnv) {
				// Learn every rank's QueryAddr through AMs.
				var owners [n]atomic.Uint64
				table := []gex.AMEntry{{Name: "addr", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 2, Fn: func(tk *gex.Token, _ []byte, a []gex.AMArg) {
					info, _ := tk.Info(gex.TISrcRank)
					owners[info.SrcRank].Store(uint64(uint32(a[0])) | uint64(uint32(a[1]))<<32)
				}}}
				e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
				e.Barrier()
				mine := uint64(e.seg.QueryAddr())
				for r := gex.Rank(0); r < e.size; r++ {
					e.Check(e.tm.RequestShort(r, table[0].Index, 0, gex.AMArg(uint32(mine)), gex.AMArg(uint32(mine>>32))), "RequestShort")
				}
				e.Check(e.c.BlockUntil(func() bool {
					for i := range owners {
						if owners[i].Load() == 0 {
							return false
						}
					}
					return true
				}), "BlockUntil")
				nbrhd, _ := e.c.QueryNbrhdInfo()
				inNbrhd := func(r gex.Rank) bool {
					return slices.ContainsFunc(nbrhd, func(ri gex.RankInfo) bool { return ri.JobRank == r })
				}
				for r := gex.Rank(0); r < e.size; r++ {
					for _, flags := range []gex.Flags{0, gex.FlagImmediate} {
						bs, ev, err := e.tm.QueryBoundSegmentNB(r, flags)
						e.Check(err, "QueryBoundSegmentNB")
						if flags != 0 && ev == gex.EventNoOp {
							continue // would need communication: outputs undefined
						}
						e.Check(ev.Wait(), "query event")
						if r == e.rank && ev != gex.EventInvalid {
							e.Fatalf("self query returned an event other than EventInvalid")
						}
						if bs.Size != segSize || uint64(bs.Owner) != owners[r].Load() {
							e.Fatalf("rank %d's bound segment: owner %#x size %d, want %#x and %d", r, bs.Owner, bs.Size, owners[r].Load(), segSize)
						}
						if r == e.rank && (bs.Owner != e.seg.QueryAddr() || bs.Local == nil || &bs.Local[0] != &e.seg.Bytes()[0]) {
							e.Fatalf("self query: Local is not this rank's segment")
						}
						if r != e.rank && (bs.Local != nil) != inNbrhd(r) {
							e.Fatalf("rank %d: Local mapped %v, but in my nbrhd %v", r, bs.Local != nil, inNbrhd(r))
						}
						if bs.Local != nil && uint64(len(bs.Local)) != bs.Size {
							e.Fatalf("rank %d: Local has %d bytes, size %d", r, len(bs.Local), bs.Size)
						}
					}
				}
				// Writes through a neighbour's Local mapping are seen by the owner.
				for r := gex.Rank(0); r < e.size; r++ {
					bs, _, _ := e.tm.QueryBoundSegmentNB(r, 0)
					if bs.Local != nil {
						copy(bs.Local[int(e.rank)*64:], fmt.Sprintf("from %d to %d", e.rank, r))
					}
				}
				e.Barrier()
				mem := e.seg.Bytes()
				for w := gex.Rank(0); w < e.size; w++ {
					want := fmt.Sprintf("from %d to %d", w, e.rank)
					got := string(mem[int(w)*64 : int(w)*64+len(want)])
					if w == e.rank || mode.supernode == 0 {
						if got != want {
							e.Fatalf("segment zone of writer %d holds %q, want %q", w, got, want)
						}
					} else if mem[int(w)*64] != 0 {
						e.Fatalf("segment zone of non-neighbour %d was written", w)
					}
				}
				// Argument checks.
				_, _, err := e.tm.QueryBoundSegmentNB(e.size, 0)
				wantErr(e.t, "QueryBoundSegmentNB(rank size)", err, gex.ErrBadArg, "rank")
				_, _, err = e.tm.QueryBoundSegmentNB(0, gex.FlagAMShort)
				wantErr(e.t, "QueryBoundSegmentNB with a bad flag", err, gex.ErrBadArg, "flags")
				e.Barrier()
			})
		})
	}
}

// "Neighborhood and Host": info entries "sorted by increasing gex_jobrank",
// "(*info_p)[*my_info_index_p].gex_jobrank == gex_System_QueryJobRank()", the
// host "is guaranteed to be a superset of the neighborhood", and the
// QueryMyPosition consistency rules.
func TestNbrhdAndHost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hosts     []string
		supernode int
	}{
		// Hosts are consecutive blocks of equal size, so that the process
		// runner (spmdtest.PretendHosts) builds the same layout.
		{"2 hosts", []string{"a", "a", "b", "b"}, 0},
		{"2 hosts, supernode 1", []string{"a", "a", "b", "b"}, 1},
		{"4 hosts", []string{"a", "b", "c", "d"}, 0},
		{"1 host", nil, 0},
		{"1 host, supernode 2", nil, 2},
		{"1 host, supernode 3", nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 4
			conformance(t, n, jobOpts{hosts: tc.hosts, supernode: tc.supernode, segSize: gex.PageSize}, func(e *rankEnv) {
				nbrhdInfo(e, tc.hosts, tc.supernode)
			})
		})
	}
}

func rankMask(info []gex.RankInfo) uint32 {
	var m uint32
	for _, ri := range info {
		m |= 1 << ri.JobRank
	}
	return m
}

func nbrhdInfo(e *rankEnv, hosts []string, supernode int) {
	const n = 4
	me := e.c.JobRank()
	nb, nbIdx := e.c.QueryNbrhdInfo()
	ho, hoIdx := e.c.QueryHostInfo()
	pos := e.c.QueryMyPosition()
	for _, set := range []struct {
		name string
		info []gex.RankInfo
		idx  gex.Rank
	}{{"nbrhd", nb, nbIdx}, {"host", ho, hoIdx}} {
		if len(set.info) == 0 || int(set.idx) >= len(set.info) || set.info[set.idx].JobRank != me {
			e.Fatalf("%s info %v, my index %d: does not name me (%d)", set.name, set.info, set.idx, me)
		}
		if !slices.IsSortedFunc(set.info, func(a, b gex.RankInfo) int { return int(a.JobRank) - int(b.JobRank) }) {
			e.Fatalf("%s info %v is not sorted by job rank", set.name, set.info)
		}
		for i := 1; i < len(set.info); i++ {
			if set.info[i].JobRank == set.info[i-1].JobRank {
				e.Fatalf("%s info %v repeats a rank", set.name, set.info)
			}
		}
		for _, ri := range set.info {
			if ri.JobRank >= e.size {
				e.Fatalf("%s info %v names a rank out of range", set.name, set.info)
			}
		}
	}
	nbMask, hoMask := rankMask(nb), rankMask(ho)
	if nbMask&^hoMask != 0 {
		e.Fatalf("nbrhd %v is not a subset of host %v", nb, ho)
	}
	// The pretend hosts define the host sets exactly.
	var wantHost uint32
	for r := 0; r < n; r++ {
		if hosts == nil || hosts[r] == hosts[me] {
			wantHost |= 1 << r
		}
	}
	if hoMask != wantHost {
		e.Fatalf("host set %b, want %b", hoMask, wantHost)
	}
	switch {
	case supernode == 0 && nbMask != hoMask:
		e.Fatalf("unlimited supernode: nbrhd %b differs from host %b", nbMask, hoMask)
	case supernode > 0 && len(nb) > supernode:
		e.Fatalf("nbrhd of %d ranks with GASNET_SUPERNODE_MAXSIZE %d", len(nb), supernode)
	}
	if pos.NbrhdSetRank >= pos.NbrhdSetSize || pos.HostSetRank >= pos.HostSetSize || pos.HostSetSize > pos.NbrhdSetSize {
		e.Fatalf("position %+v out of range", pos)
	}

	// Exchange (position, nbrhd mask, host mask) to check consistency.
	var got [n]atomic.Pointer[[6]uint32]
	table := []gex.AMEntry{{Name: "pos", Flags: gex.FlagAMMedium | gex.FlagAMRequest, Fn: func(tk *gex.Token, p []byte, _ []gex.AMArg) {
		info, _ := tk.Info(gex.TISrcRank)
		var v [6]uint32
		for i := range v {
			v[i] = binary.LittleEndian.Uint32(p[4*i:])
		}
		got[info.SrcRank].Store(&v)
	}}}
	e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
	e.Barrier()
	msg := make([]byte, 0, 24)
	for _, v := range []uint32{uint32(pos.NbrhdSetSize), uint32(pos.NbrhdSetRank), uint32(pos.HostSetSize), uint32(pos.HostSetRank), nbMask, hoMask} {
		msg = binary.LittleEndian.AppendUint32(msg, v)
	}
	for r := gex.Rank(0); r < e.size; r++ {
		e.Check(e.tm.RequestMedium(r, table[0].Index, msg, nil, 0), "RequestMedium")
	}
	e.Check(e.c.BlockUntil(func() bool {
		for i := range got {
			if got[i].Load() == nil {
				return false
			}
		}
		return true
	}), "BlockUntil")
	nbrhds, hostsSeen := map[uint32]uint32{}, map[uint32]uint32{} // mask -> set rank
	for r := 0; r < n; r++ {
		v := *got[r].Load()
		mine := uint32(1) << r
		if v[4]&mine == 0 || v[5]&mine == 0 {
			e.Fatalf("rank %d's nbrhd %b / host %b does not contain itself", r, v[4], v[5])
		}
		if v[0] != uint32(pos.NbrhdSetSize) || v[2] != uint32(pos.HostSetSize) {
			e.Fatalf("rank %d reports set sizes %d/%d, I have %d/%d", r, v[0], v[2], pos.NbrhdSetSize, pos.HostSetSize)
		}
		// Membership is symmetric: r's sets agree with mine.
		if (nbMask&mine != 0) != (v[4] == nbMask) || (hoMask&mine != 0) != (v[5] == hoMask) {
			e.Fatalf("rank %d's sets (nbrhd %b, host %b) disagree with mine (%b, %b)", r, v[4], v[5], nbMask, hoMask)
		}
		// Same set <=> same set rank.
		if sr, ok := nbrhds[v[4]]; ok && sr != v[1] {
			e.Fatalf("members of nbrhd %b report set ranks %d and %d", v[4], sr, v[1])
		}
		nbrhds[v[4]] = v[1]
		if sr, ok := hostsSeen[v[5]]; ok && sr != v[3] {
			e.Fatalf("members of host %b report set ranks %d and %d", v[5], sr, v[3])
		}
		hostsSeen[v[5]] = v[3]
	}
	checkSets := func(what string, sets map[uint32]uint32, size gex.Rank) {
		if len(sets) != int(size) {
			e.Fatalf("%d distinct %s sets, but set size %d", len(sets), what, size)
		}
		ranks := map[uint32]bool{}
		var union uint32
		for mask, sr := range sets {
			if ranks[sr] || sr >= uint32(size) {
				e.Fatalf("%s set rank %d repeated or out of range", what, sr)
			}
			ranks[sr] = true
			if union&mask != 0 {
				e.Fatalf("%s sets overlap", what)
			}
			union |= mask
		}
		if union != 1<<n-1 {
			e.Fatalf("%s sets cover %b, not every rank", what, union)
		}
	}
	checkSets("nbrhd", nbrhds, pos.NbrhdSetSize)
	checkSets("host", hostsSeen, pos.HostSetSize)
	// Nbrhd members are exactly the peers whose segments are mapped here.
	for r := gex.Rank(0); r < e.size; r++ {
		bs, _, err := e.tm.QueryBoundSegmentNB(r, 0)
		e.Check(err, "QueryBoundSegmentNB")
		if (bs.Local != nil) != (nbMask&(1<<r) != 0) {
			e.Fatalf("rank %d: segment mapped %v, in nbrhd %v", r, bs.Local != nil, nbMask&(1<<r) != 0)
		}
	}
}

// "Active Message (AM) limit queries": symmetric between the two endpoints,
// RankInvalid gives the min over the team, LUB <= every Max, all >= 512,
// monotonically non-increasing in numargs, stable.
func TestAMLimits(t *testing.T) {
	for _, mode := range []struct {
		name      string
		supernode int
	}{{"nbrhd", 0}, {"no-nbrhd", 1}, {"pairs", 2}} {
		t.Run(mode.name, func(t *testing.T) {
			const n = 3
			conformance(t, n, jobOpts{supernode: mode.supernode}, func(e *rankEnv) {
				amLimits(e, n)
			})
		})
	}
}

var limitFlags = []gex.Flags{0, gex.FlagImmediate, gex.FlagAMPrepareLeastAlloc, gex.FlagAMPrepareLeastClient}

// limitVector lists every Max query against peer: 4 functions x flags x
// nargs {0, 16}.
func limitVector(e *rankEnv, peer gex.Rank) []int64 {
	var v []int64
	for _, f := range []func(gex.Rank, gex.Flags, int) (int, error){e.tm.MaxRequestMedium, e.tm.MaxReplyMedium, e.tm.MaxRequestLong, e.tm.MaxReplyLong} {
		for _, fl := range limitFlags {
			for _, na := range []int{0, gex.MaxArgs} {
				x, err := f(peer, fl, na)
				e.Check(err, "Max query")
				v = append(v, int64(x))
			}
		}
	}
	return v
}

func amLimits(e *rankEnv, n int) {
	c, tm := e.c, e.tm
	lubs := []int{c.AMLUBRequestMedium(), c.AMLUBReplyMedium(), c.AMLUBRequestLong(), c.AMLUBReplyLong()}
	maxFns := []func(gex.Rank, gex.Flags, int) (int, error){tm.MaxRequestMedium, tm.MaxReplyMedium, tm.MaxRequestLong, tm.MaxReplyLong}
	for i, f := range maxFns {
		if lubs[i] < 512 {
			e.Fatalf("LUB %d is %d, below 512", i, lubs[i])
		}
		for _, fl := range []gex.Flags{0, gex.FlagImmediate} {
			prev := -1
			for na := 0; na <= gex.MaxArgs; na++ {
				minv := -1
				for r := gex.Rank(0); r < e.size; r++ {
					v, err := f(r, fl, na)
					e.Check(err, "Max query")
					if v < 512 || v < lubs[i] {
						e.Fatalf("Max query %d to %d (flags %v, nargs %d) = %d: below 512 or LUB %d", i, r, fl, na, v, lubs[i])
					}
					if again, _ := f(r, fl, na); again != v {
						e.Fatalf("Max query %d is not stable: %d then %d", i, v, again)
					}
					if minv < 0 || v < minv {
						minv = v
					}
				}
				all, err := f(gex.RankInvalid, fl, na)
				e.Check(err, "Max query (RankInvalid)")
				if all != minv {
					e.Fatalf("Max query %d with RankInvalid = %d, want the min over the team %d", i, all, minv)
				}
				if prev >= 0 && all > prev {
					e.Fatalf("Max query %d grows with numargs: %d at %d args, %d at %d", i, prev, na-1, all, na)
				}
				prev = all
			}
		}
		_, err := f(0, 0, gex.MaxArgs+1)
		wantErr(e.t, "Max query with 17 args", err, gex.ErrBadArg, "numargs")
		_, err = f(e.size, 0, 0)
		wantErr(e.t, "Max query to rank size", err, gex.ErrBadArg, "rank")
	}
	if e.t.Failed() {
		e.Fatalf("limit argument checks failed")
	}

	// Symmetry: send each peer my view of the pair; it compares with its own.
	var mismatch atomic.Pointer[string]
	var got atomic.Int32
	var tokMax atomic.Pointer[string]
	table := []gex.AMEntry{{Name: "limits", Flags: gex.FlagAMMedium | gex.FlagAMRequest, Fn: func(tk *gex.Token, p []byte, _ []gex.AMArg) {
		info, _ := tk.Info(gex.TISrcRank)
		theirs := make([]int64, len(p)/8)
		for i := range theirs {
			theirs[i] = int64(binary.LittleEndian.Uint64(p[8*i:]))
		}
		// Max queries are permitted in handlers.
		mine := limitVector(e, info.SrcRank)
		if !slices.Equal(theirs, mine) {
			s := fmt.Sprintf("rank %d sees limits %v to me, I see %v to it", info.SrcRank, theirs, mine)
			mismatch.CompareAndSwap(nil, &s)
		}
		// Token.MaxReply*: the limits of Replies through this token, i.e.
		// between me and the sender.
		for _, fl := range limitFlags {
			for _, na := range []int{0, gex.MaxArgs} {
				tm1, err1 := tk.MaxReplyMedium(fl, na)
				tl1, err2 := tk.MaxReplyLong(fl, na)
				tm2, _ := e.tm.MaxReplyMedium(info.SrcRank, fl, na)
				tl2, _ := e.tm.MaxReplyLong(info.SrcRank, fl, na)
				if err1 != nil || err2 != nil || tm1 != tm2 || tl1 != tl2 {
					s := fmt.Sprintf("Token.MaxReplyMedium/Long(%v, %d) = %d/%d (%v, %v), TM queries say %d/%d", fl, na, tm1, tl1, err1, err2, tm2, tl2)
					tokMax.CompareAndSwap(nil, &s)
				}
			}
		}
		got.Add(1)
	}}}
	e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
	e.Barrier()
	for r := gex.Rank(0); r < e.size; r++ {
		var msg []byte
		for _, v := range limitVector(e, r) {
			msg = binary.LittleEndian.AppendUint64(msg, uint64(v))
		}
		e.Check(tm.RequestMedium(r, table[0].Index, msg, nil, 0), "RequestMedium")
	}
	e.Check(c.BlockUntil(func() bool { return got.Load() == int32(n) }), "BlockUntil")
	if p := mismatch.Load(); p != nil {
		e.Fatalf("limits are not symmetric: %s", *p)
	}
	if p := tokMax.Load(); p != nil {
		e.Fatalf("%s", *p)
	}
}

// gasnet_set_waitmode: AM traffic makes progress in every wait mode.
func TestWaitModes(t *testing.T) {
	for _, mode := range []gex.WaitMode{gex.WaitSpin, gex.WaitBlock, gex.WaitSpinBlock} {
		t.Run(mode.String(), func(t *testing.T) {
			conformance(t, 2, jobOpts{waitMode: mode}, func(e *rankEnv) {
				if e.c.WaitMode() != mode {
					e.Fatalf("WaitMode %v, want %v", e.c.WaitMode(), mode)
				}
				pingPong(e, 200)
				wantErr(e.t, "SetWaitMode(42)", e.c.SetWaitMode(42), gex.ErrBadArg, "mode")
				if e.c.WaitMode() != mode {
					e.Fatalf("a refused SetWaitMode changed the mode to %v", e.c.WaitMode())
				}
				// Switch mode mid-job; traffic still flows.
				next := gex.WaitBlock
				if mode == gex.WaitBlock {
					next = gex.WaitSpin
				}
				e.Check(e.c.SetWaitMode(next), "SetWaitMode")
				if e.c.WaitMode() != next {
					e.Fatalf("WaitMode %v after SetWaitMode(%v)", e.c.WaitMode(), next)
				}
				e.Barrier()
				pingPong(e, 50)
			})
		})
	}
}

// pingPong bounces rounds Request/Reply pairs from rank 0 to rank 1.
func pingPong(e *rankEnv, rounds int) {
	var pongs, pings atomic.Int32
	table := []gex.AMEntry{
		{Name: "pong", Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 1},
		{Name: "ping", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1},
	}
	table[0].Fn = func(_ *gex.Token, _ []byte, a []gex.AMArg) {
		if a[0] == pongs.Load() {
			pongs.Add(1)
		}
	}
	table[1].Fn = func(tk *gex.Token, _ []byte, a []gex.AMArg) {
		pings.Add(1)
		_ = tk.ReplyShort(table[0].Index, 0, a[0])
	}
	e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
	e.Barrier()
	if e.rank == 0 {
		for i := 0; i < rounds; i++ {
			e.Check(e.tm.RequestShort(1, table[1].Index, 0, gex.AMArg(i)), "ping")
			e.Check(e.c.BlockUntil(func() bool { return pongs.Load() > int32(i) }), "BlockUntil(pong)")
		}
		if pongs.Load() != int32(rounds) {
			e.Fatalf("%d pongs for %d pings", pongs.Load(), rounds)
		}
	}
	e.Barrier()
	if e.rank == 1 && pings.Load() != int32(rounds) {
		e.Fatalf("rank 1 handled %d pings, want %d", pings.Load(), rounds)
	}
}

// gasnet_exit: any rank, from anywhere (handlers included), ends every rank
// with the code.
func TestExitLoopJob(t *testing.T) {
	loopOnly(t)
	for _, inHandler := range []bool{false, true} {
		t.Run(fmt.Sprintf("inHandler=%v", inHandler), func(t *testing.T) {
			lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 3})
			if err != nil {
				t.Fatal(err)
			}
			var returned atomic.Int32
			code := 7
			if inHandler {
				code = 9
			}
			lj.Run(func(rank int) {
				c, ep, tm, err := lj.ClientInit(rank, "EXITTEST", 0)
				if err != nil {
					t.Errorf("rank %d: ClientInit: %v", rank, err)
					return
				}
				table := []gex.AMEntry{{Name: "exit", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) {
					c.Exit(int(a[0]))
				}}}
				if err := ep.RegisterHandlers(table); err != nil {
					t.Errorf("rank %d: %v", rank, err)
				}
				if rank == 1 {
					if inHandler {
						// The handler runs inside the BlockUntil below.
						_ = tm.RequestShort(1, table[0].Index, 0, gex.AMArg(code))
					} else {
						c.Exit(code)
					}
				}
				// Everyone else waits for something that never happens.
				_ = c.BlockUntil(func() bool { return false })
				returned.Add(1)
			})
			got, exited := lj.ExitCode()
			if !exited || got != code {
				t.Fatalf("ExitCode() = %d, %v; want %d, true", got, exited, code)
			}
			if returned.Load() != 0 {
				t.Fatalf("%d ranks returned past Exit", returned.Load())
			}
		})
	}
}
