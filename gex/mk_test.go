package gex_test

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Memory Kinds conformance: endpoints beyond the primordial one, each with
// its own segment and handlers, addressed through TM-pairs and teams.

const (
	mkEPs     = 4       // endpoints per process, the primordial one included
	mkSegSize = 1 << 16 // every endpoint's segment
	mkAMIdx   = 200     // the same index on every endpoint, a different handler
	mkRepIdx  = 201
	mkLongIdx = 202
	// Areas of every endpoint's segment.
	mkPutArea  = 0     // 8 bytes per (source rank, source endpoint)
	mkLongArea = 4096  // 8 bytes per (source rank, source endpoint)
	mkVISArea  = 8192  // 8 bytes per (source rank, source endpoint): two 4-byte pieces
	mkADArea   = 12288 // one uint64 counter
	mkMemArea  = 16384 // 8 bytes per (source rank, source endpoint), memset
)

// mkVal is what endpoint (s, a) writes into endpoint (r, b)'s segment.
func mkVal(s, a, r, b int) uint64 {
	return 0x5a00000000000000 | uint64(s)<<32 | uint64(a)<<24 | uint64(r)<<8 | uint64(b)
}

// mkState is one process's endpoints and what their handlers saw.
type mkState struct {
	eps   [mkEPs]*gex.EP
	segs  [mkEPs][]byte
	owner [mkEPs]gex.Addr
	shorts, shortSum,
	replies, longs [mkEPs]atomic.Int64
	wrongEP atomic.Int64
}

// mkSetup creates endpoints 1..3 with their segments (library-allocated for
// 1 and 2, client-provided for 3) and handlers, and publishes them.
func mkSetup(e *rankEnv) *mkState {
	st := &mkState{}
	st.eps[0] = e.ep
	st.segs[0], st.owner[0] = e.seg.Bytes(), e.seg.QueryAddr()
	for k := 1; k < mkEPs; k++ {
		ep, err := e.c.EPCreate(gex.EPCapabilityAll, 0)
		e.Check(err, "EPCreate")
		if ep.QueryIndex() != gex.EPIndex(k) {
			e.Fatalf("EPCreate gave index %d, want %d (monotonic from 1)", ep.QueryIndex(), k)
		}
		var seg *gex.Segment
		if k == 3 {
			seg, err = gex.SegmentCreate(e.c, make([]byte, mkSegSize), 0, gex.MKHost, 0)
		} else {
			seg, err = gex.SegmentCreate(e.c, nil, mkSegSize, gex.MKHost, 0)
		}
		e.Check(err, "SegmentCreate")
		e.Check(ep.BindSegment(seg, 0), "BindSegment")
		st.eps[k], st.segs[k], st.owner[k] = ep, seg.Bytes(), seg.QueryAddr()
	}
	for k := 0; k < mkEPs; k++ {
		k := k
		e.Check(st.eps[k].RegisterHandlers([]gex.AMEntry{
			{Index: mkAMIdx, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 2, Name: "mk-short", Fn: func(t *gex.Token, _ []byte, a []gex.AMArg) {
				if info, _ := t.Info(gex.TIEP); info.EP != st.eps[k] {
					st.wrongEP.Add(1)
				}
				st.shorts[k].Add(1)
				st.shortSum[k].Add(int64(a[0])*mkEPs + int64(a[1]) + 1)
				if err := t.ReplyShort(mkRepIdx, 0, int32(k)); err != nil {
					st.wrongEP.Add(1000)
				}
			}},
			{Index: mkRepIdx, Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 1, Name: "mk-reply", Fn: func(t *gex.Token, _ []byte, a []gex.AMArg) {
				if info, _ := t.Info(gex.TIEP); info.EP != st.eps[k] {
					st.wrongEP.Add(1)
				}
				st.replies[k].Add(1)
			}},
			{Index: mkLongIdx, Flags: gex.FlagAMLong | gex.FlagAMRequest, NArgs: 2, Name: "mk-long", Fn: func(t *gex.Token, p []byte, a []gex.AMArg) {
				want := mkVal(int(a[0]), int(a[1]), int(e.rank), k)
				if len(p) != 8 || binary.LittleEndian.Uint64(p) != want {
					st.wrongEP.Add(1)
				}
				st.longs[k].Add(1)
			}},
		}), "RegisterHandlers")
	}
	e.Check(gex.PublishBoundSegment(e.tm, st.eps[1:], 0), "PublishBoundSegment")
	if err := gex.PublishBoundSegment(e.tm, st.eps[1:2], 0); !errors.Is(err, gex.ErrBadArg) {
		e.Fatalf("publishing endpoint 1 twice: %v, want ErrBadArg", err)
	}
	return st
}

// mkMultiEP: RMA, atomics, VIS and AMs between every pair of endpoints,
// checked against the model mkVal.
func mkMultiEP(e *rankEnv) {
	st := mkSetup(e)
	n := int(e.size)
	me := int(e.rank)
	slot := func(s, a int) gex.Addr { return gex.Addr((s*mkEPs + a) * 8) }
	// Every local endpoint a reaches every endpoint b of every rank r.
	pairs := [mkEPs][mkEPs]*gex.TM{}
	for a := 0; a < mkEPs; a++ {
		for b := 0; b < mkEPs; b++ {
			p, err := gex.TMPair(st.eps[a], gex.EPIndex(b))
			e.Check(err, "TMPair")
			pairs[a][b] = p
		}
	}
	for a := 0; a < mkEPs; a++ {
		for r := 0; r < n; r++ {
			for b := 0; b < mkEPs; b++ {
				p := pairs[a][b]
				bs, _, err := p.QueryBoundSegmentNB(gex.Rank(r), 0)
				e.Check(err, "QueryBoundSegmentNB")
				if bs.Size != mkSegSize {
					e.Fatalf("QueryBoundSegmentNB(rank %d, ep %d): size %d, want %d", r, b, bs.Size, mkSegSize)
				}
				v := mkVal(me, a, r, b)
				var buf [8]byte
				binary.LittleEndian.PutUint64(buf[:], v)
				e.Check(p.PutBlocking(gex.Rank(r), bs.Owner+mkPutArea+slot(me, a), buf[:], 0), "PutBlocking")
				e.Check(p.RequestLong(gex.Rank(r), mkLongIdx, buf[:], bs.Owner+mkLongArea+slot(me, a), nil, 0, int32(me), int32(a)), "RequestLong")
				vis := []gex.Memvec{{Addr: bs.Owner + mkVISArea + slot(me, a), Len: 4}, {Addr: bs.Owner + mkVISArea + slot(me, a) + 4, Len: 4}}
				e.Check(p.VectorPutBlocking(gex.Rank(r), vis, [][]byte{buf[:4], buf[4:]}, 0), "VectorPutBlocking")
				e.Check(p.RequestShort(gex.Rank(r), mkAMIdx, 0, int32(me), int32(a)), "RequestShort")
				e.Check(p.MemsetBlocking(gex.Rank(r), bs.Owner+mkMemArea+slot(me, a), byte(me*mkEPs+a+1), 8, 0), "MemsetBlocking")
			}
		}
	}
	// Atomics need a team: every endpoint of every process, member
	// r*mkEPs+b; this process holds mkEPs members.
	var locs []gex.EPLocation
	for r := 0; r < n; r++ {
		for b := 0; b < mkEPs; b++ {
			locs = append(locs, gex.EPLocation{Rank: gex.Rank(r), EPIndex: gex.EPIndex(b)})
		}
	}
	tms, _, err := e.tm.Create(locs, nil, 0, gex.FlagTMNoScratch)
	e.Check(err, "Create over every endpoint")
	var ads []*gex.AD[uint64]
	if len(tms) != mkEPs {
		e.Fatalf("Create gave %d local members, want %d", len(tms), mkEPs)
	}
	for a, tm := range tms {
		if tm.QueryEP() != st.eps[a] || tm.QueryRank() != gex.Rank(me*mkEPs+a) || tm.QuerySize() != gex.Rank(n*mkEPs) {
			e.Fatalf("member %d: ep %d rank %d size %d", a, tm.QueryEP().QueryIndex(), tm.QueryRank(), tm.QuerySize())
		}
		loc, err := tm.TranslateRankToEP(gex.Rank(n*mkEPs-1), 0)
		if err != nil || loc != (gex.EPLocation{Rank: gex.Rank(n - 1), EPIndex: mkEPs - 1}) {
			e.Fatalf("TranslateRankToEP(last) = %+v, %v", loc, err)
		}
		ad, err := gex.ADCreate[uint64](tm, gex.DTU64, gex.OPFAdd|gex.OPGet, 0)
		e.Check(err, "ADCreate")
		for m := 0; m < n*mkEPs; m++ {
			bs, _, err := tm.QueryBoundSegmentNB(gex.Rank(m), 0)
			e.Check(err, "QueryBoundSegmentNB(team)")
			var old uint64
			ev, err := ad.OpNB(&old, gex.Rank(m), bs.Owner+mkADArea, gex.OPFAdd, 1, 0, 0)
			e.Check(err, "FADD")
			e.Check(ev.Wait(), "FADD wait")
		}
		ads = append(ads, ad)
	}
	e.Barrier()
	// Every AM was answered before the barrier completes? Wait for them.
	want := int64(n * mkEPs)
	e.Check(e.c.BlockUntil(func() bool {
		for k := 0; k < mkEPs; k++ {
			if st.shorts[k].Load() < want || st.replies[k].Load() < want || st.longs[k].Load() < want {
				return false
			}
		}
		return true
	}), "BlockUntil AMs")
	e.Barrier()
	var wantSum int64
	for s := 0; s < n; s++ {
		for a := 0; a < mkEPs; a++ {
			wantSum += int64(s*mkEPs + a + 1)
		}
	}
	for b := 0; b < mkEPs; b++ {
		seg := st.segs[b]
		for s := 0; s < n; s++ {
			for a := 0; a < mkEPs; a++ {
				w := mkVal(s, a, me, b)
				o := int(slot(s, a))
				if g := binary.LittleEndian.Uint64(seg[mkPutArea+o:]); g != w {
					e.Fatalf("endpoint %d: put from (%d,%d) = %#x, want %#x", b, s, a, g, w)
				}
				if g := binary.LittleEndian.Uint64(seg[mkLongArea+o:]); g != w {
					e.Fatalf("endpoint %d: Long from (%d,%d) = %#x, want %#x", b, s, a, g, w)
				}
				if g := binary.LittleEndian.Uint64(seg[mkVISArea+o:]); g != w {
					e.Fatalf("endpoint %d: VIS put from (%d,%d) = %#x, want %#x", b, s, a, g, w)
				}
				for _, g := range seg[mkMemArea+o : mkMemArea+o+8] {
					if g != byte(s*mkEPs+a+1) {
						e.Fatalf("endpoint %d: memset from (%d,%d) left %d, want %d", b, s, a, g, s*mkEPs+a+1)
					}
				}
			}
		}
		if g := binary.LittleEndian.Uint64(seg[mkADArea:]); g != uint64(n*mkEPs) {
			e.Fatalf("endpoint %d: FADD counter %d, want %d", b, g, n*mkEPs)
		}
		if st.shorts[b].Load() != want || st.shortSum[b].Load() != wantSum || st.replies[b].Load() != want || st.longs[b].Load() != want {
			e.Fatalf("endpoint %d: %d shorts (sum %d), %d replies, %d longs; want %d (sum %d)", b,
				st.shorts[b].Load(), st.shortSum[b].Load(), st.replies[b].Load(), st.longs[b].Load(), want, wantSum)
		}
	}
	if st.wrongEP.Load() != 0 {
		e.Fatalf("%d handler invocations saw the wrong endpoint or payload", st.wrongEP.Load())
	}
	// Gets read every endpoint's segment back.
	for a := 0; a < mkEPs; a++ {
		for r := 0; r < n; r++ {
			for b := 0; b < mkEPs; b++ {
				p := pairs[a][b]
				bs, _, _ := p.QueryBoundSegmentNB(gex.Rank(r), 0)
				var buf [8]byte
				s := (me + 1) % n
				e.Check(p.GetBlocking(buf[:], gex.Rank(r), bs.Owner+mkPutArea+slot(s, a), 0), "GetBlocking")
				if g := binary.LittleEndian.Uint64(buf[:]); g != mkVal(s, a, r, b) {
					e.Fatalf("get from (%d,%d) slot (%d,%d) = %#x, want %#x", r, b, s, a, g, mkVal(s, a, r, b))
				}
			}
		}
	}
	e.Barrier()
	for _, ad := range ads {
		e.Check(ad.Destroy(), "AD Destroy")
	}
	for _, tm := range tms {
		_, err := tm.Destroy(0)
		e.Check(err, "Destroy team")
	}
}

func TestMKMultiEP(t *testing.T) {
	conformance(t, 4, jobOpts{segSize: mkSegSize}, mkMultiEP)
}

// TestMKMultiEPAMPath: no segment is mapped across processes, so every
// operation between processes takes the AM path.
func TestMKMultiEPAMPath(t *testing.T) {
	conformance(t, 4, jobOpts{segSize: mkSegSize, supernode: 1}, mkMultiEP)
}

func TestMKMultiEPTCP(t *testing.T) { runTCP(t, 4, 2, jobOpts{segSize: mkSegSize}, mkMultiEP) }

func TestMKNetns(t *testing.T) {
	if os.Getenv(envConduit) == "loop" {
		t.Skipf("%s=loop: the tcp conduit runs between processes", envConduit)
	}
	adjust := inNetns(t, 2)
	o := jobOpts{segSize: mkSegSize, env: []string{"GEX_CONDUIT=tcp"}, launch: adjust}
	t.Run("multi-ep", func(t *testing.T) { runSMP(t, 4, o, mkMultiEP) })
	t.Run("team8", func(t *testing.T) { runSMP(t, 4, o, mkTeam8) })
}

// mkTeam8: a team of 8 members over 4 processes x 2 non-primordial
// endpoints runs every collective; both members of a process call each one.
func mkTeam8(e *rankEnv) {
	n, me := int(e.size), int(e.rank)
	var eps [2]*gex.EP
	for k := range eps {
		ep, err := e.c.EPCreate(gex.EPCapabilityColl|gex.EPCapabilityAM, 0)
		e.Check(err, "EPCreate")
		eps[k] = ep
	}
	var locs []gex.EPLocation
	for r := 0; r < n; r++ {
		for k := 1; k <= 2; k++ {
			locs = append(locs, gex.EPLocation{Rank: gex.Rank(r), EPIndex: gex.EPIndex(k)})
		}
	}
	seq, _, err := e.tm.Create(locs, nil, 0, gex.FlagTMNoScratch)
	e.Check(err, "Create (no scratch)")
	if _, err := seq[0].BarrierNB(0); !errors.Is(err, gex.ErrBadArg) {
		e.Fatalf("BarrierNB over a Create NO_SCRATCH team: %v, want ErrBadArg (gex_TM_Create prohibits it)", err)
	}
	for _, tm := range seq {
		_, err := tm.Destroy(0)
		e.Check(err, "Destroy")
	}
	// Scratch in each endpoint's own segment (GEX_FLAG_TM_LOCAL_SCRATCH).
	var scratch []gex.Addr
	for _, ep := range eps {
		seg, err := gex.SegmentCreate(e.c, nil, mkSegSize, gex.MKHost, 0)
		e.Check(err, "SegmentCreate")
		e.Check(ep.BindSegment(seg, 0), "BindSegment")
		scratch = append(scratch, seg.QueryAddr())
	}
	tms, _, err := e.tm.Create(locs, scratch, gex.ScratchSize, gex.FlagTMLocalScratch)
	e.Check(err, "Create")
	if len(tms) != 2 {
		e.Fatalf("Create gave %d local members, want 2", len(tms))
	}
	size := gex.Rank(2 * n)
	for k, tm := range tms {
		if tm.QueryRank() != gex.Rank(2*me+k) || tm.QuerySize() != size {
			e.Fatalf("member %d: rank %d of %d", k, tm.QueryRank(), tm.QuerySize())
		}
	}
	wait := func(what string, evs ...gex.Event) {
		for _, ev := range evs {
			e.Check(ev.Wait(), what)
		}
	}
	for round := 0; round < 3; round++ {
		var evs []gex.Event
		for _, tm := range tms {
			ev, err := tm.BarrierNB(0)
			e.Check(err, "BarrierNB")
			evs = append(evs, ev)
		}
		wait("barrier", evs...)
		// Broadcast from every root in turn.
		for root := gex.Rank(0); root < size; root++ {
			var bufs [2][]byte
			evs = evs[:0]
			for k, tm := range tms {
				bufs[k] = make([]byte, 100)
				src := make([]byte, 100)
				for i := range src {
					src[i] = byte(int(root)*7 + i + round)
				}
				ev, err := tm.BroadcastNB(root, bufs[k], src, 100, 0)
				e.Check(err, "BroadcastNB")
				evs = append(evs, ev)
			}
			wait("broadcast", evs...)
			for k := range bufs {
				for i, b := range bufs[k] {
					if b != byte(int(root)*7+i+round) {
						e.Fatalf("broadcast from %d: member %d byte %d = %d", root, 2*me+k, i, b)
					}
				}
			}
		}
		// Reductions: the sum of the members' ranks.
		var outs [2][8]byte
		var ones [2][8]byte
		evs = evs[:0]
		for k, tm := range tms {
			var src [8]byte
			binary.LittleEndian.PutUint64(src[:], uint64(tm.QueryRank())+1)
			ev, err := tm.ReduceToAllNB(outs[k][:], src[:], gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
			e.Check(err, "ReduceToAllNB")
			evs = append(evs, ev)
			ev, err = tm.ReduceToOneNB(1, ones[k][:], src[:], gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
			e.Check(err, "ReduceToOneNB")
			evs = append(evs, ev)
		}
		wait("reduce", evs...)
		want := uint64(size) * uint64(size+1) / 2
		for k, tm := range tms {
			if g := binary.LittleEndian.Uint64(outs[k][:]); g != want {
				e.Fatalf("ReduceToAll at member %d = %d, want %d", tm.QueryRank(), g, want)
			}
			if tm.QueryRank() == 1 {
				if g := binary.LittleEndian.Uint64(ones[k][:]); g != want {
					e.Fatalf("ReduceToOne at the root = %d, want %d", g, want)
				}
			}
		}
	}
	for _, tm := range tms {
		sc, err := tm.Destroy(0)
		e.Check(err, "Destroy")
		if len(sc) != int(gex.ScratchSize) {
			e.Fatalf("Destroy returned %d scratch bytes, want %d", len(sc), gex.ScratchSize)
		}
	}
}

func TestMKTeam8(t *testing.T) { conformance(t, 4, jobOpts{segSize: mkSegSize}, mkTeam8) }

func TestMKTeam8TCP(t *testing.T) { runTCP(t, 4, 2, jobOpts{segSize: mkSegSize}, mkTeam8) }

// TestMKSplitNoScratch: GEX_FLAG_TM_NO_SCRATCH on Split is a performance
// hint; a barrier and a broadcast run over the team.
func TestMKSplitNoScratch(t *testing.T) {
	conformance(t, 4, jobOpts{segSize: mkSegSize}, func(e *rankEnv) {
		tm, _, err := e.tm.Split(int(e.rank%2), 0, nil, gex.FlagTMNoScratch)
		e.Check(err, "Split(NO_SCRATCH)")
		ev, err := tm.BarrierNB(0)
		e.Check(err, "BarrierNB on a NO_SCRATCH split team")
		e.Check(ev.Wait(), "barrier")
		dst := make([]byte, 16)
		src := []byte("no-scratch-bcast")
		ev, err = tm.BroadcastNB(0, dst, src, 16, 0)
		e.Check(err, "BroadcastNB on a NO_SCRATCH split team")
		e.Check(ev.Wait(), "broadcast")
		if string(dst) != string(src) {
			e.Fatalf("broadcast gave %q", dst)
		}
		_, err = tm.Destroy(0)
		e.Check(err, "Destroy")
	})
}

// mapsLines counts this process's mappings.
func mapsLines(t testing.TB) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestMKSegmentChurn: 1,000 segments created, bound and destroyed leave
// no mapping and no memory behind.
func TestMKSegmentChurn(t *testing.T) {
	if os.Getenv(envConduit) == "loop" {
		t.Skipf("%s=loop: mappings are counted in a process of its own", envConduit)
	}
	runSMP(t, 1, jobOpts{}, func(e *rankEnv) {
		ep, err := e.c.EPCreate(gex.EPCapabilityRMA, 0)
		e.Check(err, "EPCreate")
		churn := func(k int) {
			for i := 0; i < k; i++ {
				seg, err := gex.SegmentCreate(e.c, nil, 1<<20, gex.MKHost, 0)
				e.Check(err, "SegmentCreate")
				seg.Bytes()[i%(1<<20)] = 1 // touch a page
				e.Check(ep.BindSegment(seg, 0), "BindSegment")
				e.Check(seg.Destroy(0), "Destroy")
				if ep.QuerySegment() != nil {
					e.Fatalf("endpoint still has a bound segment after Destroy")
				}
			}
		}
		churn(10) // warm up
		maps0, rss0 := mapsLines(e.t), rssKB(e.t)
		churn(1000)
		maps1, rss1 := mapsLines(e.t), rssKB(e.t)
		if maps1 > maps0+16 { // the Go heap may map a few arenas; one leak per cycle would be 1000
			e.Fatalf("mappings grew from %d to %d lines over 1000 create/destroy cycles", maps0, maps1)
		}
		if rss1 > rss0+16<<10 {
			e.Fatalf("RSS grew from %d KiB to %d KiB over 1000 create/destroy cycles of 1 MiB segments", rss0, rss1)
		}
	})
}

// rssKB is this process's resident set in KiB.
func rssKB(t testing.TB) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n := 0
			for _, c := range f[1] {
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestMKBadInput: every new call names what is wrong.
func TestMKBadInput(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: mkSegSize}, func(e *rankEnv) {
		bad := func(what string, err error, words ...string) {
			e.t.Helper()
			if !errors.Is(err, gex.ErrBadArg) {
				e.Fatalf("%s: %v, want ErrBadArg", what, err)
			}
			for _, w := range words {
				if !strings.Contains(err.Error(), w) {
					e.Fatalf("%s: %q does not name %q", what, err, w)
				}
			}
		}
		_, err := e.c.EPCreate(0, 0)
		bad("EPCreate without capabilities", err, "capabilities")
		_, err = e.c.EPCreate(1<<9, 0)
		bad("EPCreate with an unknown capability", err, "capabilities")
		_, err = e.c.EPCreate(gex.EPCapabilityAM, gex.FlagImmediate)
		bad("EPCreate with flags", err, "flags")
		amOnly, err := e.c.EPCreate(gex.EPCapabilityAM, 0)
		e.Check(err, "EPCreate(AM)")
		p, err := gex.TMPair(amOnly, 0)
		e.Check(err, "TMPair")
		var b [8]byte
		err = p.PutBlocking(0, e.seg.QueryAddr(), b[:], 0)
		bad("Put from an AM-only endpoint", err, "GEX_EP_CAPABILITY_RMA")
		err = p.VectorPutBlocking(0, []gex.Memvec{{Addr: e.seg.QueryAddr(), Len: 8}}, [][]byte{b[:]}, 0)
		bad("VIS from an AM-only endpoint", err, "GEX_EP_CAPABILITY_VIS")
		rmaOnly, err := e.c.EPCreate(gex.EPCapabilityRMA, 0)
		e.Check(err, "EPCreate(RMA)")
		p, _ = gex.TMPair(rmaOnly, 0)
		err = p.RequestShort(0, mkAMIdx, 0)
		bad("AM from an RMA-only endpoint", err, "GEX_EP_CAPABILITY_AM")
		err = rmaOnly.RegisterHandlers([]gex.AMEntry{{Index: 250, Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) {}}})
		bad("RegisterHandlers on an RMA-only endpoint", err, "GEX_EP_CAPABILITY_AM")
		// A team over the RMA-only endpoints: no collectives, no atomics.
		var locs []gex.EPLocation
		for r := gex.Rank(0); r < e.size; r++ {
			locs = append(locs, gex.EPLocation{Rank: r, EPIndex: rmaOnly.QueryIndex()})
		}
		rt, _, err := e.tm.Create(locs, nil, 0, gex.FlagTMNoScratch)
		e.Check(err, "Create over RMA-only endpoints")
		_, err = gex.ADCreate[uint64](rt[0], gex.DTU64, gex.OPFAdd, 0)
		bad("ADCreate over an RMA-only endpoint", err, "GEX_EP_CAPABILITY_AD")
		_, err = rt[0].Destroy(0)
		e.Check(err, "Destroy")

		_, err = gex.SegmentCreate(e.c, nil, 100, gex.MKHost, 0)
		bad("SegmentCreate of 100 bytes", err, "size 100", "page size")
		_, err = gex.SegmentCreate(e.c, nil, 1<<62, gex.MKHost, 0)
		bad("SegmentCreate beyond the maximum", err, "MaxLocalSegmentSize")
		_, err = gex.SegmentCreate(e.c, nil, mkSegSize, nil, 0)
		bad("SegmentCreate without a kind", err, "kind")
		_, err = gex.SegmentCreate(e.c, []byte{}, 0, gex.MKHost, 0)
		bad("SegmentCreate of empty client memory", err, "empty")
		_, err = gex.SegmentCreate(e.c, make([]byte, 10), 20, gex.MKHost, 0)
		bad("SegmentCreate with a size other than len(mem)", err, "size 20")
		for _, cl := range []gex.MKClass{gex.MKClassCUDAUVA, gex.MKClassHIP, gex.MKClassZE} {
			_, err = gex.MKCreate(e.c, gex.MKCreateArgs{Class: cl}, 0)
			bad("MKCreate "+cl.String(), err, cl.String(), "no device support")
		}
		_, err = gex.MKCreate(e.c, gex.MKCreateArgs{Class: 42}, 0)
		bad("MKCreate of an unknown class", err, "Class 42")
		mk, err := gex.MKCreate(e.c, gex.MKCreateArgs{Class: gex.MKClassHost}, 0)
		e.Check(err, "MKCreate(HOST)")
		seg, err := gex.SegmentCreate(e.c, nil, mkSegSize, mk, 0)
		e.Check(err, "SegmentCreate with a created host kind")
		if seg.QueryKind() != mk || len(seg.Bytes()) != mkSegSize {
			e.Fatalf("segment kind/size wrong")
		}
		e.Check(mk.Destroy(0), "MK.Destroy")
		bad("MK.Destroy twice", mk.Destroy(0), "destroyed")
		bad("MK.Destroy(MKHost)", gex.MKHost.Destroy(0), "GEX_MK_HOST")
		_, err = gex.SegmentCreate(e.c, nil, mkSegSize, mk, 0)
		bad("SegmentCreate with a destroyed kind", err, "destroyed")

		ep, err := e.c.EPCreate(gex.EPCapabilityAll, 0)
		e.Check(err, "EPCreate")
		e.Check(ep.BindSegment(seg, 0), "BindSegment")
		seg2, err := gex.SegmentCreate(e.c, nil, mkSegSize, gex.MKHost, 0)
		e.Check(err, "SegmentCreate")
		bad("BindSegment to a bound endpoint", ep.BindSegment(seg2, 0), "already has a bound segment")
		bad("BindSegment of a bound segment", amOnly.BindSegment(seg, 0), "already bound")
		bad("BindSegment(nil)", ep.BindSegment(nil, 0), "segment is nil")
		bad("Destroy the attached segment", e.seg.Destroy(0), "SegmentAttach")
		e.Check(gex.PublishBoundSegment(e.tm, []*gex.EP{ep}, 0), "PublishBoundSegment")
		bad("Destroy a published segment", seg.Destroy(0), "published")
		e.Check(seg2.Destroy(0), "Destroy an unbound segment")
		bad("Destroy twice", seg2.Destroy(0), "already destroyed")
		bad("BindSegment of a destroyed segment", amOnly.BindSegment(seg2, 0), "destroyed")
		err = gex.PublishBoundSegment(e.tm, []*gex.EP{rmaOnly}, 0)
		bad("PublishBoundSegment of an endpoint without a segment", err, "no bound segment")
		err = gex.PublishBoundSegment(e.tm, []*gex.EP{ep}, 0)
		bad("PublishBoundSegment twice", err, "already published")
		// Every rank learnt the peer's endpoint: its segment is known.
		pr, _ := gex.TMPair(e.ep, ep.QueryIndex())
		bs, _, err := pr.QueryBoundSegmentNB((e.rank+1)%e.size, 0)
		e.Check(err, "QueryBoundSegmentNB")
		if bs.Size != mkSegSize {
			e.Fatalf("peer's published endpoint: size %d, want %d", bs.Size, mkSegSize)
		}
		// An endpoint never published here: its segment is fetched.
		late, err := e.c.EPCreate(gex.EPCapabilityRMA, 0)
		e.Check(err, "EPCreate")
		lseg, err := gex.SegmentCreate(e.c, nil, 2*mkSegSize, gex.MKHost, 0)
		e.Check(err, "SegmentCreate")
		e.Check(late.BindSegment(lseg, 0), "BindSegment")
		bare, err := e.c.EPCreate(gex.EPCapabilityAM, 0) // no segment
		e.Check(err, "EPCreate")
		e.Barrier()
		peer := (e.rank + 1) % e.size
		pr, _ = gex.TMPair(e.ep, late.QueryIndex())
		if bs, _, err := pr.QueryBoundSegmentNB(peer, gex.FlagImmediate); err != nil || bs.Size != 0 {
			e.Fatalf("QueryBoundSegmentNB(IMMEDIATE) of an unpublished endpoint = %+v, %v; want size 0", bs, err)
		}
		_, ev, err := pr.QueryBoundSegmentNB(peer, 0)
		e.Check(err, "QueryBoundSegmentNB (fetch)")
		if ev == gex.EventInvalid {
			e.Fatalf("QueryBoundSegmentNB of an unpublished endpoint returned no event")
		}
		e.Check(ev.Wait(), "fetch")
		if bs, ev, err := pr.QueryBoundSegmentNB(peer, 0); err != nil || ev != gex.EventInvalid || bs.Size != 2*mkSegSize || bs.Owner == 0 {
			e.Fatalf("QueryBoundSegmentNB after the fetch = %+v, %v, %v; want size %d", bs, ev, err, 2*mkSegSize)
		}
		pr, _ = gex.TMPair(e.ep, bare.QueryIndex())
		_, ev, err = pr.QueryBoundSegmentNB(peer, 0)
		e.Check(err, "QueryBoundSegmentNB (fetch, no segment)")
		e.Check(ev.Wait(), "fetch (no segment)")
		e.Barrier()
	})
}

// TestMKNegotiatedPayload: negotiated-payload AMs (Prepare/Commit) reach a
// non-primordial endpoint and the Reply comes back to the sending one; the
// Long limit to such an endpoint is the one-buffer limit.
func TestMKNegotiatedPayload(t *testing.T) {
	t.Run("mapped", func(t *testing.T) { conformance(t, 2, jobOpts{segSize: mkSegSize}, mkNegotiated) })
	t.Run("am-path", func(t *testing.T) { conformance(t, 2, jobOpts{segSize: mkSegSize, supernode: 1}, mkNegotiated) })
	t.Run("tcp", func(t *testing.T) { runTCP(t, 2, 2, jobOpts{segSize: mkSegSize}, mkNegotiated) })
}

func mkNegotiated(e *rankEnv) {
	{
		ep, err := e.c.EPCreate(gex.EPCapabilityAll, 0)
		e.Check(err, "EPCreate")
		seg, err := gex.SegmentCreate(e.c, nil, mkSegSize, gex.MKHost, 0)
		e.Check(err, "SegmentCreate")
		e.Check(ep.BindSegment(seg, 0), "BindSegment")
		var got, replies atomic.Int64
		e.Check(ep.RegisterHandlers([]gex.AMEntry{
			{Index: 210, Flags: gex.FlagAMLong | gex.FlagAMRequest, NArgs: 1, Fn: func(t *gex.Token, p []byte, a []gex.AMArg) {
				if len(p) == int(a[0]) && p[0] == 0xab && p[len(p)-1] == 0xab {
					got.Add(1)
				}
				sd, err := t.PrepareReplyMedium(nil, 4, 4, nil, 0, 0)
				if err == nil {
					copy(sd.Addr(), "pong")
					err = sd.CommitReplyMedium(211, 4)
				}
				if err != nil {
					got.Add(-1000)
				}
			}},
			{Index: 211, Flags: gex.FlagAMMedium | gex.FlagAMReply, Fn: func(t *gex.Token, p []byte, _ []gex.AMArg) {
				if info, _ := t.Info(gex.TIEP); info.EP == ep && string(p) == "pong" {
					replies.Add(1)
				}
			}},
		}), "RegisterHandlers")
		e.Check(gex.PublishBoundSegment(e.tm, []*gex.EP{ep}, 0), "PublishBoundSegment")
		peer := (e.rank + 1) % e.size
		p, _ := gex.TMPair(ep, ep.QueryIndex())
		max, err := p.MaxRequestLong(peer, 0, 1)
		e.Check(err, "MaxRequestLong")
		prim, _ := e.tm.MaxRequestLong(peer, 0, 1)
		medium, _ := p.MaxRequestMedium(peer, 0, 1)
		if max != min(prim, medium) {
			e.Fatalf("MaxRequestLong to a non-primordial endpoint = %d, want min(Long %d, Medium %d)", max, prim, medium)
		}
		bs, _, err := p.QueryBoundSegmentNB(peer, 0)
		e.Check(err, "QueryBoundSegmentNB")
		sd, err := p.PrepareRequestLong(peer, nil, max, max, bs.Owner, nil, 0, 1)
		e.Check(err, "PrepareRequestLong")
		buf := sd.Addr()
		for i := range buf {
			buf[i] = 0xab
		}
		e.Check(sd.CommitRequestLong(210, len(buf), bs.Owner, int32(len(buf))), "CommitRequestLong")
		e.Check(e.c.BlockUntil(func() bool { return got.Load() != 0 && replies.Load() != 0 }), "BlockUntil")
		if got.Load() != 1 || replies.Load() != 1 {
			e.Fatalf("handler saw %d good Longs, %d replies; want 1 and 1", got.Load(), replies.Load())
		}
		e.Barrier()
	}
}
