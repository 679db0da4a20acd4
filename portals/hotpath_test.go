package portals

import (
	"os"
	"strconv"
	"testing"
)

// TestZeroAllocs: Put, Get and Atomic on an established path (this process's own NI, the
// NIC inline) allocate nothing per operation, events and counters included; nor do EQGet,
// CTGet and a CTWait that is already satisfied. (BenchmarkPingPongCost reports the
// allocations of puts to another process and of CTWaits that poll.)
func TestZeroAllocs(t *testing.T) {
	e := newEnv(t, niKinds[1], 1, nil)
	q := must(e.ni[0].EQAlloc(4096))
	c := must(e.ni[0].CTAlloc())
	pt := must(e.ni[0].PTAlloc(0, q, PTAny))
	tbuf := make([]byte, 64)
	me := anyME(tbuf, EventLinkDisable|EventCTComm)
	me.CT = c
	e.appendEntry(0, pt, me, PriorityList, 0)
	cI := must(e.ni[0].CTAlloc())
	md := must(e.ni[0].MDBind(MD{Buf: make([]byte, 64), EQ: q, CT: cI, Options: MDEventCTAck | MDEventCTReply}))
	id := e.ids[0]
	drain := func() {
		for {
			if _, err := q.Get(); err != nil {
				return
			}
		}
	}
	for name, f := range map[string]func(){
		"Put":    func() { Put(md, 0, 8, AckReqFull, id, pt, 0, 0, 1, 2) },
		"Get":    func() { Get(md, 8, 8, id, pt, 0, 0, 1) },
		"Atomic": func() { Atomic(md, 0, 8, CTAckReq, id, pt, 0, 0, 1, 2, OpSum, Int64) },
		"Fetch":  func() { FetchAtomic(md, 16, md, 0, 8, id, pt, 0, 0, 1, 2, OpSum, Uint64) },
		"EQGet":  func() { q.Get() },
		"CTGet":  func() { cI.Get() },
		"CTWait": func() { cI.Wait(0) },
	} {
		f()
		drain()
		if n := testing.AllocsPerRun(200, func() { f(); drain() }); n != 0 {
			t.Errorf("%s: %v allocs per operation", name, n)
		}
	}
}

// TestFlood sends a flood of puts into a matching list whose priority entries run out and
// whose overflow entries take the rest, and checks that nothing is lost and that exactly
// the events the spec requires are posted: one PUT per message, AUTO_UNLINK per used-up
// entry, and one PUT_OVERFLOW per unexpected header when priority entries are appended
// afterwards. PORTALS_FLOOD=1000000 runs the 10^6 variant.
func TestFlood(t *testing.T) {
	n := 20000
	if s := os.Getenv("PORTALS_FLOOD"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for _, pair := range []bool{false, true} {
		name := "self"
		ranks := 1
		if pair {
			name, ranks = "pair", 2
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, niKinds[1], ranks, &Limits{MaxUnexpectedHeaders: n, MaxEntries: n + 64, MaxListSize: n + 64})
			tgt := ranks - 1
			q := must(e.ni[tgt].EQAlloc(uint64(2*n + 64)))
			pt := must(e.ni[tgt].PTAlloc(0, q, PTAny))
			// priority: n/4 use-once MEs (8 bytes each); overflow: persistent entries
			// with MANAGE_LOCAL taking 8 bytes per message, min_free 8.
			prio := n / 4
			pbuf := make([]byte, 8*prio)
			for i := 0; i < prio; i++ {
				me := anyME(pbuf[8*i:8*i+8], UseOnce|EventLinkDisable)
				e.appendEntry(tgt, pt, me, PriorityList, uint64(i))
			}
			const perOvf = 1024
			novf := (n - prio + perOvf - 1) / perOvf
			obuf := make([]byte, 8*perOvf*novf)
			for i := 0; i < novf; i++ {
				me := anyME(obuf[8*perOvf*i:8*perOvf*(i+1)], ManageLocal|EventLinkDisable)
				me.MinFree = 8
				e.appendEntry(tgt, pt, me, OverflowList, uint64(1<<32+i))
			}
			cI := must(e.ni[0].CTAlloc())
			src := make([]byte, 8)
			md := must(e.ni[0].MDBind(MD{Buf: src, CT: cI, Options: MDEventCTAck}))
			for i := 0; i < n; i++ {
				le.PutUint64(src, uint64(i))
				ok(t, Put(md, 0, 8, CTAckReq, e.ids[tgt], pt, 0, 0, 0, uint64(i)))
			}
			if v := ctWait(t, cI, uint64(n)); v.Success != uint64(n) || v.Failure != 0 {
				t.Fatalf("acks %+v", v)
			}
			puts, unlinks, ovfPuts := 0, 0, 0
			seen := make([]bool, n)
			for {
				ev, err := q.Get()
				if err != nil {
					wantCode(t, err, ErrEQEmpty)
					break
				}
				switch ev.Type {
				case EventPut:
					if seen[ev.HdrData] || le.Uint64(ev.Start) != ev.HdrData {
						t.Fatalf("message %d twice or with wrong data", ev.HdrData)
					}
					seen[ev.HdrData] = true
					puts++
					if ev.List == OverflowList {
						ovfPuts++
					} else if ev.HdrData != ev.UserPtr {
						t.Fatalf("message %d in priority entry %d: order", ev.HdrData, ev.UserPtr)
					}
				case EventAutoUnlink:
					unlinks++
				default:
					t.Fatalf("unexpected %+v", ev)
				}
			}
			fullOvf := (n - prio) / perOvf
			if puts != n || ovfPuts != n-prio || unlinks != prio+fullOvf {
				t.Fatalf("puts %d (overflow %d), unlinks %d; want %d (%d), %d", puts, ovfPuts, unlinks, n, n-prio, prio+fullOvf)
			}
			for _, r := range []SRIndex{SRDropCount, SRMalformed} {
				if v := must(e.ni[tgt].Status(r)); v != 0 {
					t.Fatalf("%v = %d", r, v)
				}
			}
			// the unexpected headers, in order, to persistent priority appends
			me := anyME(nil, EventLinkDisable)
			e.appendEntry(tgt, pt, me, PriorityList, 7)
			next := uint64(prio)
			frees := 0
			for {
				ev, err := q.Get()
				if err != nil {
					break
				}
				switch ev.Type {
				case EventPutOverflow:
					if ev.HdrData != next {
						t.Fatalf("overflow event %d, want %d (order)", ev.HdrData, next)
					}
					next++
				case EventAutoFree:
					frees++
				default:
					t.Fatalf("unexpected %+v", ev)
				}
			}
			if next != uint64(n) || frees != fullOvf {
				t.Fatalf("overflow events up to %d, AUTO_FREE %d; want %d, %d", next, frees, n, fullOvf)
			}
		})
	}
}

func BenchmarkPutSelf(b *testing.B) {
	ok := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	ok(Init())
	defer Fini()
	ni, _, err := NIInit(0, NINoMatching|NIPhysical, PIDAny, nil)
	ok(err)
	defer ni.Fini()
	id, _ := ni.PhysID()
	c, _ := ni.CTAlloc()
	pt, _ := ni.PTAlloc(0, EQNone, PTAny)
	_, err = ni.LEAppend(pt, &LE{Buf: make([]byte, 8), UID: UIDAny, Options: OpPut | EventCTComm, CT: c}, PriorityList, 0)
	ok(err)
	md, _ := ni.MDBind(MD{Buf: make([]byte, 8)})
	b.ReportAllocs()
	for b.Loop() {
		Put(md, 0, 8, NoAckReq, id, pt, 0, 0, 0, 0)
	}
}

// BenchmarkPutWindow: 8-byte puts with counted acks, 128 in flight, between two physical NIs
// of this process (two pids, the transport's shared-memory path); the target is passive.
func BenchmarkPutWindow(b *testing.B) {
	if err := Init(); err != nil {
		b.Fatal(err)
	}
	defer Fini()
	var nis [2]NIHandle
	for i := range nis {
		h, _, err := NIInit(Interface(i), NINoMatching|NIPhysical, PIDAny, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Fini()
		nis[i] = h
	}
	pt, _ := nis[1].PTAlloc(0, EQNone, PTAny)
	if _, err := nis[1].LEAppend(pt, &LE{Buf: make([]byte, 8), UID: UIDAny, Options: OpPut | EventLinkDisable}, PriorityList, 0); err != nil {
		b.Fatal(err)
	}
	tgt, _ := nis[1].PhysID()
	ct, _ := nis[0].CTAlloc()
	md, _ := nis[0].MDBind(MD{Buf: make([]byte, 8), CT: ct, Options: MDEventCTAck})
	const w = 128
	var issued uint64
	b.ReportAllocs()
	for b.Loop() {
		if issued >= w {
			if _, err := ct.Wait(issued - w + 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := Put(md, 0, 8, CTAckReq, tgt, pt, 0, 0, 0, 0); err != nil {
			b.Fatal(err)
		}
		issued++
	}
	if v, err := ct.Wait(issued); err != nil || v.Failure != 0 {
		b.Fatal(err, v)
	}
}
