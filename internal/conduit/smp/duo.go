package smp

import (
	"encoding/binary"
	"fmt"

	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/shm"
)

// Duo lines (docs/am.md, "Fifth pass: one line for a round trip"): every
// ordered pair of ranks on this machine shares one cache line, an shm.Duo,
// in the region of the rank that asks: rank r's line p carries r's requests
// to p and p's replies to them, one message at a time, each written over
// the one before. A request and its reply through the line move it back
// and forth once each way with the same bytes written by each side in
// turn, as the one-word ping-pong floor does, where the rings' mailboxes
// move two lines and clear each behind its message (docs/am.md, "Fourth
// pass").
//
// Only small AMs go there (a Short of at most duoArgs args, a Medium whose
// args and payload fit the line, a Long placed in a mapped segment with at
// most duoArgs args), and only when the line is free; everything else, and
// everything that finds the line taken, goes through the rings as before.
// AMs need no order among themselves (the rings' mailboxes rely on it too:
// docs/am.md, "Fourth pass"), so a message in a line may overtake one in a
// ring.
//
// The line holds, in turn:
//   - nothing (word 0);
//   - a request, written by the asker's request senders, one at a time
//     (askClaim, a lock of the asker's process), only while the line is
//     free: empty, or holding a reply the asker has delivered. The
//     answerer's request consumer copies its args and payload out, runs
//     the handler, and either writes the handler's reply over it, or, if
//     the reply goes through the rings or there is none, empties the line;
//   - a reply, written only by the answerer's request consumer, as the
//     reply to the request it is delivering from the line (duoCur). The
//     asker's reply consumer runs the reply handler on it in place, then
//     records it as delivered in its own memory (answerDone); the asker's
//     next request is written over it. Each request carries a lap bit that
//     its reply copies, different from the last delivered reply's, so a
//     delivered reply is never taken for a new one.
//
// So in a round trip each side writes the line once and reads it once.
//
// Encoding: an 8-byte word, stored last (never 0: the kind byte has a
// category),
//
//	0 kind (slot.go's kind bits: category, request, inline, placed; and
//	  duoLap)
//	1 handler index
//	2 nargs
//	3 payload length (a Medium's; 0 for a Short)
//	4 destination endpoint index (2 bytes)
//	6 source endpoint index (2 bytes)
//
// then the args (4 bytes each) from byte 8, and a Medium's payload from
// duoPayloadOff(nargs), 16-byte aligned in memory like the rings' inline
// payloads. A Long (placed: its payload is already in the destination
// segment, and its endpoint is 0) has its payload length in bytes 3-5 of
// the word, its destination address in bytes 8-15 and its args from byte
// 16.
const (
	duoArgs        = 8
	duoLongArgsOff = 16
	duoLap         = 1 << 7 // in the kind byte

	// duoMaxPeers bounds the peers a rank sends through duo lines: a poll
	// looks at up to two words per such peer.
	duoMaxPeers = 7

	// offDuo is the AM region header word that says whether its owner
	// sends requests through duo lines (1) or not (0): a rank polls the
	// lines of the peers that do (duoPeers[0]). The owner writes it before
	// the regions are exchanged and never changes it, so ranks need not
	// agree (GEX_SMP_NO_DUO set for some only, different CPU counts).
	offDuo = 28

	// EnvNoDuo, set to 1, turns the duo lines off (every AM takes the
	// rings): for comparisons.
	EnvNoDuo = "GEX_SMP_NO_DUO"
)

// duoPayloadOff is where a Medium's payload starts in a duo line, after
// its nargs args.
func duoPayloadOff(nargs int) int { return (8 + 4*nargs + 15) &^ 15 }

// duoFits reports whether an AM of category cat (a Short, an inline
// Medium, a placed Long) with nargs args and n payload bytes fits a duo
// line.
func duoFits(cat conduit.Category, nargs, n int) bool {
	switch cat {
	case conduit.Medium:
		return nargs <= duoArgs && duoPayloadOff(nargs)+n <= shm.DuoBytes
	case conduit.Long:
		return nargs <= duoArgs && n <= MaxLongMapped
	}
	return nargs <= duoArgs
}

// encodeDuo writes an AM into line l, all but its word, and returns the
// word to commit: a Medium's payload is copied, a placed Long's (kind has
// kindPlaced, ep is 0) is already in the segment at dest. The caller
// checked duoFits.
func encodeDuo(l []byte, k, handler uint8, ep, srcEP uint16, args []int32, payload []byte, dest uint64) uint64 {
	l = l[:shm.DuoBytes:shm.DuoBytes]
	if k&kindPlaced != 0 {
		binary.LittleEndian.PutUint64(l[8:], dest)
		a := l[duoLongArgsOff:]
		for i, v := range args {
			binary.LittleEndian.PutUint32(a[4*i:], uint32(v))
		}
		return uint64(k) | uint64(handler)<<8 | uint64(len(args))<<16 | uint64(len(payload))<<24 | uint64(srcEP)<<48
	}
	a := l[8:]
	for i, v := range args {
		binary.LittleEndian.PutUint32(a[4*i:], uint32(v))
	}
	if len(payload) > 0 {
		copy(l[duoPayloadOff(len(args)):], payload)
	}
	return uint64(k) | uint64(handler)<<8 | uint64(len(args))<<16 | uint64(len(payload))<<24 | uint64(ep)<<32 | uint64(srcEP)<<48
}

// decodeDuo parses the message of word w in line l into h (Src, Placed
// and Payload are the caller's). isReq is what the caller expects there.
// It never panics, whatever the line holds.
func decodeDuo(l []byte, w uint64, isReq bool, h *conduit.Header) error {
	k := byte(w) &^ duoLap
	nargs := int(byte(w >> 16))
	n := duoLen(w)
	want := byte(0)
	if isReq {
		want = kindReq
	}
	short := k == byte(conduit.Short)|want
	medium := k == byte(conduit.Medium)|kindInline|want
	long := k == byte(conduit.Long)|kindPlaced|want
	if !(nargs <= duoArgs && (short && n == 0 || medium && duoPayloadOff(nargs)+n <= shm.DuoBytes || long && n <= MaxLongMapped)) {
		return duoErr(w, isReq)
	}
	h.Cat, h.IsReq, h.Handler, h.NArgs = conduit.Category(k&kindCatMask), isReq, byte(w>>8), uint8(nargs)
	h.EP, h.SrcEP, h.Dest = uint16(w>>32), uint16(w>>48), 0
	ao := 8
	if long {
		h.EP, h.Dest = 0, binary.LittleEndian.Uint64(l[8:])
		ao = duoLongArgsOff
	}
	a := l[ao : ao+4*nargs]
	for i := range nargs {
		h.Args[i] = int32(binary.LittleEndian.Uint32(a[4*i:]))
	}
	return nil
}

// duoErr is decodeDuo's error, out of line.
func duoErr(w uint64, isReq bool) error {
	return fmt.Errorf("%w: duo line message word %#x (kind %#x, %d args, %d bytes) is not a %s Short of at most %d args, Medium whose args and payload fit the %d-byte line, or placed Long of at most %d args and %d bytes",
		errSlot, w, byte(w)&^duoLap, byte(w>>16), duoLen(w), word(isReq), duoArgs, shm.DuoBytes, duoArgs, MaxLongMapped)
}

// duoLen is the payload length in a duo message word: 24 bits for a
// placed Long, 8 otherwise.
func duoLen(w uint64) int {
	if byte(w)&kindPlaced != 0 {
		return int(w >> 24 & 0xffffff)
	}
	return int(byte(w >> 24))
}

// duoIncoming sets in's payload for the message of word w in line l, which
// decodeDuo accepted into in.Header: nil for a Short, the Medium's bytes in
// the line (or, if copied, a copy in c.duoBuf), a placed Long's bytes in
// this rank's segment. false if the Long's bytes are not inside the
// segment (the message is dropped with a complaint).
func (c *Conduit) duoIncoming(in *conduit.Incoming, src int, l []byte, w uint64, copied bool) bool {
	in.Src, in.Placed, in.Payload = src, false, nil
	switch in.Cat {
	case conduit.Medium:
		o := duoPayloadOff(int(in.NArgs))
		in.Payload = l[o : o+duoLen(w)]
		if copied {
			in.Payload = c.duoBuf[:copy(c.duoBuf[:], in.Payload)]
		}
	case conduit.Long:
		n := duoLen(w)
		in.Placed = true
		if in.Payload = c.placedPayload(in.Dest, n); in.Payload == nil {
			c.complain("dropped a Long from rank %d: placed payload [%#x, +%d) is outside this rank's segment", src, in.Dest, n)
			return false
		}
	}
	return true
}

// duoAsk sends a request to pr through their duo line if it is free and no
// other request sender of this process holds it; false if the caller must
// use the rings.
func (c *Conduit) duoAsk(pr *peer, k, handler uint8, ep, srcEP uint16, args []int32, payload []byte, dest uint64) bool {
	if !pr.askClaim.CompareAndSwap(0, 1) {
		return false
	}
	d := &pr.duoOut
	w := d.Word()
	done := pr.answerDone.Load()
	// Free: empty, or a reply our reply consumer delivered (its lap+1 is
	// answerDone). The new request's lap differs from the last delivered
	// reply's, so its reply will not be taken for that one.
	if w != 0 && (w&kindReq != 0 || uint32(w>>7&1)+1 != done) {
		shm.StoreRelease32(&pr.askClaim, 0)
		return false
	}
	lap := byte(0)
	if done == 1 {
		lap = duoLap
	}
	d.Commit(encodeDuo(d.Line(), k|kindReq|lap, handler, ep, srcEP, args, payload, dest))
	shm.StoreRelease32(&pr.askClaim, 0)
	pr.bell.Ring()
	return true
}

// duoAnswer sends a reply to rank dst through their duo line, over the
// request being delivered from it (so this goroutine is the request
// consumer, the line's one writer until it answers); false if the caller
// must use the rings (the request is then cleared after its handler).
func (c *Conduit) duoAnswer(pr *peer, dst int, k, handler uint8, ep, srcEP uint16, args []int32, payload []byte, dest uint64) bool {
	if c.duoCur != dst {
		return false
	}
	d := &pr.duoIn
	lap := byte(d.Word()) & duoLap // the request's, which the reply copies
	c.duoCur = -1
	d.Commit(encodeDuo(d.Line(), k|lap, handler, ep, srcEP, args, payload, dest)) // the request's args and payload were copied out
	pr.bell.Ring()
	return true
}

// duoSends reports whether this rank sends requests through duo lines,
// given how many ranks share this machine with it (itself included) and
// how many CPUs it may run on: only if at most duoMaxPeers+1 do, and no
// more than the CPUs. With more ranks than CPUs they take turns on the
// CPUs, a round trip waits for a process switch (microseconds), not for
// a line to move, and the lines' extra polling showed: the 4-rank barrier
// on 2 CPUs took 5.1-5.8 us with them against 4.5-5.4 without (docs/am.md,
// "Fifth pass").
func duoSends(noDuo bool, local, cpus int) bool {
	return !noDuo && local > 1 && local-1 <= duoMaxPeers && local <= cpus
}

// duoWaiting reports whether a duo line holds an AM for inbound class qi
// (0 requests, 1 replies) that no consumer has delivered: at most two
// loads per peer, no lock.
func (c *Conduit) duoWaiting(qi int) bool {
	for _, p := range c.duoPeers[qi&1] {
		pr := &c.peers[p]
		if qi == 0 {
			if pr.duoIn.Word()&kindReq != 0 {
				return true
			}
		} else if w := pr.duoOut.Word(); w != 0 && w&kindReq == 0 && uint32(w>>7&1)+1 != pr.answerDone.Load() {
			return true
		}
	}
	return false
}

// drainDuos delivers the AMs of class qi waiting in the duo lines; the
// caller owns own[qi] and has set c.inc[qi].G.
func (c *Conduit) drainDuos(qi int) int {
	in := &c.inc[qi]
	n := 0
	for _, p := range c.duoPeers[qi&1] {
		pr := &c.peers[p]
		if qi == 0 {
			d := &pr.duoIn
			w := d.Word()
			if w&kindReq == 0 {
				continue // empty, or our reply
			}
			l := d.Line()
			if err := decodeDuo(l, w, true, &in.Header); err != nil {
				c.complain("dropped an AM from rank %d: %v", p, err)
				d.Clear()
				continue
			}
			// A Medium's payload is copied out (the args are, by the
			// decoding): the reply is written over them.
			if !c.duoIncoming(in, p, l, w, true) {
				d.Clear()
				continue
			}
			c.duoCur = p
			c.deliver(in)
			if c.duoCur == p { // no reply went back through the line
				d.Clear()
				c.duoCur = -1
			}
			n++
			continue
		}
		d := &pr.duoOut
		w := d.Word()
		lap := uint32(w>>7&1) + 1
		if w == 0 || w&kindReq != 0 || lap == pr.answerDone.Load() {
			continue // empty, our request, or a reply delivered already
		}
		l := d.Line()
		if err := decodeDuo(l, w, false, &in.Header); err != nil {
			c.complain("dropped an AM from rank %d: %v", p, err)
		} else if c.duoIncoming(in, p, l, w, false) {
			c.deliver(in)
			n++
		}
		shm.StoreRelease32(&pr.answerDone, lap)
	}
	return n
}
