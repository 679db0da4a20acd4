package portals

import "encoding/binary"

// The wire header of the software NIC: one per transport message, before the payload. The
// spec mandates no format (Implementation Note 1); the fields are those of §4.2.1 Tables
// 4-1 to 4-6. The sender's nid, pid and uid are not in it: the transport authenticates them
// (ptlnet.Peer), so they cannot be forged (§2.5, §3.8 "protected header").
//
//	off size field
//	  0  1   magic (wireMagic)
//	  1  1   op (opPut ... opReply)
//	  2  1   logical NI index (0..3) of both ends
//	  3  1   ack request (requests), ack request being answered (acks)
//	  4  1   atomic operation
//	  5  1   atomic datatype
//	  6  1   list the target used (acks, replies)
//	  7  1   ni_fail_type (acks, replies)
//	  8  4   pt_index
//	 12  4   reserved, zero
//	 16  8   match bits
//	 24  8   remote offset (requests), offset the target used (acks, replies)
//	 32  8   requested length
//	 40  8   initiator MD handle (ack or reply destination)
//	 48  8   user_ptr, echoed in acks and replies
//	 56  8   hdr_data
//	 64  8   local offset for the reply data in the MD
//	 72  8   manipulated length (acks, replies)
//
// A counting-acks message (opCTAcks) stands for n consecutive PTL_CT_ACK_REQ acks from one
// target to one MD (nic.go, ctAckRun): ack request PTL_CT_ACK_REQ, bytes 4-7 and 8-23 zero,
// the successes at 24, the failures at 32, the MD handle at 40, the sum of the successes'
// manipulated lengths at 72, everything else zero.
//
// Payloads: put and atomic carry the data; fetch carries the operand data; swap carries
// the data followed by one operand item of the datatype; reply carries the manipulated data.
type wireHdr []byte

const (
	hdrLen    = 80
	wireMagic = 0xb4
)

// A put without an acknowledgment (PTL_NO_ACK_REQ) from the initiator's lock-free path
// travels with a short header of shortPutLen bytes instead: bytes 0-31 as above (op opPut,
// ack request 0, bytes 4-7 and 12-15 zero), then hdr_data at 32. The requested length is
// the payload's; the MD handle, user_ptr, local offset and manipulated length, used only
// by acks and replies, are zero. With the transport's 8-byte frame header and an 8-byte
// payload it fills one 64-byte shared-memory ring slot (docs/ptlnet.md) where the full
// header takes two. The receiver expands it (expandShortPut) and checks the expansion like
// any header.
const shortPutLen = 40

// shortPut fills a short put header.
func (h wireHdr) shortPut(ni int, pt PTIndex, bits MatchBits, roff, hdrData uint64) {
	h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7] = wireMagic, opPut, byte(ni), byte(NoAckReq), 0, 0, 0, 0
	le.PutUint32(h[8:], uint32(pt))
	le.PutUint32(h[12:], 0)
	le.PutUint64(h[16:], uint64(bits))
	le.PutUint64(h[24:], roff)
	le.PutUint64(h[32:], hdrData)
}

// expandShortPut writes into full the header that the short put header s with a payload
// of n bytes stands for, or reports false if s is not one (anything else a peer sends
// with that length is malformed).
func expandShortPut(full *[hdrLen]byte, s []byte, n int) bool {
	if len(s) != shortPutLen || s[0] != wireMagic || s[1] != opPut || s[3] != byte(NoAckReq) ||
		le.Uint32(s[4:]) != 0 || le.Uint32(s[12:]) != 0 {
		return false
	}
	// Word moves, inline (copy on slices, or of a [32]byte that may overlap, calls memmove).
	w0, w1, w2, w3 := le.Uint64(s[0:]), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[24:])
	le.PutUint64(full[0:], w0)
	le.PutUint64(full[8:], w1)
	le.PutUint64(full[16:], w2)
	le.PutUint64(full[24:], w3)
	le.PutUint64(full[32:], uint64(n))
	*(*[16]byte)(full[40:56]) = [16]byte{}
	le.PutUint64(full[56:], le.Uint64(s[32:40]))
	*(*[16]byte)(full[64:80]) = [16]byte{}
	return true
}

// Operations on the wire.
const (
	opPut byte = 1 + iota
	opGet
	opAtomic
	opFetch
	opSwap
	opAck
	opReply
	opCTAcks
	opEnd
)

var le = binary.LittleEndian

func (h wireHdr) op() byte            { return h[1] }
func (h wireHdr) ni() int             { return int(h[2]) }
func (h wireHdr) ackReq() AckReq      { return AckReq(h[3]) }
func (h wireHdr) aop() AtomicOp       { return AtomicOp(h[4]) }
func (h wireHdr) dt() Datatype        { return Datatype(h[5]) }
func (h wireHdr) list() List          { return List(h[6]) }
func (h wireHdr) fail() NIFail        { return NIFail(h[7]) }
func (h wireHdr) pt() PTIndex         { return PTIndex(le.Uint32(h[8:])) }
func (h wireHdr) bits() MatchBits     { return MatchBits(le.Uint64(h[16:])) }
func (h wireHdr) roff() uint64        { return le.Uint64(h[24:]) }
func (h wireHdr) length() uint64      { return le.Uint64(h[32:]) }
func (h wireHdr) md() MDHandle        { return MDHandle(le.Uint64(h[40:])) }
func (h wireHdr) userPtr() uint64     { return le.Uint64(h[48:]) }
func (h wireHdr) hdrData() uint64     { return le.Uint64(h[56:]) }
func (h wireHdr) localOff() uint64    { return le.Uint64(h[64:]) }
func (h wireHdr) mlength() uint64     { return le.Uint64(h[72:]) }
func (h wireHdr) setMLength(v uint64) { le.PutUint64(h[72:], v) }

// request fills a request header.
func (h wireHdr) request(op byte, ni int, ack AckReq, aop AtomicOp, dt Datatype, pt PTIndex, bits MatchBits,
	roff, length uint64, md MDHandle, userPtr, hdrData, localOff uint64) {
	h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7] = wireMagic, op, byte(ni), byte(ack), byte(aop), byte(dt), 0, 0
	le.PutUint32(h[8:], uint32(pt))
	le.PutUint32(h[12:], 0)
	le.PutUint64(h[16:], uint64(bits))
	le.PutUint64(h[24:], roff)
	le.PutUint64(h[32:], length)
	le.PutUint64(h[40:], uint64(md))
	le.PutUint64(h[48:], userPtr)
	le.PutUint64(h[56:], hdrData)
	le.PutUint64(h[64:], localOff)
	le.PutUint64(h[72:], 0)
}

// response fills an ack or reply header answering request r.
func (h wireHdr) response(op byte, r wireHdr, list List, fail NIFail, off, mlength uint64) {
	h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7] = wireMagic, op, r[2], r[3], r[4], r[5], byte(list), byte(fail)
	copy(h[8:16], r[8:16])
	le.PutUint64(h[16:], 0)
	le.PutUint64(h[24:], off)
	le.PutUint64(h[32:], r.length())
	copy(h[40:72], r[40:72])
	le.PutUint64(h[72:], mlength)
}

// maxCTAcks bounds the acks one opCTAcks message stands for (a Batch run is at most 256
// messages; the bound keeps a hostile count from wrapping a sum).
const maxCTAcks = 1 << 16

// ctAcks fills a counting-acks header for logical NI ni and MD md.
func (h wireHdr) ctAcks(ni byte, md MDHandle, ok, fail, bytes uint64) {
	clear(h)
	h[0], h[1], h[2], h[3] = wireMagic, opCTAcks, ni, byte(CTAckReq)
	le.PutUint64(h[24:], ok)
	le.PutUint64(h[32:], fail)
	le.PutUint64(h[40:], uint64(md))
	le.PutUint64(h[72:], bytes)
}

func (h wireHdr) ackCounts() (ok, fail, bytes uint64) {
	return le.Uint64(h[24:]), le.Uint64(h[32:]), le.Uint64(h[72:])
}

// check validates a received header and the payload length against it: every field a
// receiver uses is in range and the payload is exactly as long as the header says. It is the
// only gate between the transport and the engine; nothing else trusts the bytes.
func (h wireHdr) check(payload []byte) bool {
	if len(h) != hdrLen || h[0] != wireMagic || h[1] == 0 || h[1] >= opEnd || h[2] > 3 ||
		le.Uint32(h[12:]) != 0 {
		return false
	}
	n := uint64(len(payload))
	switch h.op() {
	case opPut:
		return h.ackReq() <= OCAckReq && n == h.length() && h[4] == 0 && h[5] == 0
	case opGet:
		return n == 0 && h[3] == 0 && h[4] == 0 && h[5] == 0
	case opAtomic, opFetch, opSwap:
		sz := h.dt().Size()
		if sz == 0 || !legalAtomic(h.aop(), h.dt(), h.op()) {
			return false
		}
		if h.op() == opAtomic && h.ackReq() > OCAckReq || h.op() != opAtomic && h[3] != 0 {
			return false
		}
		if h.op() == opSwap {
			return n == h.length()+uint64(sz)
		}
		return n == h.length()
	case opAck:
		return n == 0 && h.ackReq() >= AckReqFull && h.ackReq() <= OCAckReq && h[6] <= 1 && h[7] < byte(numNIFail)
	case opCTAcks:
		ok, fail, _ := h.ackCounts()
		return n == 0 && h.ackReq() == CTAckReq && le.Uint32(h[4:]) == 0 && le.Uint64(h[8:]) == 0 &&
			le.Uint64(h[16:]) == 0 && ok <= maxCTAcks && fail <= maxCTAcks && ok+fail > 0 &&
			le.Uint64(h[48:]) == 0 && le.Uint64(h[56:]) == 0 && le.Uint64(h[64:]) == 0
	case opReply:
		return h[6] <= 1 && h[7] < byte(numNIFail) && n == h.mlength() && n <= h.length()
	}
	return false
}
