package smp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gexgo/gexgo/internal/conduit"
)

// An AM travels through a peer's inbound ring as one fixed-size slot. The
// slot's data (after the ring's own sequence word) is laid out as below; the
// sender writes every field, then commits the slot (a release store of the
// ring's sequence word), so the receiver sees a complete slot or none.
//
//	off size field
//	0   1    kind: bits 0-1 category (1 Short, 2 Medium, 3 Long), bit 2 request,
//	         bit 3 payload inline in the slot, bit 4 Long payload already placed
//	1   1    handler index
//	2   1    nargs (0..16)
//	3   1    payload buffer index in the sender's pool for this receiver (not
//	         inline; the pool has poolBufs buffers)
//	4   4    source job rank
//	8   4    payload length in bytes
//	12  2    destination endpoint index (gex_EP_Index_t)
//	14  2    source endpoint index
//	16  8    Long destination address (owner's address)
//	24  64   args: 16 x int32, the first nargs meaningful
//	88  ...  inline payload
//
// Everything but the args beyond the eighth and the inline payload lies in
// the slot's first cache line (with the ring's sequence word), so a Short
// with few args moves one line between the cores.
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
	offInline  = 88

	kindCatMask = 0x3
	kindReq     = 1 << 2
	kindInline  = 1 << 3
	kindPlaced  = 1 << 4
	kindKnown   = kindCatMask | kindReq | kindInline | kindPlaced
)

// slotHeader is the decoded form of a slot.
type slotHeader struct {
	conduit.Header
	Src    int
	NBytes int
	Buf    int  // pool index when !Inline
	Inline bool // payload follows the header in the slot
	Placed bool // Long payload already written into the destination segment
}

// encodeSlot writes an AM into the slot data s: the header h from src, with
// payload length n and either the payload inline (kindInline in flags), a pool
// buffer index buf, or a Long already placed (kindPlaced). The caller
// guarantees that an inline payload fits.
func encodeSlot(s []byte, h *conduit.Header, src, n, buf int, flags byte, payload []byte) {
	k := byte(h.Cat)&kindCatMask | flags
	if h.IsReq {
		k |= kindReq
	}
	_ = s[offInline-1]
	s[offKind] = k
	s[offHandler] = h.Handler
	s[offNArgs] = h.NArgs
	s[offBuf] = byte(buf)
	binary.LittleEndian.PutUint32(s[offSrc:], uint32(src))
	binary.LittleEndian.PutUint32(s[offNBytes:], uint32(n))
	binary.LittleEndian.PutUint64(s[offDest:], h.Dest)
	a := s[offArgs : offArgs+4*conduit.MaxArgs]
	for i := 0; i < int(h.NArgs) && i < conduit.MaxArgs; i++ {
		binary.LittleEndian.PutUint32(a[4*i:], uint32(h.Args[i]))
	}
	binary.LittleEndian.PutUint16(s[offEP:], h.EP)
	binary.LittleEndian.PutUint16(s[offSrcEP:], h.SrcEP)
	if flags&kindInline != 0 {
		copy(s[offInline:], payload)
	}
}

// encodeSlotHeader is encodeSlot for a decoded header (tests, fuzzing).
func encodeSlotHeader(s []byte, h *slotHeader, payload []byte) {
	var f byte
	if h.Inline {
		f |= kindInline
	}
	if h.Placed {
		f |= kindPlaced
	}
	encodeSlot(s, &h.Header, h.Src, h.NBytes, h.Buf, f, payload)
}

// The payload buffer index travels in one byte.
const _ uint8 = poolBufs - 1

var errSlot = errors.New("smp: malformed AM slot")

// decodeSlot parses slot data s into h. It checks everything that can be
// checked without the receiver's tables: category, nargs, source rank against
// size, payload length against maxPayload (and the slot for inline payloads).
// It never panics, whatever s holds.
func decodeSlot(s []byte, h *slotHeader, size, maxPayload int) error {
	if len(s) < offInline {
		return fmt.Errorf("%w: slot of %d bytes is shorter than the %d-byte header", errSlot, len(s), offInline)
	}
	k := s[offKind]
	if k&^kindKnown != 0 {
		return fmt.Errorf("%w: unknown kind bits %#x", errSlot, k)
	}
	cat := conduit.Category(k & kindCatMask)
	if cat < conduit.Short || cat > conduit.Long {
		return fmt.Errorf("%w: category %d", errSlot, cat)
	}
	nargs := s[offNArgs]
	if nargs > conduit.MaxArgs {
		return fmt.Errorf("%w: nargs %d exceeds %d", errSlot, nargs, conduit.MaxArgs)
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
	if inline && int64(n) > int64(len(s)-offInline) {
		return fmt.Errorf("%w: inline payload length %d exceeds the slot's %d bytes", errSlot, n, len(s)-offInline)
	}
	placed := k&kindPlaced != 0
	if placed && (cat != conduit.Long || inline) {
		return fmt.Errorf("%w: placed flag on a %v (inline=%v)", errSlot, cat, inline)
	}
	h.Cat, h.IsReq, h.Handler, h.NArgs = cat, k&kindReq != 0, s[offHandler], nargs
	h.Src, h.NBytes, h.Inline, h.Placed = int(src), int(n), inline, placed
	h.Buf = int(s[offBuf])
	h.Dest = binary.LittleEndian.Uint64(s[offDest:])
	h.EP = binary.LittleEndian.Uint16(s[offEP:])
	h.SrcEP = binary.LittleEndian.Uint16(s[offSrcEP:])
	a := s[offArgs : offArgs+4*conduit.MaxArgs]
	for i := 0; i < int(nargs); i++ {
		h.Args[i] = int32(binary.LittleEndian.Uint32(a[4*i:]))
	}
	return nil
}
