package portals

import "testing"

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
