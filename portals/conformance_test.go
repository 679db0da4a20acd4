package portals

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// forAll runs body for every NI kind, on one physical NI talking to itself ("self") and
// between two physical NIs of this process (interfaces 0 and 1: two pids, through the
// transport).
func forAll(t *testing.T, body func(t *testing.T, e *env, ini, tgt int)) {
	for _, k := range niKinds {
		t.Run(k.name+"/self", func(t *testing.T) { body(t, newEnv(t, k, 1, nil), 0, 0) })
		t.Run(k.name+"/pair", func(t *testing.T) { body(t, newEnv(t, k, 2, nil), 0, 1) })
	}
}

// collect takes n events from q and indexes them by kind (order between an operation's
// initiator events is not specified, §3.13).
func collect(t *testing.T, q EQHandle, n int) map[EventKind]Event {
	t.Helper()
	m := map[EventKind]Event{}
	for i := 0; i < n; i++ {
		ev := nextEvent(t, q)
		if _, dup := m[ev.Type]; dup {
			t.Fatalf("two %v events", ev.Type)
		}
		m[ev.Type] = ev
	}
	return m
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b
}

func TestPutGet(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		qT := must(e.ni[tgt].EQAlloc(64))
		cT := must(e.ni[tgt].CTAlloc())
		pt := must(e.ni[tgt].PTAlloc(0, qT, PTAny))
		tbuf := make([]byte, 64)
		me := anyME(tbuf, EventCTComm)
		me.CT, me.MatchBits, me.IgnoreBits = cT, 0x5, 0
		if e.matching {
			// matches the initiator exactly
			me.MatchID = e.ids[ini]
			if e.kind.opts&NILogical == 0 {
				me.MatchID.Rank = 0
			}
		}
		e.appendEntry(tgt, pt, me, PriorityList, 900)
		expectKind(t, qT, EventLink)

		qI := must(e.ni[ini].EQAlloc(64))
		cI := must(e.ni[ini].CTAlloc())
		src := pattern(64, 1)
		md := must(e.ni[ini].MDBind(MD{Buf: src, EQ: qI, CT: cI, Options: MDEventCTSend | MDEventCTAck | MDEventCTReply}))
		ok(t, Put(md, 4, 16, AckReqFull, e.ids[tgt], pt, 0x5, 8, 11, 0xabc))
		evs := collect(t, qI, 2)
		if s := evs[EventSend]; s.UserPtr != 11 || s.MLength != 16 || s.NIFail != NIOK {
			t.Fatalf("SEND %+v", s)
		}
		if a := evs[EventAck]; a.UserPtr != 11 || a.MLength != 16 || a.RemoteOffset != 8 || a.List != PriorityList || a.NIFail != NIOK {
			t.Fatalf("ACK %+v", a)
		}
		ev := expectKind(t, qT, EventPut)
		wantBits := MatchBits(0x5)
		if !e.matching {
			wantBits = 0
		}
		uid := must(e.ni[ini].UID())
		if ev.UserPtr != 900 || ev.MLength != 16 || ev.RLength != 16 || ev.RemoteOffset != 8 || ev.HdrData != 0xabc ||
			ev.MatchBits != wantBits || ev.Initiator != e.ids[ini] || ev.UID != uid || ev.PTIndex != pt ||
			ev.List != PriorityList || ev.NIFail != NIOK || &ev.Start[0] != &tbuf[8] || len(ev.Start) != 16 {
			t.Fatalf("PUT %+v (want initiator %v)", ev, e.ids[ini])
		}
		if !bytes.Equal(tbuf[8:24], src[4:20]) || tbuf[7] != 0 || tbuf[24] != 0 {
			t.Fatal("put data")
		}
		if v := must(cT.Get()); v.Success != 1 {
			t.Fatalf("target CT %+v", v)
		}
		if v := ctWait(t, cI, 2); v.Success != 2 || v.Failure != 0 {
			t.Fatalf("initiator CT %+v", v)
		}

		// Get 8 bytes from remote offset 10 into local offset 40.
		ok(t, Get(md, 40, 8, e.ids[tgt], pt, 0x5, 10, 12))
		r := expectKind(t, qI, EventReply)
		if r.UserPtr != 12 || r.MLength != 8 || r.RemoteOffset != 10 || r.NIFail != NIOK {
			t.Fatalf("REPLY %+v", r)
		}
		if !bytes.Equal(src[40:48], tbuf[10:18]) {
			t.Fatal("get data")
		}
		g := expectKind(t, qT, EventGet)
		if g.MLength != 8 || g.RemoteOffset != 10 || g.HdrData != 0 {
			t.Fatalf("GET %+v", g)
		}

		// Truncation: 64 bytes at remote offset 40 → 24 bytes; beyond the end → 0 bytes.
		ok(t, Put(md, 0, 64, AckReqFull, e.ids[tgt], pt, 0x5, 40, 13, 0))
		a := collect(t, qI, 2)[EventAck]
		if a.MLength != 24 || a.NIFail != NIOK {
			t.Fatalf("truncated ACK %+v", a)
		}
		if ev := expectKind(t, qT, EventPut); ev.RLength != 64 || ev.MLength != 24 {
			t.Fatalf("truncated PUT %+v", ev)
		}
		ok(t, Put(md, 0, 8, AckReqFull, e.ids[tgt], pt, 0x5, 100, 14, 0))
		if a := collect(t, qI, 2)[EventAck]; a.MLength != 0 || a.NIFail != NIOK {
			t.Fatalf("beyond-end ACK %+v", a)
		}
		expectKind(t, qT, EventPut)
		// Zero-length put.
		ok(t, Put(md, 0, 0, AckReqFull, e.ids[tgt], pt, 0x5, 0, 15, 0))
		collect(t, qI, 2)
		expectKind(t, qT, EventPut)

		// Ack kinds: CT_ACK_REQ counts without a full event; CT_BYTES counts mlength;
		// OC_ACK_REQ counts 1; NO_ACK_REQ nothing.
		c2 := must(e.ni[ini].CTAlloc())
		md2 := must(e.ni[ini].MDBind(MD{Buf: src, EQ: qI, CT: c2, Options: MDEventCTAck | MDEventCTBytes | MDEventSendDisable}))
		ok(t, Put(md2, 0, 5, CTAckReq, e.ids[tgt], pt, 0x5, 0, 0, 0))
		if v := ctWait(t, c2, 5); v.Success != 5 {
			t.Fatalf("CT_BYTES ack %+v", v)
		}
		ok(t, Put(md2, 0, 5, OCAckReq, e.ids[tgt], pt, 0x5, 0, 0, 0))
		if v := ctWait(t, c2, 6); v.Success != 6 {
			t.Fatalf("OC ack %+v", v)
		}
		ok(t, Put(md2, 0, 5, NoAckReq, e.ids[tgt], pt, 0x5, 0, 0, 0))
		for i := 0; i < 3; i++ {
			expectKind(t, qT, EventPut)
		}
		expectEmpty(t, qI) // no SEND (disabled), no ACK events for counting acks
		if v := must(c2.Get()); v.Success != 6 {
			t.Fatalf("NO_ACK_REQ counted: %+v", v)
		}

		// Bad arguments.
		wantCode(t, Put(md, 60, 8, AckReqFull, e.ids[tgt], pt, 0, 0, 0, 0), ErrArgInvalid)
		wantCode(t, Put(md, 0, 8, AckReq(9), e.ids[tgt], pt, 0, 0, 0, 0), ErrArgInvalid)
		wantCode(t, Get(md, ^uint64(0), 2, e.ids[tgt], pt, 0, 0, 0), ErrArgInvalid)
		wantCode(t, Put(MDHandle(InvalidHandle), 0, 8, AckReqFull, e.ids[tgt], pt, 0, 0, 0, 0), ErrArgInvalid)
		if e.kind.opts&NILogical != 0 {
			wantCode(t, Put(md, 0, 8, AckReqFull, RankID(7), pt, 0, 0, 0, 0), ErrArgInvalid)
		}
		for sr := SRIndex(0); sr < numSR; sr++ {
			if v := must(e.ni[tgt].Status(sr)); v != 0 {
				t.Fatalf("%v = %d", sr, v)
			}
		}
	})
}

func TestIovec(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		qT := must(e.ni[tgt].EQAlloc(16))
		pt := must(e.ni[tgt].PTAlloc(0, qT, PTAny))
		a, b, c := make([]byte, 5), make([]byte, 3), make([]byte, 8)
		me := anyME(nil, EntryIovec)
		me.Iov = []IOVec{a, b, c}
		e.appendEntry(tgt, pt, me, PriorityList, 0)
		expectKind(t, qT, EventLink)
		qI := must(e.ni[ini].EQAlloc(16))
		s1, s2 := []byte{1, 2, 3}, []byte{4, 5, 6, 7, 8, 9, 10}
		md := must(e.ni[ini].MDBind(MD{Iov: []IOVec{s1, s2}, Options: MDIovec, EQ: qI}))
		ok(t, Put(md, 1, 9, AckReqFull, e.ids[tgt], pt, 0, 3, 0, 0))
		collect(t, qI, 2)
		ev := expectKind(t, qT, EventPut)
		got := append(append(append([]byte{}, a...), b...), c...)
		want := make([]byte, 16)
		copy(want[3:], []byte{2, 3, 4, 5, 6, 7, 8, 9, 10})
		if !bytes.Equal(got, want) || ev.MLength != 9 || &ev.Start[0] != &a[3] {
			t.Fatalf("iovec put: %v, event %+v", got, ev)
		}
		dst := must(e.ni[ini].MDBind(MD{Iov: []IOVec{make([]byte, 4), make([]byte, 6)}, Options: MDIovec, EQ: qI}))
		ok(t, Get(dst, 0, 10, e.ids[tgt], pt, 0, 2, 0))
		expectKind(t, qI, EventReply)
		expectKind(t, qT, EventGet)
	})
}

func TestMatchBits(t *testing.T) {
	e := newEnv(t, niKinds[1], 2, nil) // matching, physical
	q := must(e.ni[1].EQAlloc(64))
	pt := must(e.ni[1].PTAlloc(0, q, PTAny))
	other := Phys(e.phys[0].NID, e.phys[0].PID+1000)
	type entrySpec struct {
		bits, ignore MatchBits
		id           ProcessID
	}
	entries := []entrySpec{
		{0xff00, 0x00ff, Phys(NIDAny, PIDAny)},   // 0: 0xffXX
		{0x1, 0, other},                          // 1: 0x1 from another pid only
		{0x1, 0, Phys(e.phys[0].NID, PIDAny)},    // 2: 0x1 from our nid
		{0, ^MatchBits(0), Phys(NIDAny, PIDAny)}, // 3: everything
	}
	for i, s := range entries {
		me := anyME(nil, 0)
		me.MatchBits, me.IgnoreBits, me.MatchID = s.bits, s.ignore, s.id
		e.appendEntry(1, pt, me, PriorityList, uint64(i))
		expectKind(t, q, EventLink)
	}
	md := must(e.ni[0].MDBind(MD{Buf: make([]byte, 1)}))
	for _, c := range []struct {
		bits MatchBits
		want uint64
	}{{0xff12, 0}, {0xfe12, 3}, {0x1, 2}, {0xffffffffffffffff, 3}, {0xff00, 0}, {0x2, 3}} {
		ok(t, Put(md, 0, 1, NoAckReq, e.ids[1], pt, c.bits, 0, 0, 0))
		if ev := expectKind(t, q, EventPut); ev.UserPtr != c.want || ev.MatchBits != c.bits {
			t.Fatalf("bits %#x matched entry %d, want %d", c.bits, ev.UserPtr, c.want)
		}
	}
}

func TestNoTruncate(t *testing.T) {
	e := newEnv(t, niKinds[0], 1, nil)
	q := must(e.ni[0].EQAlloc(64))
	pt := must(e.ni[0].PTAlloc(0, q, PTAny))
	e.appendEntry(0, pt, anyME(make([]byte, 4), NoTruncate), PriorityList, 1)
	e.appendEntry(0, pt, anyME(make([]byte, 16), 0), PriorityList, 2)
	expectKind(t, q, EventLink)
	expectKind(t, q, EventLink)
	md := must(e.ni[0].MDBind(MD{Buf: make([]byte, 8)}))
	for _, c := range []struct {
		n, roff uint64
		want    uint64
	}{{8, 0, 2}, {4, 0, 1}, {0, 0, 1}, {2, 3, 2}, {1, 3, 1}} {
		ok(t, Put(md, 0, c.n, NoAckReq, e.ids[0], pt, 0, c.roff, 0, 0))
		if ev := expectKind(t, q, EventPut); ev.UserPtr != c.want {
			t.Fatalf("len %d off %d matched %d want %d", c.n, c.roff, ev.UserPtr, c.want)
		}
	}
}

func TestOverflowUnexpected(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		q := must(e.ni[tgt].EQAlloc(64))
		pt := must(e.ni[tgt].PTAlloc(0, q, PTAny))
		ovf := make([]byte, 64)
		cO := must(e.ni[tgt].CTAlloc())
		ome := anyME(ovf, EventCTComm|ManageLocal)
		ome.CT = cO
		if !e.matching {
			ome.Options &^= ManageLocal
		}
		oh := e.appendEntry(tgt, pt, ome, OverflowList, 500)
		expectKind(t, q, EventLink)
		qI := must(e.ni[ini].EQAlloc(64))
		md := must(e.ni[ini].MDBind(MD{Buf: pattern(8, 10), EQ: qI}))
		for i := 0; i < 3; i++ {
			roff := uint64(i * 8)
			ok(t, Put(md, 0, 8, AckReqFull, e.ids[tgt], pt, 7, roff, uint64(i), uint64(100+i)))
			if a := collect(t, qI, 2)[EventAck]; a.List != OverflowList || a.RemoteOffset != roff {
				t.Fatalf("ACK from overflow %+v", a)
			}
			if ev := expectKind(t, q, EventPut); ev.List != OverflowList || ev.UserPtr != 500 {
				t.Fatalf("PUT into overflow %+v", ev)
			}
		}
		ctWait(t, cO, 3)
		wantCode(t, unlinkH(oh), ErrInUse) // unexpected headers refer to it

		// a use-once priority append takes the first header and is not linked
		cP := must(e.ni[tgt].CTAlloc())
		pme := anyME(make([]byte, 4), UseOnce|EventCTOverflow)
		pme.CT = cP
		ph := e.appendEntry(tgt, pt, pme, PriorityList, 600)
		ev := expectKind(t, q, EventPutOverflow)
		if ev.UserPtr != 600 || ev.HdrData != 100 || ev.MLength != 8 || ev.RLength != 8 || &ev.Start[0] != &ovf[0] ||
			ev.List != OverflowList || ev.Initiator != e.ids[ini] {
			t.Fatalf("PUT_OVERFLOW %+v", ev)
		}
		expectKind(t, q, EventAutoUnlink)
		expectEmpty(t, q) // not linked: no LINK
		wantCode(t, unlinkH(ph), ErrInUse)
		if v := must(cP.Get()); v.Success != 1 {
			t.Fatalf("CT_OVERFLOW %+v", v)
		}
		// a persistent append takes the other two in order, then links
		e.appendEntry(tgt, pt, anyME(make([]byte, 4), 0), PriorityList, 700)
		if ev := expectKind(t, q, EventPutOverflow); ev.HdrData != 101 || &ev.Start[0] != &ovf[8] {
			t.Fatalf("%+v", ev)
		}
		if ev := expectKind(t, q, EventPutOverflow); ev.HdrData != 102 {
			t.Fatalf("%+v", ev)
		}
		expectKind(t, q, EventLink)
		err := unlinkH(ph)
		wantCode(t, err, ErrArgInvalid) // the append after its last event ended the window
		ok(t, unlinkH(oh))              // headers drained
	})
}

func TestOverflowAutoFree(t *testing.T) {
	e := newEnv(t, niKinds[0], 1, nil)
	q := must(e.ni[0].EQAlloc(64))
	pt := must(e.ni[0].PTAlloc(0, q, PTAny))
	e.appendEntry(0, pt, anyME(make([]byte, 16), UseOnce), OverflowList, 1)
	expectKind(t, q, EventLink)
	md := must(e.ni[0].MDBind(MD{Buf: make([]byte, 8)}))
	ok(t, Put(md, 0, 8, NoAckReq, e.ids[0], pt, 0, 0, 0, 0))
	expectKind(t, q, EventPut)
	expectKind(t, q, EventAutoUnlink)
	expectEmpty(t, q) // AUTO_FREE waits for the header
	ok(t, e.ni[0].MESearch(pt, &ME{UID: UIDAny, Options: UseOnce, IgnoreBits: ^MatchBits(0), MatchID: Phys(NIDAny, PIDAny)}, SearchDelete, 2))
	if ev := expectKind(t, q, EventPutOverflow); ev.UserPtr != 2 {
		t.Fatalf("%+v", ev)
	}
	if ev := expectKind(t, q, EventAutoFree); ev.UserPtr != 1 {
		t.Fatalf("%+v", ev)
	}
	// UNEXPECTED_HDR_DISABLE: no header kept, AUTO_UNLINK and no AUTO_FREE
	e.appendEntry(0, pt, anyME(make([]byte, 16), UseOnce|UnexpectedHdrDisable), OverflowList, 3)
	expectKind(t, q, EventLink)
	ok(t, Put(md, 0, 8, NoAckReq, e.ids[0], pt, 0, 0, 0, 0))
	expectKind(t, q, EventPut)
	expectKind(t, q, EventAutoUnlink)
	e.search(0, pt, ME{UID: UIDAny, IgnoreBits: ^MatchBits(0), MatchID: Phys(NIDAny, PIDAny)}, SearchOnly, 4)
	if ev := expectKind(t, q, EventSearch); ev.NIFail != NINoMatch {
		t.Fatalf("%+v", ev)
	}
	expectEmpty(t, q)
}

func TestSearch(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		q := must(e.ni[tgt].EQAlloc(64))
		pt := must(e.ni[tgt].PTAlloc(0, q, PTAny))
		e.appendEntry(tgt, pt, anyME(make([]byte, 64), 0), OverflowList, 1)
		expectKind(t, q, EventLink)
		md := must(e.ni[ini].MDBind(MD{Buf: make([]byte, 8)}))
		for i := 0; i < 3; i++ {
			ok(t, Put(md, 0, 8, NoAckReq, e.ids[tgt], pt, MatchBits(i%2), uint64(8*i), 0, uint64(i)))
			expectKind(t, q, EventPut)
		}
		c := must(e.ni[tgt].CTAlloc())
		s := anyME(nil, 0)
		s.CT = c
		if e.matching {
			s.MatchBits, s.IgnoreBits = 0, 0 // matches the puts with bits 0: #0 and #2
		}
		want := []uint64{0, 2}
		if !e.matching {
			want = []uint64{0, 1, 2}
		}
		// SEARCH_ONLY, persistent: one SEARCH per hit, then NO_MATCH; headers stay
		e.search(tgt, pt, s, SearchOnly, 9)
		for _, w := range want {
			if ev := expectKind(t, q, EventSearch); ev.NIFail != NIOK || ev.HdrData != w || ev.UserPtr != 9 {
				t.Fatalf("SEARCH %+v want hdr %d", ev, w)
			}
		}
		if ev := expectKind(t, q, EventSearch); ev.NIFail != NINoMatch {
			t.Fatalf("%+v", ev)
		}
		if v := must(c.Get()); v.Success != uint64(len(want)) || v.Failure != 1 {
			t.Fatalf("persistent search CT %+v", v)
		}
		// SEARCH_DELETE use-once: the first hit, removed, CT success+1 and no NO_MATCH
		ok(t, c.Set(CTEvent{}))
		s.Options |= UseOnce
		e.search(tgt, pt, s, SearchDelete, 10)
		if ev := expectKind(t, q, EventPutOverflow); ev.HdrData != want[0] {
			t.Fatalf("%+v", ev)
		}
		expectEmpty(t, q)
		if v := must(c.Get()); v.Success != 1 || v.Failure != 0 {
			t.Fatalf("use-once search CT %+v", v)
		}
		// persistent delete takes the rest; a further use-once search finds nothing
		s.Options &^= UseOnce
		e.search(tgt, pt, s, SearchDelete, 11)
		for range want[1:] {
			expectKind(t, q, EventPutOverflow)
		}
		expectKind(t, q, EventSearch)
		ok(t, c.Set(CTEvent{}))
		s.Options |= UseOnce
		e.search(tgt, pt, s, SearchOnly, 12)
		if ev := expectKind(t, q, EventSearch); ev.NIFail != NINoMatch || ev.UserPtr != 12 {
			t.Fatalf("%+v", ev)
		}
		if v := must(c.Get()); v.Success != 0 || v.Failure != 1 {
			t.Fatalf("empty search CT %+v", v)
		}
		for sr := SRIndex(0); sr < numSR; sr++ {
			if v := must(e.ni[tgt].Status(sr)); v != 0 {
				t.Fatalf("search touched %v", sr)
			}
		}
	})
}

func TestManageLocal(t *testing.T) {
	for _, k := range niKinds[:2] {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t, k, 2, nil)
			q := must(e.ni[1].EQAlloc(64))
			pt := must(e.ni[1].PTAlloc(0, q, PTAny))
			me := anyME(make([]byte, 32), ManageLocal)
			me.MinFree = 8
			e.appendEntry(1, pt, me, PriorityList, 1)
			expectKind(t, q, EventLink)
			qI := must(e.ni[0].EQAlloc(64))
			md := must(e.ni[0].MDBind(MD{Buf: pattern(10, 1), EQ: qI, Options: MDEventSendDisable}))
			for i, off := range []uint64{0, 10, 20} {
				ok(t, Put(md, 0, 10, AckReqFull, e.ids[1], pt, 0, 999, 0, 0))
				if a := expectKind(t, qI, EventAck); a.RemoteOffset != off || a.MLength != 10 {
					t.Fatalf("put %d: ACK %+v", i, a)
				}
				if ev := expectKind(t, q, EventPut); ev.RemoteOffset != 999 || ev.MLength != 10 {
					t.Fatalf("PUT %+v", ev)
				}
			}
			expectKind(t, q, EventAutoUnlink) // 32-30 < min_free 8
			// LOCAL_INC_UH_RLENGTH on an append from the unexpected list
			e.appendEntry(1, pt, anyME(make([]byte, 64), 0), OverflowList, 2)
			expectKind(t, q, EventLink)
			for i := 0; i < 3; i++ {
				ok(t, Put(md, 0, 10, NoAckReq, e.ids[1], pt, 0, 0, 0, 0))
				expectKind(t, q, EventPut)
			}
			inc := anyME(make([]byte, 25), ManageLocal|LocalIncUHRLength)
			inc.MinFree = 1
			e.appendEntry(1, pt, inc, PriorityList, 3)
			expectKind(t, q, EventPutOverflow)
			expectKind(t, q, EventPutOverflow)
			expectKind(t, q, EventPutOverflow)
			expectKind(t, q, EventAutoUnlink) // offsets 10, 20 leave >= 1 free, 30 does not: not linked
			expectEmpty(t, q)
		})
	}
}

func TestPermissions(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		q := must(e.ni[tgt].EQAlloc(64))
		pt := must(e.ni[tgt].PTAlloc(0, q, PTAny))
		uid := must(e.ni[ini].UID())
		tbuf := make([]byte, 8)
		bad := anyME(tbuf, UseOnce)
		bad.UID = uid + 1
		h := e.appendEntry(tgt, pt, bad, PriorityList, 1)
		expectKind(t, q, EventLink)
		qI := must(e.ni[ini].EQAlloc(64))
		md := must(e.ni[ini].MDBind(MD{Buf: pattern(8, 1), EQ: qI, Options: MDEventSendDisable}))
		ok(t, Put(md, 0, 8, AckReqFull, e.ids[tgt], pt, 0, 0, 0, 0))
		if a := expectKind(t, qI, EventAck); a.NIFail != NIPermViolation {
			t.Fatalf("%+v", a)
		}
		ok(t, Get(md, 0, 8, e.ids[tgt], pt, 0, 0, 0))
		if a := expectKind(t, qI, EventReply); a.NIFail != NIPermViolation {
			t.Fatalf("%+v", a)
		}
		// OC_ACK_REQ: a permission violation is not an operational failure (§3.15.1)
		cOC := must(e.ni[ini].CTAlloc())
		mdOC := must(e.ni[ini].MDBind(MD{Buf: make([]byte, 8), CT: cOC, Options: MDEventCTAck}))
		ok(t, Put(mdOC, 0, 8, OCAckReq, e.ids[tgt], pt, 0, 0, 0, 0))
		if v := ctWait(t, cOC, 1); v.Success != 1 || v.Failure != 0 {
			t.Fatalf("OC ack after a permission violation: %+v", v)
		}
		if pv, dc := must(e.ni[tgt].Status(SRPermissionViolations)), must(e.ni[tgt].Status(SRDropCount)); pv != 3 || dc != 0 {
			t.Fatalf("status registers after permission violations: %d %d", pv, dc)
		}
		expectEmpty(t, q)
		if !bytes.Equal(tbuf, make([]byte, 8)) {
			t.Fatal("buffer written")
		}
		ok(t, unlinkH(h)) // still linked (use-once not consumed)

		// operation permissions: put needs OP_PUT, get OP_GET, fetch/swap both
		getOnly := anyME(tbuf, 0)
		getOnly.Options = OpGet
		h = e.appendEntry(tgt, pt, getOnly, PriorityList, 2)
		expectKind(t, q, EventLink)
		ok(t, Put(md, 0, 8, AckReqFull, e.ids[tgt], pt, 0, 0, 0, 0))
		if a := expectKind(t, qI, EventAck); a.NIFail != NIOpViolation {
			t.Fatalf("%+v", a)
		}
		ok(t, Atomic(md, 0, 8, AckReqFull, e.ids[tgt], pt, 0, 0, 0, 0, OpSum, Int64))
		if a := expectKind(t, qI, EventAck); a.NIFail != NIOpViolation {
			t.Fatalf("%+v", a)
		}
		ok(t, FetchAtomic(md, 0, md, 0, 8, e.ids[tgt], pt, 0, 0, 0, 0, OpSum, Int64))
		if a := expectKind(t, qI, EventReply); a.NIFail != NIOpViolation {
			t.Fatalf("%+v", a)
		}
		ok(t, Get(md, 0, 8, e.ids[tgt], pt, 0, 0, 0))
		if a := expectKind(t, qI, EventReply); a.NIFail != NIOK {
			t.Fatalf("%+v", a)
		}
		expectKind(t, q, EventGet)
		ok(t, unlinkH(h))
		putOnly := anyME(tbuf, 0)
		putOnly.Options = OpPut
		e.appendEntry(tgt, pt, putOnly, PriorityList, 3)
		expectKind(t, q, EventLink)
		ok(t, Swap(md, 0, md, 0, 8, e.ids[tgt], pt, 0, 0, 0, 0, nil, OpSwap, Int64))
		if a := expectKind(t, qI, EventReply); a.NIFail != NIOpViolation {
			t.Fatalf("%+v", a)
		}
		if must(e.ni[tgt].Status(SROperationViolations)) != 4 || must(e.ni[tgt].Status(SRDropCount)) != 0 {
			t.Fatal("operation violations")
		}
	})
}

func TestDropNoMatch(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		q := must(e.ni[tgt].EQAlloc(8))
		pt := must(e.ni[tgt].PTAlloc(0, q, PTAny))
		qI := must(e.ni[ini].EQAlloc(8))
		c := must(e.ni[ini].CTAlloc())
		md := must(e.ni[ini].MDBind(MD{Buf: make([]byte, 8), EQ: qI, CT: c, Options: MDEventSendDisable | MDEventCTAck | MDEventCTReply}))
		ok(t, Put(md, 0, 8, AckReqFull, e.ids[tgt], pt, 0, 0, 0, 0))
		ok(t, Get(md, 0, 8, e.ids[tgt], pt, 0, 0, 0))
		ok(t, Put(md, 0, 8, OCAckReq, e.ids[tgt], pt, 0, 0, 0, 0)) // OC: completion reported
		ctWait(t, c, 1)
		// no ACK or REPLY for the dropped messages (§3.13.3)
		if ev, err := qI.Get(); !errors.Is(err, ErrEQEmpty) {
			t.Fatalf("event %+v", ev)
		}
		if v := must(e.ni[tgt].Status(SRDropCount)); v != 3 {
			t.Fatalf("drop count %d", v)
		}
		// the get never completes: the MD stays in use
		wantCode(t, md.Release(), ErrInUse)
		expectEmpty(t, q)
	})
}

func TestFlowControl(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		q := must(e.ni[tgt].EQAlloc(2))
		pt := must(e.ni[tgt].PTAlloc(PTFlowCtrl|PTAllocDisabled, q, PTAny))
		qI := must(e.ni[ini].EQAlloc(64))
		md := must(e.ni[ini].MDBind(MD{Buf: make([]byte, 8), EQ: qI, Options: MDEventSendDisable}))
		put := func(want NIFail) {
			t.Helper()
			ok(t, Put(md, 0, 8, AckReqFull, e.ids[tgt], pt, 0, 0, 0, 0))
			if a := expectKind(t, qI, EventAck); a.NIFail != want {
				t.Fatalf("ACK %v want %v", a.NIFail, want)
			}
		}
		put(NIPTDisabled) // allocated disabled
		expectEmpty(t, q) // PTDisable/ALLOC_DISABLED post no PT_DISABLED
		ok(t, e.ni[tgt].PTEnable(pt))
		put(NIPTDisabled) // no entry: flow control
		if ev := expectKind(t, q, EventPTDisabled); ev.PTIndex != pt {
			t.Fatalf("%+v", ev)
		}
		tbuf := make([]byte, 8)
		e.appendEntry(tgt, pt, anyME(tbuf, EventLinkDisable), PriorityList, 0) // appends work while disabled
		put(NIPTDisabled)
		ok(t, e.ni[tgt].PTEnable(pt))
		put(NIOK)
		put(NIOK) // the EQ (2 events, and a slot kept for PT_DISABLED) is full now
		expectKind(t, q, EventPut)
		put(NIOK)
		put(NIPTDisabled) // full again: flow control
		expectKind(t, q, EventPut)
		expectKind(t, q, EventPut)
		expectKind(t, q, EventPTDisabled)
		ok(t, e.ni[tgt].PTDisable(pt))
		ok(t, e.ni[tgt].PTEnable(pt))
		put(NIOK)
		expectKind(t, q, EventPut)
	})
}

func TestUnlinkUseOnce(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		q := must(e.ni[tgt].EQAlloc(64))
		pt := must(e.ni[tgt].PTAlloc(0, q, PTAny))
		h1 := e.appendEntry(tgt, pt, anyME(make([]byte, 8), UseOnce|EventUnlinkDisable), PriorityList, 1)
		h2 := e.appendEntry(tgt, pt, anyME(make([]byte, 8), UseOnce), PriorityList, 2)
		expectKind(t, q, EventLink)
		expectKind(t, q, EventLink)
		md := must(e.ni[ini].MDBind(MD{Buf: make([]byte, 8)}))
		for _, w := range []uint64{1, 2} {
			ok(t, Put(md, 0, 8, NoAckReq, e.ids[tgt], pt, 0, 0, 0, 0))
			if ev := expectKind(t, q, EventPut); ev.UserPtr != w {
				t.Fatalf("%+v", ev)
			}
		}
		if ev := expectKind(t, q, EventAutoUnlink); ev.UserPtr != 2 {
			t.Fatalf("%+v", ev)
		}
		wantCode(t, unlinkH(h1), ErrInUse)
		wantCode(t, unlinkH(h2), ErrInUse)
		h3 := e.appendEntry(tgt, pt, anyME(nil, EventLinkDisable), PriorityList, 3)
		wantCode(t, unlinkH(h1), ErrArgInvalid)
		ok(t, unlinkH(h3))
		wantCode(t, unlinkH(h3), ErrArgInvalid)
		expectEmpty(t, q)
	})
}

func TestEventSuppression(t *testing.T) {
	e := newEnv(t, niKinds[0], 1, nil)
	q := must(e.ni[0].EQAlloc(64))
	pt := must(e.ni[0].PTAlloc(0, q, PTAny))
	c := must(e.ni[0].CTAlloc())
	me := anyME(make([]byte, 8), EventLinkDisable|EventCommDisable|EventCTComm|EventCTBytes|UseOnce|EventUnlinkDisable)
	me.CT = c
	e.appendEntry(0, pt, me, PriorityList, 0)
	cI := must(e.ni[0].CTAlloc())
	md := must(e.ni[0].MDBind(MD{Buf: make([]byte, 8), EQ: q, CT: cI, Options: MDEventSuccessDisable | MDEventCTSend | MDEventCTAck}))
	ok(t, Put(md, 0, 6, AckReqFull, e.ids[0], pt, 0, 0, 0, 0))
	expectEmpty(t, q)
	if v := must(c.Get()); v.Success != 6 {
		t.Fatalf("CT_BYTES %+v", v)
	}
	if v := must(cI.Get()); v.Success != 2 {
		t.Fatalf("initiator CT %+v", v)
	}
	// a failure is still reported with SUCCESS_DISABLE: no entry now (use-once gone), but
	// an unallocated PT gives an ACK with PTL_NI_DROPPED
	ok(t, Put(md, 0, 6, AckReqFull, e.ids[0], 200, 0, 0, 0, 0))
	if ev := expectKind(t, q, EventAck); ev.NIFail != NIDropped {
		t.Fatalf("%+v", ev)
	}
	if v := must(cI.Get()); v.Success != 3 || v.Failure != 1 {
		t.Fatalf("initiator CT after failure %+v", v)
	}
}

func TestMDRelease(t *testing.T) {
	e := newEnv(t, niKinds[2], 1, nil)
	q := must(e.ni[0].EQAlloc(8))
	md := must(e.ni[0].MDBind(MD{Buf: make([]byte, 8), EQ: q}))
	_, err := e.ni[0].MDBind(MD{Options: 1 << 15})
	wantCode(t, err, ErrArgInvalid)
	_, err = e.ni[0].MDBind(MD{EQ: EQHandle(InvalidHandle)})
	wantCode(t, err, ErrArgInvalid)
	ok(t, md.Release())
	wantCode(t, md.Release(), ErrArgInvalid)
	_, err = e.ni[0].MEAppend(0, &ME{}, PriorityList, 0)
	wantCode(t, err, ErrArgInvalid) // matching call on a non-matching NI
	pt := must(e.ni[0].PTAlloc(0, EQNone, PTAny))
	_, err = e.ni[0].LEAppend(pt, &LE{Options: ManageLocal}, PriorityList, 0)
	wantCode(t, err, ErrArgInvalid)
	_, err = e.ni[0].LEAppend(pt, &LE{}, List(5), 0)
	wantCode(t, err, ErrArgInvalid)
	_, err = e.ni[0].LEAppend(pt, nil, PriorityList, 0)
	wantCode(t, err, ErrArgInvalid)
	wantCode(t, e.ni[0].LESearch(pt, &LE{}, SearchOp(4), 0), ErrArgInvalid)
	_, err = e.ni[0].LEAppend(pt+1, &LE{}, PriorityList, 0)
	wantCode(t, err, ErrArgInvalid)
}

func TestEQPollThreads(t *testing.T) {
	e := newEnv(t, niKinds[3], 2, nil)
	q := must(e.ni[1].EQAlloc(1024))
	pt := must(e.ni[1].PTAlloc(0, q, PTAny))
	e.appendEntry(1, pt, anyME(make([]byte, 8), EventLinkDisable), PriorityList, 0)
	const n = 200
	got := make(chan uint64, n)
	for w := 0; w < 4; w++ {
		go func() {
			for {
				ev, _, err := EQPoll([]EQHandle{q}, 10*time.Second)
				if err != nil {
					return
				}
				got <- ev.HdrData
			}
		}()
	}
	md := must(e.ni[0].MDBind(MD{Buf: make([]byte, 8)}))
	for i := 0; i < n; i++ {
		ok(t, Put(md, 0, 8, NoAckReq, e.ids[1], pt, 0, 0, 0, uint64(i)))
	}
	seen := make([]bool, n)
	for i := 0; i < n; i++ {
		select {
		case h := <-got:
			if seen[h] {
				t.Fatalf("event %d consumed twice", h)
			}
			seen[h] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d events", i, n)
		}
	}
}

// A request reaching a logical NI before its PtlSetMap is held and processed when the map
// is set (a peer may learn the map first).
func TestEarlyBeforeMap(t *testing.T) {
	ok(t, Init())
	defer Fini()
	var nis [2]NIHandle
	var ids []ProcessID
	for i := range nis {
		h, _, err := NIInit(Interface(i), NIMatching|NILogical, PIDAny, nil)
		ok(t, err)
		defer h.Fini()
		nis[i] = h
		ids = append(ids, must(h.PhysID()))
	}
	q := must(nis[1].EQAlloc(8))
	pt := must(nis[1].PTAlloc(0, q, PTAny))
	buf := make([]byte, 8)
	must(nis[1].MEAppend(pt, &ME{Buf: buf, UID: UIDAny, Options: OpPut | EventLinkDisable, MatchID: RankID(0)}, PriorityList, 0))
	ok(t, nis[0].SetMap(ids))
	qI := must(nis[0].EQAlloc(8))
	md := must(nis[0].MDBind(MD{Buf: []byte("12345678"), EQ: qI, Options: MDEventSendDisable}))
	ok(t, Put(md, 0, 8, AckReqFull, RankID(1), pt, 0, 0, 0, 0))
	if _, _, err := EQPoll([]EQHandle{qI}, 50*time.Millisecond); !errors.Is(err, ErrEQEmpty) {
		t.Fatal("acked before the target had a map")
	}
	ok(t, nis[1].SetMap(ids))
	if a := expectKind(t, qI, EventAck); a.NIFail != NIOK {
		t.Fatalf("%+v", a)
	}
	if ev := expectKind(t, q, EventPut); ev.Initiator.Rank != 0 || string(buf) != "12345678" {
		t.Fatalf("%+v %q", ev, buf)
	}
}

// Gets and fetching atomics that land in an overflow entry are served from the overflow
// buffer; a later priority append gets GET_OVERFLOW / FETCH_ATOMIC_OVERFLOW (§3.15.3, §4.4).
func TestOverflowGetFetch(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		q := must(e.ni[tgt].EQAlloc(32))
		pt := must(e.ni[tgt].PTAlloc(0, q, PTAny))
		ovf := pattern(16, 40)
		e.appendEntry(tgt, pt, anyME(ovf, EventLinkDisable), OverflowList, 1)
		qI := must(e.ni[ini].EQAlloc(32))
		dst := make([]byte, 16)
		md := must(e.ni[ini].MDBind(MD{Buf: dst, EQ: qI, Options: MDEventSendDisable}))
		ok(t, Get(md, 0, 4, e.ids[tgt], pt, 0, 2, 9))
		if r := expectKind(t, qI, EventReply); r.List != OverflowList || r.MLength != 4 || r.NIFail != NIOK {
			t.Fatalf("%+v", r)
		}
		if !bytes.Equal(dst[:4], ovf[2:6]) {
			t.Fatal("get from the overflow buffer")
		}
		expectKind(t, q, EventGet)
		src := must(e.ni[ini].MDBind(MD{Buf: []byte{1, 0, 0, 0, 0, 0, 0, 0}}))
		ok(t, FetchAtomic(md, 8, src, 0, 8, e.ids[tgt], pt, 0, 8, 10, 5, OpSum, Uint64))
		expectKind(t, qI, EventReply)
		ok(t, AtomicSync()) // orders the NIC's write to ovf before this read
		if !bytes.Equal(dst[8:16], pattern(16, 40)[8:16]) || ovf[8] != 1 {
			t.Fatal("fetch in the overflow list: old contents back, operand deposited")
		}
		expectKind(t, q, EventFetchAtomic)
		e.appendEntry(tgt, pt, anyME(nil, EventLinkDisable), PriorityList, 2)
		if ev := expectKind(t, q, EventGetOverflow); ev.MLength != 4 || ev.RemoteOffset != 2 || ev.UserPtr != 2 {
			t.Fatalf("%+v", ev)
		}
		if ev := expectKind(t, q, EventFetchAtomicOverflow); ev.AtomicOp != OpSum || ev.AtomicType != Uint64 || ev.HdrData != 5 {
			t.Fatalf("%+v", ev)
		}
		expectEmpty(t, q)
	})
}

// Ordering (§2.7): back-to-back puts to the same offset land in order (WAW), a get after
// them reads the last (RAW), use-once entries match in send order, and an UNORDERED MD is
// accepted.
func TestOrdering(t *testing.T) {
	forAll(t, func(t *testing.T, e *env, ini, tgt int) {
		q := must(e.ni[tgt].EQAlloc(256))
		pt := must(e.ni[tgt].PTAlloc(0, q, PTAny))
		cell := make([]byte, 8)
		for i := 0; i < 50; i++ {
			e.appendEntry(tgt, pt, anyME(nil, UseOnce|EventLinkDisable|EventUnlinkDisable), PriorityList, uint64(i))
		}
		e.appendEntry(tgt, pt, anyME(cell, EventLinkDisable|EventCommDisable), PriorityList, 99)
		src := make([]byte, 8*100)
		for i := 0; i < 100; i++ {
			le.PutUint64(src[8*i:], uint64(i))
		}
		qI := must(e.ni[ini].EQAlloc(256))
		md := must(e.ni[ini].MDBind(MD{Buf: src, EQ: qI, Options: MDEventSendDisable | MDUnordered}))
		for i := 0; i < 100; i++ {
			ok(t, Put(md, uint64(8*i), 8, NoAckReq, e.ids[tgt], pt, 0, 0, 0, uint64(i)))
		}
		got := make([]byte, 8)
		dst := must(e.ni[ini].MDBind(MD{Buf: got, EQ: qI}))
		ok(t, Get(dst, 0, 8, e.ids[tgt], pt, 0, 0, 0))
		expectKind(t, qI, EventReply)
		if v := le.Uint64(got); v != 99 {
			t.Fatalf("get after the puts read %d", v)
		}
		for i := 0; i < 50; i++ {
			if ev := expectKind(t, q, EventPut); ev.UserPtr != uint64(i) || ev.HdrData != uint64(i) {
				t.Fatalf("put %d matched entry %d", ev.HdrData, ev.UserPtr)
			}
		}
		ok(t, AtomicSync())
		if v := le.Uint64(cell); v != 99 {
			t.Fatalf("cell holds %d after puts 50..99", v)
		}
	})
}
