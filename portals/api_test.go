package portals

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCodesString(t *testing.T) {
	if ErrArgInvalid.String() != "PTL_ARG_INVALID" || ErrEQDropped.String() != "PTL_EQ_DROPPED" || ErrPTInUse.String() != "PTL_PT_IN_USE" {
		t.Fatal("code spelling")
	}
	seen := map[string]bool{}
	for c := Code(1); c < numCodes; c++ {
		s := c.String()
		if !strings.HasPrefix(s, "PTL_") || seen[s] {
			t.Fatalf("code %d: %q", c, s)
		}
		seen[s] = true
		var err error = &Error{Code: c, Func: "PtlX"}
		for d := Code(1); d < numCodes; d++ {
			if errors.Is(err, d) != (c == d) {
				t.Fatalf("errors.Is(%v, %v)", c, d)
			}
		}
	}
	if got := (OpPut | UseOnce | ManageLocal).String(); got != "PTL_ME_OP_PUT|PTL_ME_USE_ONCE|PTL_ME_MANAGE_LOCAL" {
		t.Fatal(got)
	}
	if EventFetchAtomicOverflow.String() != "PTL_EVENT_FETCH_ATOMIC_OVERFLOW" || NINoMatch.String() != "PTL_NI_NO_MATCH" ||
		OpDiff.String() != "PTL_DIFF" || LongDoubleComplex.String() != "PTL_LONG_DOUBLE_COMPLEX" {
		t.Fatal("enum spelling")
	}
	if int(numEventKinds) != 17 || int(numAtomicOps) != 19 || int(numDatatypes) != 14 || int(numNIFail) != 8 {
		t.Fatal("enumeration sizes")
	}
}

// §3.5, Table 3-7: every function but PtlInit/PtlFini/PtlHandleIsEqual returns
// PTL_NO_INIT before PtlInit.
func TestNoInit(t *testing.T) {
	for initialized() {
		t.Fatal("library initialized by another test")
	}
	_, _, err := NIInit(0, NIMatching|NIPhysical, PIDAny, nil)
	wantCode(t, err, ErrNoInit)
	wantCode(t, NIHandle(1).Fini(), ErrNoInit)
	_, err = EQHandle(5).Get()
	wantCode(t, err, ErrNoInit)
	_, err = CTHandle(5).Get()
	wantCode(t, err, ErrNoInit)
	wantCode(t, Put(0, 0, 0, NoAckReq, ProcessID{}, 0, 0, 0, 0, 0), ErrNoInit)
	wantCode(t, AtomicSync(), ErrNoInit)
	_, _, err = EQPoll([]EQHandle{1}, 0)
	wantCode(t, err, ErrNoInit)
	_, _, err = CTPoll([]CTHandle{1}, []uint64{1}, 0)
	wantCode(t, err, ErrNoInit)
	_, err = NIOf(InvalidHandle)
	wantCode(t, err, ErrNoInit)
	// Init/Fini are reference counted: two Inits need two Finis.
	ok(t, Init())
	ok(t, Init())
	Fini()
	if !initialized() {
		t.Fatal("one Fini of two Inits finalized")
	}
	Fini()
	if initialized() {
		t.Fatal("still initialized")
	}
	Fini() // extra Fini is harmless
}

func TestNIInit(t *testing.T) {
	ok(t, Init())
	defer Fini()
	for _, o := range []NIOptions{0, NIMatching, NILogical, NIMatching | NINoMatching | NILogical,
		NIMatching | NILogical | NIPhysical, NIMatching | NILogical | 1<<7} {
		_, _, err := NIInit(0, o, PIDAny, nil)
		wantCode(t, err, ErrArgInvalid)
	}
	_, _, err := NIInit(MaxInterface+1, NIMatching|NILogical, PIDAny, nil)
	wantCode(t, err, ErrArgInvalid)
	_, _, err = NIInit(0, NIMatching|NILogical, PIDMax, nil)
	wantCode(t, err, ErrArgInvalid)

	var hs []NIHandle
	for _, k := range niKinds {
		h, lim, err := NIInit(IfaceDefault, k.opts, PIDAny, &Limits{MaxPTIndex: 10, MaxEntries: 5, MaxWAWOrderedSize: 1})
		ok(t, err)
		if lim.MaxPTIndex < 249 || lim.MaxWAWOrderedSize < 64 || lim.MaxWAROrderedSize < 8 {
			t.Fatalf("limits below the 4.3 minimums: %+v", lim)
		}
		if lim.MaxEntries != 5 {
			t.Fatalf("desired max_entries not honoured: %d", lim.MaxEntries)
		}
		if lim.MaxFetchAtomicSize > lim.MaxAtomicSize {
			t.Fatal("max_fetch_atomic_size above max_atomic_size")
		}
		h2, lim2, err := NIInit(0, k.opts, 7, nil)
		ok(t, err)
		if h2 != h || lim2 != lim {
			t.Fatal("second NIInit of the same logical NI gave another handle or limits")
		}
		ok(t, h2.Fini())
		hs = append(hs, h)
	}
	for i := range hs {
		for j := range hs {
			if (i == j) != HandleIsEqual(hs[i].Handle(), hs[j].Handle()) {
				t.Fatal("four logical NIs must be distinct")
			}
		}
	}
	// The four logical NIs share the physical ID; each has its own portal table.
	p0 := must(hs[0].PhysID())
	for _, h := range hs {
		if must(h.PhysID()) != p0 {
			t.Fatal("physical ids differ between logical NIs")
		}
		if must(h.PTAlloc(0, EQNone, 3)) != 3 {
			t.Fatal("PTAlloc 3")
		}
	}
	// limits are enforced: max_entries 5
	for i := 0; i < 5; i++ {
		_ = must(hs[1].MEAppend(3, &ME{UID: UIDAny}, PriorityList, 0))
	}
	_, err = hs[1].MEAppend(3, &ME{UID: UIDAny}, PriorityList, 0)
	wantCode(t, err, ErrNoSpace)

	// the pid is taken by this process on interface 0: a new interface asking for it fails
	_, _, err = NIInit(1, NIMatching|NIPhysical, PID(p0.PID), nil)
	wantCode(t, err, ErrPIDInUse)

	for _, h := range hs {
		ok(t, h.Fini())
		wantCode(t, h.Fini(), ErrArgInvalid)
	}
}

func TestMapIDs(t *testing.T) {
	ok(t, Init())
	defer Fini()
	lm := must(func() (NIHandle, error) { h, _, err := NIInit(0, NIMatching|NILogical, PIDAny, nil); return h, err }())
	ln := must(func() (NIHandle, error) { h, _, err := NIInit(0, NINoMatching|NILogical, PIDAny, nil); return h, err }())
	pm := must(func() (NIHandle, error) { h, _, err := NIInit(0, NIMatching|NIPhysical, PIDAny, nil); return h, err }())
	defer lm.Fini()
	defer ln.Fini()
	defer pm.Fini()
	_, err := lm.GetMap(nil)
	wantCode(t, err, ErrIgnored)
	wantCode(t, pm.SetMap([]ProcessID{{}}), ErrArgInvalid)
	_, err = pm.GetMap(nil)
	wantCode(t, err, ErrArgInvalid)
	_, err = lm.ID()
	wantCode(t, err, ErrArgInvalid) // no map yet
	me := must(pm.PhysID())
	if must(pm.ID()) != me {
		t.Fatal("PtlGetId on a physical NI must give nid/pid")
	}
	m := []ProcessID{Phys(1, 1), Phys(2, 2), me, Phys(4, 4)}
	ok(t, lm.SetMap(m))
	if must(lm.ID()).Rank != 2 {
		t.Fatal("rank from map")
	}
	if must(lm.PhysID()) != me {
		t.Fatal("PtlGetPhysId on a logical NI")
	}
	// the other logical NI had no map: it gets this one
	if n := must(ln.GetMap(nil)); n != 4 {
		t.Fatalf("other logical NI map size %d", n)
	}
	buf := []ProcessID{{}, {}, {NID: 99}}
	buf = buf[:2]
	n := must(lm.GetMap(buf))
	if n != 4 || buf[0] != m[0] || buf[1] != m[1] || buf[:3][2].NID != 99 {
		t.Fatalf("GetMap partial copy: %d %v", n, buf[:3])
	}
	ok(t, lm.SetMap(m[:3])) // overwrite
	if must(lm.GetMap(nil)) != 3 {
		t.Fatal("overwrite")
	}
	if must(lm.UID()) != must(pm.UID()) {
		t.Fatal("uid differs between NIs")
	}
	// PtlNIHandle for every object kind
	q := must(lm.EQAlloc(4))
	c := must(lm.CTAlloc())
	md := must(lm.MDBind(MD{Buf: make([]byte, 8), EQ: q, CT: c}))
	pt := must(lm.PTAlloc(0, q, PTAny))
	meh := must(lm.MEAppend(pt, &ME{UID: UIDAny}, PriorityList, 0))
	leh := must(func() (LEHandle, error) {
		p2 := must(ln.PTAlloc(0, EQNone, PTAny))
		return ln.LEAppend(p2, &LE{UID: UIDAny}, PriorityList, 0)
	}())
	for _, h := range []Handle{lm.Handle(), q.Handle(), c.Handle(), md.Handle(), meh.Handle()} {
		if must(NIOf(h)) != lm {
			t.Fatalf("NIOf(%x)", h)
		}
	}
	if must(NIOf(leh.Handle())) != ln {
		t.Fatal("NIOf(le)")
	}
	_, err = NIOf(InvalidHandle)
	wantCode(t, err, ErrArgInvalid)
	ok(t, md.Release())
	_, err = NIOf(md.Handle())
	wantCode(t, err, ErrArgInvalid)
	if HandleIsEqual(md.Handle(), InvalidHandle) || !HandleIsEqual(InvalidHandle, InvalidHandle) {
		t.Fatal("HandleIsEqual")
	}
	for sr := SRIndex(0); sr < numSR; sr++ {
		if v := must(lm.Status(sr)); v != 0 {
			t.Fatalf("%v = %d", sr, v)
		}
	}
	_, err = lm.Status(numSR + 3)
	wantCode(t, err, ErrArgInvalid)
}

func TestPTAlloc(t *testing.T) {
	e := newEnv(t, niKinds[0], 1, nil)
	ni := e.ni[0]
	q := must(ni.EQAlloc(8))
	_, err := ni.PTAlloc(PTFlowCtrl, EQNone, PTAny)
	wantCode(t, err, ErrPTEQNeeded)
	_, err = ni.PTAlloc(1<<9, EQNone, PTAny)
	wantCode(t, err, ErrArgInvalid)
	_, err = ni.PTAlloc(0, EQHandle(12345), PTAny)
	wantCode(t, err, ErrArgInvalid)
	if must(ni.PTAlloc(0, q, 7)) != 7 {
		t.Fatal("specific index")
	}
	_, err = ni.PTAlloc(0, q, 7)
	wantCode(t, err, ErrPTInUse)
	_, err = ni.PTAlloc(0, q, 100000)
	wantCode(t, err, ErrArgInvalid)
	if must(ni.PTAlloc(0, EQNone, PTAny)) != 0 {
		t.Fatal("PTL_PT_ANY gives the lowest free")
	}
	_, lim, _ := NIInit(0, e.kind.opts, PIDAny, nil)
	ni.Fini()
	for i := 1; i <= lim.MaxPTIndex; i++ {
		if i != 7 {
			must(ni.PTAlloc(0, EQNone, PTIndex(i)))
		}
	}
	_, err = ni.PTAlloc(0, EQNone, PTAny)
	wantCode(t, err, ErrPTFull)
	h := e.appendEntry(0, 7, anyME(nil, 0), PriorityList, 0)
	wantCode(t, ni.PTFree(7), ErrPTInUse)
	wantCode(t, q.Free(), ErrArgInvalid) // still attached to PT 7
	ok(t, unlinkH(h))
	ok(t, ni.PTFree(7))
	wantCode(t, ni.PTFree(7), ErrArgInvalid)
	ok(t, q.Free())
	_, err = q.Get()
	wantCode(t, err, ErrArgInvalid)
	wantCode(t, ni.PTEnable(7), ErrArgInvalid)
}

func TestEQCT(t *testing.T) {
	e := newEnv(t, niKinds[1], 1, nil)
	ni := e.ni[0]
	_, err := ni.EQAlloc(0)
	wantCode(t, err, ErrArgInvalid)
	q := must(ni.EQAlloc(2))
	q2 := must(ni.EQAlloc(2))
	_, err = q.Get()
	wantCode(t, err, ErrEQEmpty)
	start := time.Now()
	_, _, err = EQPoll([]EQHandle{q, q2}, 30*time.Millisecond)
	wantCode(t, err, ErrEQEmpty)
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("EQPoll returned before its timeout")
	}
	_, _, err = EQPoll(nil, 0)
	wantCode(t, err, ErrArgInvalid)
	// three LINK events into a 2-slot EQ: the oldest is overwritten, the next Get says
	// PTL_EQ_DROPPED with a valid event, then normal.
	pt := must(ni.PTAlloc(0, q2, PTAny))
	for i := 1; i <= 3; i++ {
		e.appendEntry(0, pt, anyME(nil, 0), PriorityList, uint64(i))
	}
	ev, which, err := EQPoll([]EQHandle{q, q2}, 0)
	wantCode(t, err, ErrEQDropped)
	if which != 1 || ev.Type != EventLink || ev.UserPtr != 2 {
		t.Fatalf("which %d ev %+v", which, ev)
	}
	ev, err = q2.Get()
	if err != nil || ev.UserPtr != 3 {
		t.Fatalf("%v %+v", err, ev)
	}
	// CT
	c := must(ni.CTAlloc())
	c2 := must(ni.CTAlloc())
	if v := must(c.Get()); v != (CTEvent{}) {
		t.Fatal("CT starts at 0")
	}
	wantCode(t, c.Inc(CTEvent{1, 1}), ErrArgInvalid)
	ok(t, c.Inc(CTEvent{Success: 5}))
	ok(t, c.Inc(CTEvent{Success: ^uint64(0)})) // modulo 2^64: -1
	if v := must(c.Get()); v.Success != 4 {
		t.Fatalf("wrap: %+v", v)
	}
	_, _, err = CTPoll([]CTHandle{c, c2}, []uint64{5, 1}, 10*time.Millisecond)
	wantCode(t, err, ErrCTNoneReached)
	v, which, err := CTPoll([]CTHandle{c, c2}, []uint64{4, 0}, 0)
	if err != nil || which != 0 || v.Success != 4 {
		t.Fatalf("first reached in array order: %v %d %+v", err, which, v)
	}
	ok(t, c2.Inc(CTEvent{Failure: 1}))
	_, which, err = CTPoll([]CTHandle{c, c2}, []uint64{100, 100}, 0)
	if err != nil || which != 1 {
		t.Fatal("failure != 0 satisfies the wait")
	}
	ok(t, c.Set(CTEvent{Success: 9, Failure: 0}))
	done := make(chan CTEvent)
	go func() { v, _ := c.Wait(12); done <- v }()
	ok(t, c.Inc(CTEvent{Success: 3}))
	if v := <-done; v.Success < 12 {
		t.Fatal("CTWait")
	}
	_, _, err = CTPoll([]CTHandle{c}, []uint64{1, 2}, 0)
	wantCode(t, err, ErrArgInvalid)
	ok(t, c.CancelTriggered())
	ok(t, c.Free())
	_, err = c.Get()
	wantCode(t, err, ErrArgInvalid)
	// EQWait wakes on an event from another goroutine
	got := make(chan Event)
	go func() { ev, _ := q.Wait(); got <- ev }()
	time.Sleep(time.Millisecond)
	md := must(ni.MDBind(MD{Buf: make([]byte, 8), EQ: q}))
	ok(t, Put(md, 0, 8, NoAckReq, e.ids[0], 60, 0, 0, 77, 0)) // PT 60 not allocated: dropped; SEND still posted
	if ev := <-got; ev.Type != EventSend || ev.UserPtr != 77 {
		t.Fatalf("%+v", ev)
	}
	if must(ni.Status(SRDropCount)) != 1 {
		t.Fatal("drop on an unallocated PT counted")
	}
}

func TestListTooLong(t *testing.T) {
	e := newEnv(t, niKinds[2], 1, &Limits{MaxListSize: 3})
	pt := must(e.ni[0].PTAlloc(0, EQNone, PTAny))
	for i := 0; i < 3; i++ {
		e.appendEntry(0, pt, anyME(nil, 0), PriorityList, 0)
	}
	_, err := e.ni[0].LEAppend(pt, &LE{UID: UIDAny}, PriorityList, 0)
	wantCode(t, err, ErrListTooLong)
	e.appendEntry(0, pt, anyME(nil, 0), OverflowList, 0) // the other list has room
	// PTL_PT_ONLY_USE_ONCE binds the user: a persistent priority entry is refused
	pt2 := must(e.ni[0].PTAlloc(PTOnlyUseOnce, EQNone, PTAny))
	_, err = e.ni[0].LEAppend(pt2, &LE{UID: UIDAny}, PriorityList, 0)
	wantCode(t, err, ErrArgInvalid)
	must(e.ni[0].LEAppend(pt2, &LE{UID: UIDAny, Options: UseOnce}, PriorityList, 0))
}

// TestEQWaitOne: PtlEQWait on one EQ (Portals 4.3 §3.13.8) takes an event already there at
// its first look under the lock, PTL_EQ_DROPPED after an overflow included (§3.13.7), and
// one posted from another goroutine while it spins on the EQ's count without the lock.
func TestEQWaitOne(t *testing.T) {
	e := newEnv(t, niKinds[1], 1, nil)
	ni := e.ni[0]
	q := must(ni.EQAlloc(2))
	pt := must(ni.PTAlloc(0, q, PTAny))
	for i := 1; i <= 3; i++ {
		e.appendEntry(0, pt, anyME(nil, 0), PriorityList, uint64(i))
	}
	ev, err := q.Wait()
	wantCode(t, err, ErrEQDropped)
	if ev.Type != EventLink || ev.UserPtr != 2 {
		t.Fatalf("first event %+v, want the LINK of entry 2", ev)
	}
	if ev, err = q.Wait(); err != nil || ev.UserPtr != 3 {
		t.Fatalf("%v %+v, want the LINK of entry 3", err, ev)
	}
	done := make(chan Event, 1)
	go func() {
		ev, err := q.Wait()
		if err != nil {
			t.Errorf("EQWait: %v", err)
		}
		done <- ev
	}()
	time.Sleep(2 * time.Millisecond) // most likely spinning by now; either way it must return the event
	e.appendEntry(0, pt, anyME(nil, 0), PriorityList, 4)
	select {
	case ev = <-done:
		if ev.Type != EventLink || ev.UserPtr != 4 {
			t.Fatalf("event %+v, want the LINK of entry 4", ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("EQWait missed an event posted while it waited")
	}
	if _, err := q.Get(); !errors.Is(err, ErrEQEmpty) {
		t.Fatalf("EQ not empty after the waits: %v", err)
	}
}
