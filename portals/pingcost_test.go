package portals

import "testing"

// BenchmarkPingPongCost: the software cost of a Portals ping-pong round trip (an 8-byte put
// into a non-matching LE counted by a CT, then the same back) between two physical NIs of
// this process through the transport's shared-memory path, in one goroutine: each side's
// CTWait polls the transport inline and finds the put already there, so the figure is the
// engine's and transport's own work per round trip, without cross-core latency (the
// progress goroutines park while the waits poll).
func BenchmarkPingPongCost(b *testing.B) {
	if err := Init(); err != nil {
		b.Fatal(err)
	}
	defer Fini()
	var nis [2]NIHandle
	var ids [2]ProcessID
	var cts [2]CTHandle
	var mds [2]MDHandle
	var pts [2]PTIndex
	for i := range nis {
		h, _, err := NIInit(Interface(i), NINoMatching|NIPhysical, PIDAny, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Fini()
		nis[i] = h
		ids[i], _ = h.PhysID()
		cts[i], _ = h.CTAlloc()
		pts[i], _ = h.PTAlloc(0, EQNone, PTAny)
		if _, err := h.LEAppend(pts[i], &LE{Buf: make([]byte, 8), UID: UIDAny, CT: cts[i],
			Options: OpPut | EventCTComm | EventLinkDisable}, PriorityList, 0); err != nil {
			b.Fatal(err)
		}
		mds[i], _ = h.MDBind(MD{Buf: make([]byte, 8)})
	}
	var seen uint64
	one := func() {
		seen++
		for i := range 2 {
			if err := Put(mds[i], 0, 8, NoAckReq, ids[1-i], pts[1-i], 0, 0, 0, 0); err != nil {
				b.Fatal(err)
			}
			if _, err := cts[1-i].Wait(seen); err != nil {
				b.Fatal(err)
			}
		}
	}
	for range 1000 {
		one()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		one()
	}
}
