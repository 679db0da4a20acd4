package smp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gexgo/gexgo/internal/conduit"
)

// An AM travels through a peer's inbound ring as one message (shm.MsgRing):
// one or more consecutive 64-byte slots, the ring's 8-byte word first. The
// message data is laid out as below; the sender writes every field (and an
// inline payload), then commits the message (an atomic store of its tag), so
// the receiver sees a complete message or none.
//
//	off size field
//	0   1    kind: bits 0-1 category (1 Short, 2 Medium, 3 Long), bit 2 request,
//	         bit 3 payload inline in the message, bit 4 Long payload already placed
//	1   1    handler index
//	2   1    nargs (0..16)
//	3   1    payload buffer index in the sender's pool for this receiver (a
//	         Prepare'd payload; the pool has poolBufs buffers)
//	4   4    source job rank
//	8   4    payload length in bytes
//	12  2    destination endpoint index (gex_EP_Index_t)
//	14  2    source endpoint index
//	16  8    Long destination address (owner's address)
//	24  4*n  args: nargs x int32
//	...      inline payload, at payloadOff(nargs): 24 + 4*nargs rounded up to
//	         16, which puts it 16-byte aligned in memory ("suitably aligned to
//	         hold any datatype", GASNet-1 "Active Message Request")
//
// A Short with up to 8 args fills exactly one slot (one cache line moves to
// the receiver); a Medium occupies as many slots as its payload needs, and
// the handler reads the payload in place.
const (
	offKind    = 0
	offHandler = 1
	offNArgs   = 2
	offBuf     = 3
	offSrc     = 4
	offNBytes  = 8
	offEP      = 12
	offSrcEP   = 14
	offDest    = 16
	offArgs    = 24

	kindCatMask = 0x3
	kindReq     = 1 << 2
	kindInline  = 1 << 3
	kindPlaced  = 1 << 4
	kindKnown   = kindCatMask | kindReq | kindInline | kindPlaced
)

// argsEnd is the length of a message's header and nargs args.
func argsEnd(nargs int) int { return offArgs + 4*nargs }

// payloadOff is where an inline payload starts in a message of nargs args.
func payloadOff(nargs int) int { return offArgs + (4*nargs+15)&^15 }

// slotMeta is what a message says about its payload and sender, beside the
// conduit.Header.
type slotMeta struct {
	Src    int
	NBytes int
	Buf    int  // pool index when neither Inline nor Placed
	Inline bool // payload follows the args in the message
	Placed bool // Long payload already written into the destination segment
}

// slotHeader is the decoded form of a message (tests and fuzzing).
type slotHeader struct {
	conduit.Header
	slotMeta
}

// encodeSlot writes the header h from src into message data s: payload
// length n and either kindInline in flags (the caller copies the payload to
// s[payloadOff(nargs):]), a pool buffer index buf, or a Long already placed
// (kindPlaced). s is at least argsEnd(h.NArgs) bytes long.
func encodeSlot(s []byte, h *conduit.Header, src, n, buf int, flags byte) {
	k := byte(h.Cat)&kindCatMask | flags
	if h.IsReq {
		k |= kindReq
	}
	nargs := min(int(h.NArgs), conduit.MaxArgs)
	_ = s[argsEnd(nargs)-1]
	s[offKind] = k
	s[offHandler] = h.Handler
	s[offNArgs] = h.NArgs
	s[offBuf] = byte(buf)
	binary.LittleEndian.PutUint32(s[offSrc:], uint32(src))
	binary.LittleEndian.PutUint32(s[offNBytes:], uint32(n))
	binary.LittleEndian.PutUint16(s[offEP:], h.EP)
	binary.LittleEndian.PutUint16(s[offSrcEP:], h.SrcEP)
	binary.LittleEndian.PutUint64(s[offDest:], h.Dest)
	a := s[offArgs : offArgs+4*nargs]
	for i := range nargs {
		binary.LittleEndian.PutUint32(a[4*i:], uint32(h.Args[i]))
	}
}

// encodeShort is encodeSlot for a Short from its fields: the same bytes
// (TestEncodeShort), written as two 8-byte words, the destination word
// and the args. len(args) <= conduit.MaxArgs and s is at least
// argsEnd(len(args)) bytes long.
func encodeShort(s []byte, isReq bool, handler uint8, ep, srcEP uint16, src int, args []int32) {
	k := byte(conduit.Short)
	if isReq {
		k |= kindReq
	}
	encodeFields(s, k, handler, ep, srcEP, src, 0, -1, args)
}

// encodeFields is encodeSlot from the header's fields, with destination 0:
// the same bytes (TestEncodeShort, TestEncodeMedium, TestEncodeMediumPooled).
// buf is the pool buffer index of a pooled Medium, or -1 for a message
// without one (a Short, a placed Long, or a Medium with kindInline in kind,
// whose n bytes of payload the caller copies to payloadOff(len(args))).
// len(args) <= conduit.MaxArgs and s is at least argsEnd(len(args)) bytes
// long.
func encodeFields(s []byte, kind, handler uint8, ep, srcEP uint16, src, n, buf int, args []int32) {
	nargs := len(args)
	_ = s[argsEnd(nargs)-1]
	// kind, handler, nargs, buf (byte(-1) = 0xff: none, as encodeSlot
	// writes it), src; then nbytes, ep, srcEP.
	binary.LittleEndian.PutUint64(s[offKind:], uint64(kind)|uint64(handler)<<8|uint64(nargs)<<16|uint64(byte(buf))<<24|uint64(uint32(src))<<32)
	binary.LittleEndian.PutUint64(s[offNBytes:], uint64(uint32(n))|uint64(ep)<<32|uint64(srcEP)<<48)
	binary.LittleEndian.PutUint64(s[offDest:], 0)
	a := s[offArgs : offArgs+4*nargs]
	for i, v := range args {
		binary.LittleEndian.PutUint32(a[4*i:], uint32(v))
	}
}

// encodeSlotHeader is encodeSlot for a decoded header, payload included
// (tests, fuzzing).
func encodeSlotHeader(s []byte, h *slotHeader, payload []byte) {
	var f byte
	if h.Inline {
		f |= kindInline
	}
	if h.Placed {
		f |= kindPlaced
	}
	encodeSlot(s, &h.Header, h.Src, h.NBytes, h.Buf, f)
	if h.Inline {
		copy(s[payloadOff(int(h.NArgs)):], payload)
	}
}

// decodeSlotHeader is decodeSlot into a slotHeader.
func decodeSlotHeader(s []byte, h *slotHeader, size, maxPayload int) error {
	return decodeSlot(s, &h.Header, &h.slotMeta, size, maxPayload)
}

// The payload buffer index travels in one byte.
const _ uint8 = poolBufs - 1

var errSlot = errors.New("smp: malformed AM slot")

// decodeSlot parses message data s into h and m. It checks everything that
// can be checked without the receiver's tables: category, nargs (against
// the message's length too), source rank against size, payload length
// against maxPayload (and the message for inline payloads). It never panics,
// whatever s holds; on error h may be partly overwritten.
//
// Every check is made on the two header words at once, in one condition;
// a message that fails any goes to slotErr, which finds and words the
// error (out of line: the drain's common path carries no formatting).
func decodeSlot(s []byte, h *conduit.Header, m *slotMeta, size, maxPayload int) error {
	if len(s) < offArgs {
		return slotErr(s, size, maxPayload)
	}
	w0 := binary.LittleEndian.Uint64(s[offKind:])   // kind, handler, nargs, buf, src
	w1 := binary.LittleEndian.Uint64(s[offNBytes:]) // nbytes, ep, srcEP
	k := byte(w0)
	cat := conduit.Category(k & kindCatMask)
	nargs := int(byte(w0 >> 16))
	src := uint32(w0 >> 32)
	n := uint32(w1)
	inline, placed := k&kindInline != 0, k&kindPlaced != 0
	if k&^kindKnown != 0 || cat == 0 || nargs > conduit.MaxArgs || argsEnd(nargs) > len(s) ||
		int64(src) >= int64(size) || cat == conduit.Short && n != 0 || int64(n) > int64(maxPayload) ||
		inline && int64(n) > int64(len(s)-payloadOff(nargs)) || placed && (cat != conduit.Long || inline) {
		return slotErr(s, size, maxPayload)
	}
	h.Cat, h.IsReq, h.Handler, h.NArgs = cat, k&kindReq != 0, byte(w0>>8), uint8(nargs)
	h.Dest = binary.LittleEndian.Uint64(s[offDest:])
	h.EP, h.SrcEP = uint16(w1>>32), uint16(w1>>48)
	a := s[offArgs : offArgs+4*nargs]
	for i := range nargs {
		h.Args[i] = int32(binary.LittleEndian.Uint32(a[4*i:]))
	}
	m.Src, m.NBytes, m.Inline, m.Placed = int(src), int(n), inline, placed
	m.Buf = int(byte(w0 >> 24))
	return nil
}

// slotErr is decodeSlot's error for a message that failed its checks.
func slotErr(s []byte, size, maxPayload int) error {
	var h conduit.Header
	var m slotMeta
	if err := decodeSlotChecked(s, &h, &m, size, maxPayload); err != nil {
		return err
	}
	return errSlot // not reached: both make the same checks (FuzzDecodeSlotAgrees)
}

// decodeSlotChecked is decodeSlot written one check at a time, each with
// its own error.
func decodeSlotChecked(s []byte, h *conduit.Header, m *slotMeta, size, maxPayload int) error {
	if len(s) < offArgs {
		return fmt.Errorf("%w: message of %d bytes is shorter than the %d-byte header", errSlot, len(s), offArgs)
	}
	k := s[offKind]
	if k&^kindKnown != 0 {
		return fmt.Errorf("%w: unknown kind bits %#x", errSlot, k)
	}
	cat := conduit.Category(k & kindCatMask)
	if cat < conduit.Short || cat > conduit.Long {
		return fmt.Errorf("%w: category %d", errSlot, cat)
	}
	nargs := int(s[offNArgs])
	if nargs > conduit.MaxArgs {
		return fmt.Errorf("%w: nargs %d exceeds %d", errSlot, nargs, conduit.MaxArgs)
	}
	if argsEnd(nargs) > len(s) {
		return fmt.Errorf("%w: %d args do not fit the %d-byte message", errSlot, nargs, len(s))
	}
	src := binary.LittleEndian.Uint32(s[offSrc:])
	if int64(src) >= int64(size) {
		return fmt.Errorf("%w: source rank %d out of range (job size %d)", errSlot, src, size)
	}
	n := binary.LittleEndian.Uint32(s[offNBytes:])
	if cat == conduit.Short && n != 0 {
		return fmt.Errorf("%w: Short with payload length %d", errSlot, n)
	}
	if int64(n) > int64(maxPayload) {
		return fmt.Errorf("%w: payload length %d exceeds %d", errSlot, n, maxPayload)
	}
	inline := k&kindInline != 0
	if inline && int64(n) > int64(len(s)-payloadOff(nargs)) {
		return fmt.Errorf("%w: inline payload length %d exceeds the message's %d bytes", errSlot, n, max(0, len(s)-payloadOff(nargs)))
	}
	placed := k&kindPlaced != 0
	if placed && (cat != conduit.Long || inline) {
		return fmt.Errorf("%w: placed flag on a %v (inline=%v)", errSlot, cat, inline)
	}
	h.Cat, h.IsReq, h.Handler, h.NArgs = cat, k&kindReq != 0, s[offHandler], uint8(nargs)
	h.Dest = binary.LittleEndian.Uint64(s[offDest:])
	h.EP = binary.LittleEndian.Uint16(s[offEP:])
	h.SrcEP = binary.LittleEndian.Uint16(s[offSrcEP:])
	a := s[offArgs : offArgs+4*nargs]
	for i := range nargs {
		h.Args[i] = int32(binary.LittleEndian.Uint32(a[4*i:]))
	}
	m.Src, m.NBytes, m.Inline, m.Placed = int(src), int(n), inline, placed
	m.Buf = int(s[offBuf])
	return nil
}
