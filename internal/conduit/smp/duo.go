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
// to p in its first half and p's replies to r in its second. A request and
// its reply through the line move it back and forth once each way, as the
// one-word ping-pong floor does, where the rings' mailboxes move two lines
// and clear each behind its message (docs/am.md, "Fourth pass").
//
// Only small AMs go there (a Short of at most duoShortArgs args, a Medium
// of at most duoMediumBytes bytes with at most duoMediumArgs args, a Long
// placed in a mapped segment with at most duoLongArgs args), and only when
// the half is empty; everything else, and everything that finds the
// half taken, goes through the rings as before. AMs need no order among
// themselves (the rings' mailboxes rely on it too: docs/am.md, "Fourth
// pass"), so a message in a line may overtake one in a ring.
//
// Who writes what:
//   - The asker's half is written by the asker's request senders, one at a
//     time (askClaim, a lock of the asker's process), only while its word is
//     0. The answerer's request consumer reads it, copies its args and
//     payload out, runs the handler, and clears the word: in the same burst
//     of stores as the handler's reply when the reply goes back through the
//     line, else after the handler.
//   - The answerer's half is written only by the answerer's request
//     consumer, as the reply to an ask it is delivering (duoCur), and only
//     while its word is 0. The asker's reply consumer runs the reply handler
//     on the data in place, then marks the half delivered (answerSeen, in
//     the asker's process); the asker's next request through the line
//     clears it in its own burst of stores. Until then the reply consumer
//     skips the half, and a reply that finds it taken takes the ring.
//
// So in a round trip each side stores into the line once, in one burst
// (clear the half it read, write its message, commit), and reads it once.
//
// A half's encoding: an 8-byte word, stored last (never 0: the kind byte
// has a category),
//
//	0 kind (slot.go's kind bits: category, request, inline)
//	1 handler index
//	2 nargs
//	3 payload length (a Medium's; 0 for a Short)
//	4 destination endpoint index (2 bytes)
//	6 source endpoint index (2 bytes)
//
// then the args (4 bytes each) from byte 8 of the half, and a Medium's
// payload from byte 16, 16-byte aligned in memory like the rings' inline
// payloads. A Long (placed: its payload is already in the destination
// segment, and its endpoint is 0) has its payload length in bytes 3-5 of
// the word, its destination address in bytes 8-15 of the half and its args
// from byte 16.
const (
	duoShortArgs   = shm.DuoData / 4 // 6
	duoMediumArgs  = 2
	duoMediumBytes = shm.DuoHalf - 16      // 16
	duoPayloadOff  = 16                    // in the half
	duoLongArgs    = (shm.DuoData - 8) / 4 // 4
	duoLongArgsOff = 16                    // in the half, after the destination

	// duoMaxPeers bounds the peers a rank shares duo lines with: a poll
	// looks at two words per such peer.
	duoMaxPeers = 7

	// EnvNoDuo, set to 1, turns the duo lines off (every AM takes the
	// rings): for comparisons.
	EnvNoDuo = "GEX_SMP_NO_DUO"
)

// duoFits reports whether an AM of category cat (a Short, an inline
// Medium, a placed Long) with nargs args and n payload bytes fits a duo
// half.
func duoFits(cat conduit.Category, nargs, n int) bool {
	switch cat {
	case conduit.Medium:
		return nargs <= duoMediumArgs && n <= duoMediumBytes
	case conduit.Long:
		return nargs <= duoLongArgs && n <= MaxLongMapped
	}
	return nargs <= duoShortArgs
}

// encodeDuo writes an AM into the half of line l at off (0 or
// shm.DuoHalf), all but its word, and returns the word to commit: a
// Medium's payload is copied, a placed Long's (kind has kindPlaced, ep is
// 0) is already in the segment at dest. The caller checked duoFits.
func encodeDuo(l []byte, off int, k, handler uint8, ep, srcEP uint16, args []int32, payload []byte, dest uint64) uint64 {
	h := l[off : off+shm.DuoHalf : off+shm.DuoHalf]
	if k&kindPlaced != 0 {
		binary.LittleEndian.PutUint64(h[8:], dest)
		a := h[duoLongArgsOff:]
		for i, v := range args {
			binary.LittleEndian.PutUint32(a[4*i:], uint32(v))
		}
		return uint64(k) | uint64(handler)<<8 | uint64(len(args))<<16 | uint64(len(payload))<<24 | uint64(srcEP)<<48
	}
	for i, v := range args {
		binary.LittleEndian.PutUint32(h[8+4*i:], uint32(v))
	}
	if len(payload) > 0 {
		copy(h[duoPayloadOff:], payload)
	}
	return uint64(k) | uint64(handler)<<8 | uint64(len(args))<<16 | uint64(len(payload))<<24 | uint64(ep)<<32 | uint64(srcEP)<<48
}

// decodeDuo parses the message of word w in the half of line l at off into
// h (Src, Placed, Dest and Payload are the caller's). isReq is what the
// half carries. It never panics, whatever the line holds.
func decodeDuo(l []byte, off int, w uint64, isReq bool, h *conduit.Header) error {
	k := byte(w)
	nargs := int(byte(w >> 16))
	n := int(byte(w >> 24))
	want := byte(0)
	if isReq {
		want = kindReq
	}
	short := k == byte(conduit.Short)|want
	medium := k == byte(conduit.Medium)|kindInline|want
	long := k == byte(conduit.Long)|kindPlaced|want
	if long {
		n = int(w >> 24 & 0xffffff)
	}
	if !(short && nargs <= duoShortArgs && n == 0 || medium && nargs <= duoMediumArgs && n <= duoMediumBytes ||
		long && nargs <= duoLongArgs && n <= MaxLongMapped) {
		return fmt.Errorf("%w: duo line message word %#x (kind %#x, %d args, %d bytes) is not a %s Short of at most %d args, Medium of at most %d args and %d bytes, or placed Long of at most %d args and %d bytes",
			errSlot, w, k, nargs, n, word(isReq), duoShortArgs, duoMediumArgs, duoMediumBytes, duoLongArgs, MaxLongMapped)
	}
	h.Cat, h.IsReq, h.Handler, h.NArgs = conduit.Category(k&kindCatMask), isReq, byte(w>>8), uint8(nargs)
	h.EP, h.SrcEP, h.Dest = uint16(w>>32), uint16(w>>48), 0
	ao := off + 8
	if long {
		h.EP, h.Dest = 0, binary.LittleEndian.Uint64(l[off+8:])
		ao = off + duoLongArgsOff
	}
	a := l[ao : ao+4*nargs]
	for i := range nargs {
		h.Args[i] = int32(binary.LittleEndian.Uint32(a[4*i:]))
	}
	return nil
}

// duoPayload is the payload bytes of a Medium decoded from the half of l
// at off (n <= duoMediumBytes, as decodeDuo checked).
func duoPayload(l []byte, off, n int) []byte {
	return l[off+duoPayloadOff : off+duoPayloadOff+n : off+duoPayloadOff+n]
}

// duoLen is the payload length in a duo message word that decodeDuo
// accepted as h.
func duoLen(w uint64, h *conduit.Header) int {
	if h.Cat == conduit.Long {
		return int(w >> 24 & 0xffffff)
	}
	return int(byte(w >> 24))
}

// duoIncoming sets in's payload for the message of word w in the half of l
// at off, which decodeDuo accepted into in.Header: nil for a Short, the
// Medium's bytes in the half (or, if copy, a copy in c.duoBuf), a placed
// Long's bytes in this rank's segment. false if the Long's bytes are not
// inside the segment (the message is dropped with a complaint).
func (c *Conduit) duoIncoming(in *conduit.Incoming, src int, l []byte, off int, w uint64, copied bool) bool {
	in.Src, in.Placed, in.Payload = src, false, nil
	switch in.Cat {
	case conduit.Medium:
		in.Payload = duoPayload(l, off, duoLen(w, &in.Header))
		if copied {
			in.Payload = c.duoBuf[:copy(c.duoBuf[:], in.Payload)]
		}
	case conduit.Long:
		n := duoLen(w, &in.Header)
		in.Placed = true
		if in.Payload = c.placedPayload(in.Dest, n); in.Payload == nil {
			c.complain("dropped a Long from rank %d: placed payload [%#x, +%d) is outside this rank's segment", src, in.Dest, n)
			return false
		}
	}
	return true
}

// duoAsk sends a request to pr through their duo line if its asker half is
// free and no other request sender of this process holds it; false if the
// caller must use the rings. (The clear of a reply this process delivered
// travels in the same burst: see the package comment above.)
func (c *Conduit) duoAsk(pr *peer, k, handler uint8, ep, srcEP uint16, args []int32, payload []byte, dest uint64) bool {
	if !pr.askClaim.CompareAndSwap(0, 1) {
		return false
	}
	d := &pr.duoOut
	if d.Word(shm.DuoAsk) != 0 {
		shm.StoreRelease32(&pr.askClaim, 0)
		return false
	}
	if pr.answerSeen.Load() != 0 {
		// The reply consumer delivered the last reply: clear its half, then
		// say so (a reply consumer that sees answerSeen 0 sees the half
		// empty, or a newer reply).
		d.Clear(shm.DuoAnswer)
		shm.StoreRelease32(&pr.answerSeen, 0)
	}
	w := encodeDuo(d.Line(), 0, k|kindReq, handler, ep, srcEP, args, payload, dest)
	d.Commit(shm.DuoAsk, w)
	shm.StoreRelease32(&pr.askClaim, 0)
	pr.bell.Ring()
	return true
}

// duoAnswer sends a reply to rank dst through their duo line if it answers
// the ask being delivered from dst (so this goroutine is the request
// consumer, the half's one writer) and the half is empty; false if the
// caller must use the rings. The ask's half is cleared in the same burst.
func (c *Conduit) duoAnswer(pr *peer, dst int, k, handler uint8, ep, srcEP uint16, args []int32, payload []byte, dest uint64) bool {
	d := &pr.duoIn
	if c.duoCur != dst || d.Word(shm.DuoAnswer) != 0 {
		return false
	}
	d.Clear(shm.DuoAsk) // the ask's args and payload were copied out
	c.duoCur = -1
	w := encodeDuo(d.Line(), shm.DuoHalf, k, handler, ep, srcEP, args, payload, dest)
	d.Commit(shm.DuoAnswer, w)
	pr.bell.Ring()
	return true
}

// duoWaiting reports whether a duo line holds an AM for inbound class qi
// (0 requests, 1 replies) that no consumer has delivered: two loads per
// peer at most, no lock.
func (c *Conduit) duoWaiting(qi int) bool {
	for _, p := range c.duoPeers {
		pr := &c.peers[p]
		if qi == 0 {
			if pr.duoIn.Word(shm.DuoAsk) != 0 {
				return true
			}
		} else if pr.answerSeen.Load() == 0 && pr.duoOut.Word(shm.DuoAnswer) != 0 {
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
	for _, p := range c.duoPeers {
		pr := &c.peers[p]
		if qi == 0 {
			d := &pr.duoIn
			w := d.Word(shm.DuoAsk)
			if w == 0 {
				continue
			}
			l := d.Line()
			if err := decodeDuo(l, 0, w, true, &in.Header); err != nil {
				c.complain("dropped an AM from rank %d: %v", p, err)
				d.Clear(shm.DuoAsk)
				continue
			}
			// A Medium's payload is copied out so that the reply may clear
			// the half before the handler returns (duoAnswer).
			if !c.duoIncoming(in, p, l, 0, w, true) {
				d.Clear(shm.DuoAsk)
				continue
			}
			c.duoCur = p
			c.deliver(in)
			if c.duoCur == p { // no reply went back through the line
				d.Clear(shm.DuoAsk)
				c.duoCur = -1
			}
			n++
			continue
		}
		if pr.answerSeen.Load() != 0 {
			continue // delivered; the next ask clears it
		}
		d := &pr.duoOut
		w := d.Word(shm.DuoAnswer)
		if w == 0 {
			continue
		}
		l := d.Line()
		if err := decodeDuo(l, shm.DuoHalf, w, false, &in.Header); err != nil {
			c.complain("dropped an AM from rank %d: %v", p, err)
		} else if c.duoIncoming(in, p, l, shm.DuoHalf, w, false) {
			c.deliver(in)
			n++
		}
		shm.StoreRelease32(&pr.answerSeen, 1)
	}
	return n
}
