package portals

import (
	"bytes"
	"testing"

	"github.com/gexgo/gexgo/internal/ptlnet"
)

// wireSeeds are encoder-built messages of every operation.
func wireSeeds() [][2][]byte {
	var out [][2][]byte
	mk := func(op byte, ack AckReq, aop AtomicOp, dt Datatype, length uint64, payload []byte) {
		h := make(wireHdr, hdrLen)
		h.request(op, 1, ack, aop, dt, 3, 0x55, 4, length, MDHandle(mkHandle(kindMD, 0, 1, 1, 0)), 9, 10, 0)
		out = append(out, [2][]byte{h, payload})
	}
	mk(opPut, AckReqFull, 0, 0, 8, make([]byte, 8))
	mk(opGet, NoAckReq, 0, 0, 8, nil)
	mk(opAtomic, CTAckReq, OpSum, Int32, 8, make([]byte, 8))
	mk(opFetch, NoAckReq, OpMax, Double, 16, make([]byte, 16))
	mk(opSwap, NoAckReq, OpCSwap, Uint64, 8, make([]byte, 16))
	r := make(wireHdr, hdrLen)
	r.request(opPut, 1, AckReqFull, 0, 0, 3, 0, 0, 8, MDHandle(mkHandle(kindMD, 0, 1, 1, 0)), 9, 10, 0)
	a := make(wireHdr, hdrLen)
	a.response(opAck, r, OverflowList, NIOK, 4, 8)
	out = append(out, [2][]byte{a, nil})
	g := make(wireHdr, hdrLen)
	g.request(opGet, 1, 0, 0, 0, 3, 0, 0, 8, MDHandle(mkHandle(kindMD, 0, 1, 1, 0)), 9, 10, 2)
	rep := make(wireHdr, hdrLen)
	rep.response(opReply, g, PriorityList, NIOK, 0, 4)
	out = append(out, [2][]byte{rep, make([]byte, 4)})
	c := make(wireHdr, hdrLen)
	c.ctAcks(1, MDHandle(mkHandle(kindMD, 0, 1, 1, 0)), 5, 2, 40)
	out = append(out, [2][]byte{c, nil})
	return out
}

func TestWireRoundTrip(t *testing.T) {
	for _, s := range wireSeeds() {
		if !wireHdr(s[0]).check(s[1]) {
			t.Fatalf("encoder output refused: %x", s[0])
		}
	}
	h := make(wireHdr, hdrLen)
	h.request(opPut, 2, OCAckReq, 0, 0, 77, 0xdead, 5, 6, 7, 8, 9, 10)
	if h.op() != opPut || h.ni() != 2 || h.ackReq() != OCAckReq || h.pt() != 77 || h.bits() != 0xdead ||
		h.roff() != 5 || h.length() != 6 || h.md() != 7 || h.userPtr() != 8 || h.hdrData() != 9 || h.localOff() != 10 {
		t.Fatal("header fields")
	}
	// lengths must agree with the header
	if h.check(make([]byte, 5)) || wireHdr(h[:hdrLen-1]).check(make([]byte, 6)) {
		t.Fatal("bad length accepted")
	}
}

// FuzzWire feeds arbitrary (hdr, payload) to the NIC of a matching physical NI with
// priority and overflow entries, an MD with a pending get, and checks that nothing panics,
// that no byte outside the entries' and MD's buffers changes, and that the guard bytes
// around them stay intact.
func FuzzWire(f *testing.F) {
	for _, s := range wireSeeds() {
		f.Add(s[0], s[1])
	}
	sp := make(wireHdr, shortPutLen)
	sp.shortPut(0, 3, 0x55, 4, 10)
	f.Add([]byte(sp), make([]byte, 8))
	f.Fuzz(func(t *testing.T, hdr, payload []byte) {
		ok(t, Init())
		defer Fini()
		ni, _, err := NIInit(0, NINoMatching|NIPhysical, PIDAny, nil)
		ok(t, err)
		defer ni.Fini()
		q := must(ni.EQAlloc(16))
		pt := must(ni.PTAlloc(0, q, 3))
		mem := make([]byte, 96)
		for i := range mem {
			mem[i] = 0xee
		}
		must(ni.LEAppend(pt, &LE{Buf: mem[16:32], UID: UIDAny, Options: OpPut | OpGet}, PriorityList, 0))
		must(ni.LEAppend(pt, &LE{Buf: mem[48:64], UID: UIDAny, Options: OpPut | OpGet}, OverflowList, 0))
		md := must(ni.MDBind(MD{Buf: mem[80:88], EQ: q}))
		_ = md
		ln, p, _ := lockNI(ni, "fuzz")
		_ = ln
		p.recvLocked(ptlnet.Peer{ID: p.self, UID: uint32(p.uid)}, hdr, payload)
		p.mu.Unlock()
		for i, b := range mem {
			in := (i >= 16 && i < 32) || (i >= 48 && i < 64) || (i >= 80 && i < 88)
			if !in && b != 0xee {
				t.Fatalf("byte %d outside every buffer changed", i)
			}
		}
		for {
			if _, err := q.Get(); err != nil {
				break
			}
		}
	})
}

// ---- a reference model of matching, checked against the engine ----

// model is the matching of Portals 4.3 §2.5/§3.12 on one PT of a matching NI, reduced to
// what decides which entry a message or append meets: priority list, overflow list,
// unexpected headers, use-once, match and ignore bits.
type model struct {
	prio, ovf []mentry
	uh        []muh
}

type mentry struct {
	id         uint64
	bits, ign  MatchBits
	once       bool
	overflowID uint64
}

type muh struct {
	msg   uint64
	bits  MatchBits
	entry uint64
}

type mevent struct {
	kind  EventKind
	a, b  uint64 // PUT: entry, message; PUT_OVERFLOW: new entry, message; AUTO_UNLINK/LINK: entry
	extra uint64
}

func (m *model) put(msg uint64, bits MatchBits) []mevent {
	for li, l := range [][]mentry{m.prio, m.ovf} {
		for i, e := range l {
			if (bits^e.bits)&^e.ign != 0 {
				continue
			}
			ev := []mevent{{EventPut, e.id, msg, 0}}
			if li == 1 {
				m.uh = append(m.uh, muh{msg, bits, e.id})
			}
			if e.once {
				ev = append(ev, mevent{EventAutoUnlink, e.id, 0, 0})
				l = append(l[:i:i], l[i+1:]...)
				if li == 0 {
					m.prio = l
				} else {
					m.ovf = l
					// AUTO_FREE comes once the header is gone
				}
			}
			return ev
		}
	}
	return nil // dropped
}

func (m *model) appendPrio(e mentry) []mevent {
	var ev []mevent
	for i := 0; i < len(m.uh); i++ {
		u := m.uh[i]
		if (u.bits^e.bits)&^e.ign != 0 {
			continue
		}
		ev = append(ev, mevent{EventPutOverflow, e.id, u.msg, 0})
		m.uh = append(m.uh[:i:i], m.uh[i+1:]...)
		i--
		ev = append(ev, m.maybeFree(u.entry)...)
		if e.once {
			return append(ev, mevent{EventAutoUnlink, e.id, 0, 0})
		}
	}
	m.prio = append(m.prio, e)
	return append(ev, mevent{EventLink, e.id, 0, 0})
}

// maybeFree posts AUTO_FREE for a used-up overflow entry whose last header left.
func (m *model) maybeFree(entry uint64) []mevent {
	for _, e := range m.ovf {
		if e.id == entry {
			return nil // still linked
		}
	}
	for _, u := range m.uh {
		if u.entry == entry {
			return nil
		}
	}
	return []mevent{{EventAutoFree, entry, 0, 0}}
}

func (m *model) appendOvf(e mentry) []mevent {
	m.ovf = append(m.ovf, e)
	return []mevent{{EventLink, e.id, 0, 0}}
}

// FuzzMatching drives the engine and the model with the same sequence of appends and puts
// (decoded from the fuzz input) and compares the events.
func FuzzMatching(f *testing.F) {
	f.Add([]byte{0x01, 0x10, 0x02, 0x11, 0x83, 0x00, 0x04, 0x21, 0x45, 0x03, 0x13})
	f.Add([]byte{0x03, 0x00, 0x03, 0x01, 0x00, 0x02, 0x80, 0x03, 0x01, 0x03})
	f.Add(bytes.Repeat([]byte{0x02, 0x17, 0x00, 0x05}, 8))
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 256 {
			prog = prog[:256]
		}
		ok(t, Init())
		defer Fini()
		ni, _, err := NIInit(0, NIMatching|NIPhysical, PIDAny, nil)
		ok(t, err)
		defer ni.Fini()
		q := must(ni.EQAlloc(4096))
		pt := must(ni.PTAlloc(0, q, PTAny))
		self := must(ni.PhysID())
		md := must(ni.MDBind(MD{Buf: make([]byte, 1)}))
		m := &model{}
		var next uint64 = 1
		for i := 0; i+1 < len(prog); i += 2 {
			op, arg := prog[i], prog[i+1]
			bits := MatchBits(arg & 3)
			ign := MatchBits(arg>>2) & 3
			once := op&0x80 != 0
			var want []mevent
			switch op & 3 {
			case 0, 1: // put
				want = m.put(next, bits)
				ok(t, Put(md, 0, 1, NoAckReq, self, pt, bits, 0, 0, next))
			case 2: // priority append
				e := mentry{id: next, bits: bits, ign: ign, once: once}
				want = m.appendPrio(e)
				appendME(t, ni, pt, e, PriorityList)
			case 3: // overflow append
				e := mentry{id: next, bits: bits, ign: ign, once: once}
				want = m.appendOvf(e)
				appendME(t, ni, pt, e, OverflowList)
			}
			next++
			for _, w := range want {
				ev, err := q.Get()
				if err != nil {
					t.Fatalf("step %d: no event, want %+v", i/2, w)
				}
				got := mevent{kind: ev.Type, a: ev.UserPtr}
				if ev.Type == EventPut || ev.Type == EventPutOverflow {
					got.b = ev.HdrData
				}
				if got != w {
					t.Fatalf("step %d: event %+v, want %+v", i/2, got, w)
				}
			}
			if ev, err := q.Get(); err == nil {
				t.Fatalf("step %d: extra event %+v", i/2, ev)
			}
		}
	})
}

func appendME(t *testing.T, ni NIHandle, pt PTIndex, e mentry, list List) {
	opts := OpPut
	if e.once {
		opts |= UseOnce
	}
	me := ME{UID: UIDAny, Options: opts, MatchID: Phys(NIDAny, PIDAny), MatchBits: e.bits, IgnoreBits: e.ign}
	if _, err := ni.MEAppend(pt, &me, list, e.id); err != nil {
		t.Fatal(err)
	}
}

// TestHostileMessages sends malformed and out-of-range messages from a raw transport
// endpoint: each is dropped and counted (PTL_SR_MALFORMED or PTL_SR_DROP_COUNT), nothing is
// written, and the NI keeps working.
func TestHostileMessages(t *testing.T) {
	e := newEnv(t, niKinds[1], 1, nil) // matching physical: index 0|2
	q := must(e.ni[0].EQAlloc(16))
	pt := must(e.ni[0].PTAlloc(0, q, PTAny))
	buf := make([]byte, 16)
	e.appendEntry(0, pt, anyME(buf, EventLinkDisable), PriorityList, 0)
	raw, err := ptlnet.Open(ptlnet.Config{PID: ptlnet.PIDAny}, func(ptlnet.Peer, []byte, []byte) {})
	ok(t, err)
	defer raw.Close()
	dst := ptlnet.PhysID{NID: uint32(e.phys[0].NID), PID: uint32(e.phys[0].PID)}
	good := make(wireHdr, hdrLen)
	good.request(opPut, niIndex(e.kind.opts), NoAckReq, 0, 0, pt, 0, 0, 8, 0, 0, 0, 0)
	bad := func(mut func(h wireHdr) ([]byte, []byte)) {
		h := append(wireHdr(nil), good...)
		hb, pl := mut(h)
		ok(t, raw.Send(dst, hb, pl))
	}
	bad(func(h wireHdr) ([]byte, []byte) { return h, make([]byte, 9) })            // payload longer than length
	bad(func(h wireHdr) ([]byte, []byte) { h[1] = 99; return h, make([]byte, 8) }) // unknown op
	bad(func(h wireHdr) ([]byte, []byte) { h[0] = 0; return h, make([]byte, 8) })  // magic
	bad(func(h wireHdr) ([]byte, []byte) { return h[:39], nil })                   // truncated header
	bad(func(h wireHdr) ([]byte, []byte) {                                         // a short put header (wire.go) asking for an ack
		h.shortPut(niIndex(e.kind.opts), pt, 0, 0, 0)
		h[3] = byte(AckReqFull)
		return h[:shortPutLen], make([]byte, 8)
	})
	bad(func(h wireHdr) ([]byte, []byte) {
		h[1], h[4], h[5] = opAtomic, byte(OpBAnd), byte(Double) // illegal atomic
		return h, make([]byte, 8)
	})
	bad(func(h wireHdr) ([]byte, []byte) { // length beyond max_msg_size, with the payload it claims absent
		le.PutUint64(h[32:], 1<<40)
		return h, make([]byte, 8)
	})
	// counting acks: counts out of bounds, none, a payload, a stray field
	ctAcks := func(okN, failN uint64) func(h wireHdr) ([]byte, []byte) {
		return func(h wireHdr) ([]byte, []byte) {
			h.ctAcks(byte(niIndex(e.kind.opts)), 0, okN, failN, 8*okN)
			return h, nil
		}
	}
	bad(ctAcks(maxCTAcks+1, 0))
	bad(ctAcks(0, 1<<63))
	bad(ctAcks(0, 0))
	bad(func(h wireHdr) ([]byte, []byte) { h, _ = ctAcks(1, 0)(h); return h, make([]byte, 1) })
	bad(func(h wireHdr) ([]byte, []byte) { h, _ = ctAcks(1, 0)(h); h[6] = 1; return h, nil })
	// well-formed counting acks (3 + 2) for an MD that does not exist: 5 drops
	bad(ctAcks(3, 2))
	// a well-formed put to an unallocated PT: dropped and counted
	bad(func(h wireHdr) ([]byte, []byte) { le.PutUint32(h[8:], 200); return h, make([]byte, 8) })
	// then a good one
	ok(t, raw.Send(dst, good, []byte("abcdefgh")))
	ev := expectKind(t, q, EventPut)
	if string(buf[:8]) != "abcdefgh" || ev.MLength != 8 {
		t.Fatalf("%q %+v", buf, ev)
	}
	if v := must(e.ni[0].Status(SRMalformed)); v != 12 { // all twelve name this NI (byte 2)
		t.Fatalf("malformed %d", v)
	}
	if v := must(e.ni[0].Status(SRDropCount)); v != 1+5 {
		t.Fatalf("drops %d", v)
	}
}
