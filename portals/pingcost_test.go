package portals

import (
	"reflect"
	"testing"
)

// pingPair is two physical NIs of this process (interfaces 0 and 1: two pids, so messages
// between them go through the transport's shared-memory path), each with a non-matching LE
// counted by a CT at one PT and an 8-byte MD without events: the set-up of a Portals
// ping-pong (cmd/ptlbench's LE+CT).
type pingPair struct {
	ids [2]ProcessID
	cts [2]CTHandle
	mds [2]MDHandle
	pts [2]PTIndex
}

func newPingPair(tb testing.TB) *pingPair {
	tb.Helper()
	if err := Init(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(Fini)
	pp := &pingPair{}
	for i := range 2 {
		h, _, err := NIInit(Interface(i), NINoMatching|NIPhysical, PIDAny, nil)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { h.Fini() })
		pp.ids[i], _ = h.PhysID()
		pp.cts[i], _ = h.CTAlloc()
		pp.pts[i], _ = h.PTAlloc(0, EQNone, PTAny)
		if _, err := h.LEAppend(pp.pts[i], &LE{Buf: make([]byte, 8), UID: UIDAny, CT: pp.cts[i],
			Options: OpPut | EventCTComm | EventLinkDisable}, PriorityList, 0); err != nil {
			tb.Fatal(err)
		}
		pp.mds[i], _ = h.MDBind(MD{Buf: make([]byte, 8)})
	}
	return pp
}

// round puts from NI 0 to NI 1 and back, each side waiting on its CT for the seen-th put.
func (pp *pingPair) round(tb testing.TB, seen uint64) {
	for i := range 2 {
		if err := Put(pp.mds[i], 0, 8, NoAckReq, pp.ids[1-i], pp.pts[1-i], 0, 0, 0, 0); err != nil {
			tb.Fatal(err)
		}
		if _, err := pp.cts[1-i].Wait(seen); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestZeroAllocsRemote: a put to another process (the quiet path, without the NI lock) and
// the CTWait that polls the transport for it allocate nothing.
func TestZeroAllocsRemote(t *testing.T) {
	pp := newPingPair(t)
	var seen uint64
	for range 100 {
		seen++
		pp.round(t, seen)
	}
	if n := testing.AllocsPerRun(500, func() { seen++; pp.round(t, seen) }); n != 0 {
		t.Errorf("%v allocs per round trip", n)
	}
}

// BenchmarkPingPongCost: the software cost of a Portals ping-pong round trip (an 8-byte put
// into a non-matching LE counted by a CT, then the same back) between two physical NIs of
// this process through the transport's shared-memory path, in one goroutine: each side's
// CTWait polls the transport inline and finds the put already there, so the figure is the
// engine's and transport's own work per round trip, without cross-core latency (the
// progress goroutines park while the waits poll).
func BenchmarkPingPongCost(b *testing.B) {
	pp := newPingPair(b)
	var seen uint64
	for range 1000 {
		seen++
		pp.round(b, seen)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		seen++
		pp.round(b, seen)
	}
}

// TestShortPut: a put without an acknowledgment to another process travels with the short
// header (wire.go) and the target sees exactly what the full header would give it: the
// PTL_EVENT_PUT's match bits, hdr_data, remote offset, requested and manipulated lengths,
// initiator, and the bytes in place; then an acknowledged put (full header) still works.
func TestShortPut(t *testing.T) {
	if err := Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(Fini)
	var nis [2]NIHandle
	var ids [2]ProcessID
	for i := range 2 {
		h, _, err := NIInit(Interface(i), NIMatching|NIPhysical, PIDAny, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Fini() })
		nis[i], ids[i] = h, must(h.PhysID())
	}
	q := must(nis[1].EQAlloc(8))
	pt := must(nis[1].PTAlloc(0, q, PTAny))
	buf := make([]byte, 16)
	must(nis[1].MEAppend(pt, &ME{Buf: buf, UID: UIDAny, Options: OpPut | EventLinkDisable, MatchBits: 42,
		MatchID: ProcessID{NID: NIDAny, PID: PIDAny}}, PriorityList, 77))
	src := []byte("abcdefgh")
	md := must(nis[0].MDBind(MD{Buf: src}))
	if err := Put(md, 1, 5, NoAckReq, ids[1], pt, 42, 3, 0, 0x1234); err != nil {
		t.Fatal(err)
	}
	ev := must(q.Wait())
	want := Event{Start: buf[3:8], UserPtr: 77, HdrData: 0x1234, MatchBits: 42, RLength: 5, MLength: 5,
		RemoteOffset: 3, UID: ev.UID, Initiator: ids[0], Type: EventPut, PTIndex: pt}
	if string(ev.Start) != "bcdef" || string(buf[3:8]) != "bcdef" {
		t.Fatalf("bytes %q at the target", buf)
	}
	ev.Start, want.Start = nil, nil
	if !reflect.DeepEqual(ev, want) {
		t.Fatalf("event %+v, want %+v", ev, want)
	}
	mq := must(nis[0].EQAlloc(8))
	amd := must(nis[0].MDBind(MD{Buf: src, EQ: mq, Options: MDEventSendDisable}))
	if err := Put(amd, 0, 8, AckReqFull, ids[1], pt, 42, 8, 9, 0); err != nil {
		t.Fatal(err)
	}
	if ev := must(q.Wait()); ev.Type != EventPut || ev.RLength != 8 || ev.RemoteOffset != 8 {
		t.Fatalf("acked put's event %+v", ev)
	}
	if ev := must(mq.Wait()); ev.Type != EventAck || ev.UserPtr != 9 || ev.MLength != 8 {
		t.Fatalf("ack %+v", ev)
	}
}

// TestShortPutMalformed: a header of the short put's length that is not a short put (an ack
// requested, another operation, reserved bytes set, a bad magic) is counted as malformed
// and changes nothing; the expansion of a valid one passes the full header's check.
func TestShortPutMalformed(t *testing.T) {
	s := make(wireHdr, shortPutLen)
	s.shortPut(0, 3, 0x55, 4, 10)
	var full [hdrLen]byte
	if !expandShortPut(&full, s, 8) || !wireHdr(full[:]).check(make([]byte, 8)) {
		t.Fatal("a short put's expansion is refused")
	}
	if h := wireHdr(full[:]); h.length() != 8 || h.hdrData() != 10 || h.roff() != 4 || h.bits() != 0x55 || h.pt() != 3 ||
		h.md() != 0 || h.userPtr() != 0 || h.ackReq() != NoAckReq {
		t.Fatalf("expansion %x", full)
	}
	for i, bad := range []func(h wireHdr){
		func(h wireHdr) { h[0] = 0 },
		func(h wireHdr) { h[1] = opGet },
		func(h wireHdr) { h[3] = byte(AckReqFull) },
		func(h wireHdr) { h[5] = 1 },
		func(h wireHdr) { h[13] = 1 },
	} {
		b := append(wireHdr(nil), s...)
		bad(b)
		if expandShortPut(&full, b, 8) {
			t.Errorf("case %d: expanded %x", i, b)
		}
	}
	if expandShortPut(&full, s[:shortPutLen-1], 8) {
		t.Error("a shorter header expanded")
	}
}

// BenchmarkPingPongCostEQ is BenchmarkPingPongCost for cmd/ptlbench's ME+EQ ping-pong: each
// side's matching NI has an ME (match bits 42) on a PT with an EQ, and waits for the
// PTL_EVENT_PUT with EQWait.
func BenchmarkPingPongCostEQ(b *testing.B) {
	if err := Init(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(Fini)
	var ids [2]ProcessID
	var eqs [2]EQHandle
	var mds [2]MDHandle
	var pts [2]PTIndex
	for i := range 2 {
		h, _, err := NIInit(Interface(i), NIMatching|NIPhysical, PIDAny, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Fini() })
		ids[i], _ = h.PhysID()
		eqs[i], _ = h.EQAlloc(1024)
		pts[i], _ = h.PTAlloc(0, eqs[i], PTAny)
		if _, err := h.MEAppend(pts[i], &ME{Buf: make([]byte, 8), UID: UIDAny, MatchBits: 42,
			MatchID: ProcessID{NID: NIDAny, PID: PIDAny}, Options: OpPut | EventLinkDisable}, PriorityList, 0); err != nil {
			b.Fatal(err)
		}
		mds[i], _ = h.MDBind(MD{Buf: make([]byte, 8)})
	}
	round := func() {
		for i := range 2 {
			if err := Put(mds[i], 0, 8, NoAckReq, ids[1-i], pts[1-i], 42, 0, 0, 0); err != nil {
				b.Fatal(err)
			}
			if ev, err := eqs[1-i].Wait(); err != nil || ev.Type != EventPut {
				b.Fatal(err, ev.Type)
			}
		}
	}
	for range 1000 {
		round()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		round()
	}
}
