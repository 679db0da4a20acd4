package portals

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// TestProcs runs the multi-process suite with 3 ranks on this host (shared memory between
// the processes).
func TestProcs(t *testing.T) {
	spmdtest.Run(t, 3, procSuite, spmdtest.Timeout(120*time.Second))
}

// TestNetnsProcs runs it with 4 ranks on two hosts made of network namespaces (two ranks
// per host: shared memory inside a host, TCP between them).
func TestNetnsProcs(t *testing.T) {
	var opts []spmdtest.Option
	if adjust := spmdtest.Netns(t, 2); adjust != nil {
		opts = append(opts, spmdtest.Launch(adjust))
	}
	spmdtest.Run(t, 4, procSuite, append(opts, spmdtest.Timeout(180*time.Second))...)
}

// TestJobMap: JobMap in a job started by the launcher gives every rank's physical ID.
func TestJobMap(t *testing.T) {
	spmdtest.Run(t, 2, func(t *testing.T) {
		ok(t, Init())
		defer Fini()
		ni, _, err := NIInit(0, NIMatching|NILogical, PIDAny, nil)
		ok(t, err)
		m, err := JobMap(ni)
		ok(t, err)
		if len(m) != 2 {
			t.Fatalf("map of %d", len(m))
		}
		ok(t, ni.SetMap(m))
		me := must(ni.PhysID())
		r := must(ni.ID()).Rank
		if r > 1 || m[r] != me {
			t.Fatalf("rank %d, map %v, me %v", r, m, me)
		}
	})
}

// procSuite is the body of every rank: for each of the four NI kinds, the last rank sets up
// its entries and then makes no Portals call until the end (its NIC alone serves the other
// ranks: application bypass), while the other ranks put, get, and apply atomics to it and
// to each other, with acks, replies and counters checked.
func procSuite(t *testing.T) {
	b, err := boot.FromEnv()
	ok(t, err)
	rank, size := b.Rank(), b.Size()
	passive := size - 1
	ok(t, Init())
	defer Fini()
	for _, k := range niKinds {
		ni, _, err := NIInit(0, k.opts, PIDAny, nil)
		ok(t, err)
		m, err := JobMapExchange(ni, b.AllGather)
		ok(t, err)
		if rank == 0 && k == niKinds[0] {
			t.Logf("map %v", m)
		}
		target := func(r int) ProcessID {
			if k.opts&NILogical != 0 {
				return RankID(Rank(r))
			}
			return m[r]
		}
		if k.opts&NILogical != 0 {
			ok(t, ni.SetMap(m))
		}
		uid := must(ni.UID())
		// PT 5: one 8-byte slot per rank; PT 6: a uint64 counter; PT 7: nothing (drops)
		slots := make([]byte, 8*size)
		counter := make([]byte, 8)
		ctS := must(ni.CTAlloc())
		ctC := must(ni.CTAlloc())
		q := must(ni.EQAlloc(1024))
		must(ni.PTAlloc(0, q, 5))
		must(ni.PTAlloc(0, EQNone, 6))
		must(ni.PTAlloc(0, EQNone, 7))
		add := func(pt PTIndex, buf []byte, ct CTHandle, bits MatchBits) {
			me := ME{Buf: buf, UID: uid, CT: ct, Options: OpPut | OpGet | EventCTComm | EventLinkDisable,
				MatchID: ProcessID{NID: NIDAny, PID: PIDAny, Rank: RankAny}, MatchBits: bits}
			if k.opts&NIMatching != 0 {
				must(ni.MEAppend(pt, &me, PriorityList, 0))
			} else {
				must(ni.LEAppend(pt, &LE{Buf: buf, UID: uid, CT: ct, Options: me.Options}, PriorityList, 0))
			}
		}
		add(5, slots, ctS, 0x5)
		add(6, counter, ctC, 0x6)
		ok(t, b.Barrier())

		const nAtomics = 10
		if rank != passive {
			qI := must(ni.EQAlloc(1024))
			cI := must(ni.CTAlloc())
			src := make([]byte, 8*size+8)
			binary.LittleEndian.PutUint64(src, uint64(1000+rank))
			binary.LittleEndian.PutUint64(src[8*size:], 1)
			md := must(ni.MDBind(MD{Buf: src, EQ: qI, CT: cI, Options: MDEventCTAck | MDEventCTReply | MDEventSendDisable}))
			acks := uint64(0)
			for r := 0; r < size; r++ {
				ok(t, Put(md, 0, 8, CTAckReq, target(r), 5, 0x5, uint64(8*rank), 0, uint64(rank)))
				acks++
			}
			for i := 0; i < nAtomics; i++ {
				ok(t, FetchAtomic(md, 8, md, uint64(8*size), 8, target(passive), 6, 0x6, 0, 0, 0, OpSum, Uint64))
				acks++
			}
			// a put to a PT without entries is dropped with no ack; one with a full ack
			// to a matching entry with the wrong uid reports a permission violation
			if v := ctWait(t, cI, acks); v.Success != acks || v.Failure != 0 {
				t.Fatalf("%s: acks %+v want %d", k.name, v, acks)
			}
			for {
				if _, err := qI.Get(); err != nil {
					break // REPLY events of the fetches
				}
			}
		}
		ok(t, b.Barrier()) // every put and atomic is complete (their acks and replies came)
		if rank != passive {
			// everybody's slots at the passive rank, read back by a get
			qG := must(ni.EQAlloc(8))
			dst := make([]byte, 8*size)
			md := must(ni.MDBind(MD{Buf: dst, EQ: qG}))
			ok(t, Get(md, 0, uint64(8*size), target(passive), 5, 0x5, 0, 0))
			r := nextEvent(t, qG)
			if r.Type != EventReply || r.NIFail != NIOK || r.MLength != uint64(8*size) {
				t.Fatalf("%s: reply %+v", k.name, r)
			}
			for s := 0; s < passive; s++ {
				if v := binary.LittleEndian.Uint64(dst[8*s:]); v != uint64(1000+s) {
					t.Fatalf("%s: slot %d at the passive rank: %d", k.name, s, v)
				}
			}
		}
		ok(t, b.Barrier())
		ok(t, AtomicSync())
		for s := 0; s < passive; s++ {
			if v := binary.LittleEndian.Uint64(slots[8*s:]); v != uint64(1000+s) {
				t.Fatalf("%s: slot %d: %d", k.name, s, v)
			}
		}
		if v := must(ctS.Get()); v.Success < uint64(passive) {
			t.Fatalf("%s: slot counter %+v", k.name, v)
		}
		if rank == passive {
			if v := binary.LittleEndian.Uint64(counter); v != uint64(nAtomics*passive) {
				t.Fatalf("%s: counter %d want %d", k.name, v, nAtomics*passive)
			}
		}
		for _, r := range []SRIndex{SRDropCount, SRMalformed, SRPermissionViolations, SROperationViolations} {
			if v := must(ni.Status(r)); v != 0 {
				t.Fatalf("%s: %v = %d", k.name, r, v)
			}
		}
		ok(t, b.Barrier())
		ok(t, ni.Fini())
	}
}

// TestWithGex: gex and portals in the same processes. gex's Client owns the bootstrap, so the
// physical IDs travel in gex AMs into JobMapExchange; then Portals puts with acks run while
// gex barriers keep the ranks together.
func TestWithGex(t *testing.T) {
	spmdtest.Run(t, 2, func(t *testing.T) {
		c, ep, tm, err := gex.ClientInit("PORTALSGEX", 0)
		ok(t, err)
		me, n := int(tm.QueryRank()), int(tm.QuerySize())
		var mu sync.Mutex
		got := make([][]byte, n)
		var arrived atomic.Int32
		ok(t, ep.RegisterHandlers([]gex.AMEntry{{Index: 210, Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 1, Name: "id",
			Fn: func(_ *gex.Token, p []byte, a []gex.AMArg) {
				mu.Lock()
				got[a[0]] = append([]byte(nil), p...)
				mu.Unlock()
				arrived.Add(1)
			}}}))
		allGather := func(mine []byte) ([][]byte, error) {
			for r := 0; r < n; r++ {
				if err := tm.RequestMedium(gex.Rank(r), 210, mine, gex.EventNow, 0, gex.AMArg(me)); err != nil {
					return nil, err
				}
			}
			if err := c.BlockUntil(func() bool { return arrived.Load() == int32(n) }); err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			return got, nil
		}
		ok(t, Init())
		defer Fini()
		ni, _, err := NIInit(0, NINoMatching|NILogical, PIDAny, nil)
		ok(t, err)
		q := must(ni.EQAlloc(16))
		pt := must(ni.PTAlloc(0, q, PTAny))
		inbox := make([]byte, 8)
		must(ni.LEAppend(pt, &LE{Buf: inbox, UID: UIDAny, Options: OpPut | EventLinkDisable}, PriorityList, 0))
		m, err := JobMapExchange(ni, allGather)
		ok(t, err)
		ok(t, ni.SetMap(m))
		md := must(ni.MDBind(MD{Buf: []byte{byte(me), 1, 2, 3, 4, 5, 6, 7}, EQ: q, Options: MDEventSendDisable}))
		ok(t, Put(md, 0, 8, AckReqFull, RankID(Rank((me+1)%n)), pt, 0, 0, 0, 0))
		for i := 0; i < 2; i++ {
			ev := nextEvent(t, q)
			switch ev.Type {
			case EventAck:
				if ev.NIFail != NIOK {
					t.Fatalf("%+v", ev)
				}
			case EventPut:
				if int(inbox[0]) != (me+n-1)%n {
					t.Fatalf("inbox %v", inbox)
				}
			default:
				t.Fatalf("%+v", ev)
			}
		}
		ev, err := tm.BarrierNB(0)
		ok(t, err)
		ok(t, ev.Wait())
		ok(t, ni.Fini())
		ok(t, c.Close())
	})
}
