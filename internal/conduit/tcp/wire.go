// Package tcp is the tcp conduit's transport (ranks across hosts), the smp
// conduit's Remote: the frame codec for Active Messages and control messages
// on a TCP stream (wire.go), the send path with its batcher of small frames
// (transport.go, batch.go), the receive path run by the polling goroutine
// (rx.go), the waker of the block wait mode (waker.go), the per-job secret
// handshake every connection runs before its first frame (package
// internal/auth), and listening, dialing and accepting (listen.go).
package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gexgo/gexgo/internal/conduit"
)

// A TCP stream between two ranks carries a sequence of frames. Every frame is
// a fixed 20-byte little-endian header, then nargs 4-byte handler arguments,
// then the payload:
//
//	off  size  field
//	0    1     magic and version: 0xE0 | frameVersion (0xE2)
//	1    1     kind: bits 0-1 category (0 control frame, 1 Short, 2 Medium,
//	           3 Long), bit 2 request (AM frames only); other bits 0
//	2    1     AM: handler index; control frame: op (ctrlOp)
//	3    1     AM: nargs (0..conduit.MaxArgs); control frame: 0
//	4    4     payload length in bytes (0 for Short)
//	8    8     Long: destination address in the target's segment (the owner's
//	           address); control frame: op-specific value; else 0
//	16   2     AM: destination endpoint index (gex_EP_Index_t); control: 0
//	18   2     AM: source endpoint index; control frame: 0
//	20   4*n   AM: args[0..nargs) as int32
//	20+4n len  payload
//
// The categories and the argument limit are the GASNet-EX ones: "There are
// three categories of active messages" (GASNet-1 spec §2.3.1, Short, Medium,
// Long), and "'numargs' must be between 0 and gex_AM_MaxArgs(), inclusive"
// (GASNet-EX API, "Active Messages", gex_AM_MaxArgs = conduit.MaxArgs = 16).
// Only the args actually used travel, so a Short with no arguments is 20
// bytes on the wire. Version 2 added the endpoint indices (Memory Kinds,
// "gex_EP_Create"); the receiver checks the destination index against its
// endpoints.
const (
	offMagic   = 0
	offKind    = 1
	offHandler = 2 // control frames: offOp
	offOp      = 2
	offNArgs   = 3
	offLen     = 4
	offDest    = 8 // control frames: offValue
	offValue   = 8
	offEP      = 16
	offSrcEP   = 18
	offArgs    = 20

	frameFixed   = offArgs                     // fixed part of every frame header
	frameMaxHead = offArgs + 4*conduit.MaxArgs // largest frame header (16 args)
	frameMagic   = 0xE0                        // high nibble of byte 0
	frameVersion = 2                           // low nibble of byte 0
	frameByte0   = frameMagic | frameVersion   // byte 0 of every frame
	kindCatMask  = 0x3                         // category bits of the kind byte
	kindReq      = 1 << 2                      // request bit of the kind byte
	kindKnown    = kindCatMask | kindReq       // all defined kind bits
	catControl   = 0                           // kind category of a control frame
	maxCtrlBytes = 64 << 10                    // largest control-frame payload
)

// ctrlOp is the op of a control frame: the conduit's own messages, never seen
// by gex.
type ctrlOp uint8

// Control ops. The meaning of Value and the payload is the conduit's; the
// codec only checks the op is known and the payload within maxCtrlBytes.
const (
	ctrlHello   ctrlOp = 1 // first frame after the handshake: Value = sender's limits/flags
	ctrlSegInfo ctrlOp = 2 // segment information: Value = owner base, payload = details
	ctrlClose   ctrlOp = 3 // orderly close: Value = exit code
	ctrlPing    ctrlOp = 4 // liveness probe / progress nudge: Value = sequence
	ctrlMax     ctrlOp = ctrlPing
)

func (o ctrlOp) String() string {
	switch o {
	case ctrlHello:
		return "hello"
	case ctrlSegInfo:
		return "segment-info"
	case ctrlClose:
		return "close"
	case ctrlPing:
		return "ping"
	}
	return fmt.Sprintf("ctrlOp(%d)", uint8(o))
}

// frameHeader is a decoded frame header. For an AM frame Header holds the AM
// (Cat 1..3); for a control frame Header.Cat is 0 and Op and Value hold the
// control message.
type frameHeader struct {
	conduit.Header
	Op     ctrlOp
	Value  uint64
	NBytes int // payload length
}

// Control reports whether h is a control frame.
func (h *frameHeader) Control() bool { return h.Cat == catControl }

// headLen is the encoded length of a frame header with nargs arguments.
func headLen(nargs int) int { return frameFixed + 4*nargs }

// frameLen is the encoded length of a whole frame.
func (h *frameHeader) frameLen() int { return headLen(int(h.NArgs)) + h.NBytes }

// ErrFrame is wrapped by every decoding error: the stream is corrupt or
// hostile and the connection must be dropped.
var ErrFrame = errors.New("tcp: malformed frame")

// appendAMHeader appends the header of an AM frame whose payload of n bytes
// the caller sends next. The caller has checked h (category, nargs, n against
// the limits): appendAMHeader encodes what it is given, clamping nargs to
// conduit.MaxArgs so that it cannot overrun. It does not allocate when buf has
// room for frameMaxHead more bytes.
func appendAMHeader(buf []byte, h *conduit.Header, n int) []byte {
	nargs := min(int(h.NArgs), conduit.MaxArgs)
	k := byte(h.Cat) & kindCatMask
	if h.IsReq {
		k |= kindReq
	}
	var dest uint64
	if h.Cat == conduit.Long {
		dest = h.Dest
	}
	start := len(buf)
	buf = grow(buf, headLen(nargs))
	s := buf[start:]
	s[offMagic] = frameByte0
	s[offKind] = k
	s[offHandler] = h.Handler
	s[offNArgs] = byte(nargs)
	binary.LittleEndian.PutUint32(s[offLen:], uint32(n))
	binary.LittleEndian.PutUint64(s[offDest:], dest)
	binary.LittleEndian.PutUint16(s[offEP:], h.EP)
	binary.LittleEndian.PutUint16(s[offSrcEP:], h.SrcEP)
	a := s[offArgs:]
	for i := 0; i < nargs; i++ {
		binary.LittleEndian.PutUint32(a[4*i:], uint32(h.Args[i]))
	}
	return buf
}

// appendAM appends a whole AM frame: header and payload.
func appendAM(buf []byte, h *conduit.Header, payload []byte) []byte {
	return append(appendAMHeader(buf, h, len(payload)), payload...)
}

// appendControlHeader appends the header of a control frame with an n-byte
// payload.
func appendControlHeader(buf []byte, op ctrlOp, value uint64, n int) []byte {
	start := len(buf)
	buf = grow(buf, frameFixed)
	s := buf[start:]
	s[offMagic] = frameByte0
	s[offKind] = catControl
	s[offOp] = byte(op)
	s[offNArgs] = 0
	binary.LittleEndian.PutUint32(s[offLen:], uint32(n))
	binary.LittleEndian.PutUint64(s[offValue:], value)
	binary.LittleEndian.PutUint32(s[offEP:], 0)
	return buf
}

// appendControl appends a whole control frame.
func appendControl(buf []byte, op ctrlOp, value uint64, payload []byte) []byte {
	return append(appendControlHeader(buf, op, value, len(payload)), payload...)
}

// appendFrame appends a decoded header and its payload (tests and fuzzing).
func appendFrame(buf []byte, h *frameHeader, payload []byte) []byte {
	if h.Control() {
		return appendControl(buf, h.Op, h.Value, payload)
	}
	return appendAM(buf, &h.Header, payload)
}

// grow extends buf by n bytes, reallocating only when its capacity is short.
func grow(buf []byte, n int) []byte {
	if cap(buf)-len(buf) < n {
		nb := make([]byte, len(buf), 2*cap(buf)+n)
		copy(nb, buf)
		buf = nb
	}
	return buf[:len(buf)+n]
}

// decodeFixed parses the 16-byte fixed part of a frame header from s into h
// and checks everything it holds against maxPayload (the largest AM payload
// the receiver accepts). It returns the full header length (fixed part plus
// args). It never panics, whatever s holds.
func decodeFixed(s []byte, h *frameHeader, maxPayload int) (int, error) {
	if len(s) < frameFixed {
		return 0, fmt.Errorf("%w: %d bytes is shorter than the %d-byte frame header", ErrFrame, len(s), frameFixed)
	}
	if s[offMagic] != frameByte0 {
		if s[offMagic]&0xF0 == frameMagic {
			return 0, fmt.Errorf("%w: frame version %d, this side speaks %d", ErrFrame, s[offMagic]&0x0F, frameVersion)
		}
		return 0, fmt.Errorf("%w: bad magic byte %#02x (want %#02x)", ErrFrame, s[offMagic], frameByte0)
	}
	k := s[offKind]
	if k&^kindKnown != 0 {
		return 0, fmt.Errorf("%w: unknown kind bits %#02x", ErrFrame, k)
	}
	cat := conduit.Category(k & kindCatMask)
	n := binary.LittleEndian.Uint32(s[offLen:])
	v := binary.LittleEndian.Uint64(s[offDest:])
	nargs := s[offNArgs]
	if cat == catControl {
		op := ctrlOp(s[offOp])
		switch {
		case k&kindReq != 0:
			return 0, fmt.Errorf("%w: request bit on a control frame", ErrFrame)
		case op == 0 || op > ctrlMax:
			return 0, fmt.Errorf("%w: unknown control op %d", ErrFrame, op)
		case nargs != 0:
			return 0, fmt.Errorf("%w: control frame with nargs %d", ErrFrame, nargs)
		case binary.LittleEndian.Uint32(s[offEP:]) != 0:
			return 0, fmt.Errorf("%w: control frame with endpoint indices", ErrFrame)
		case n > maxCtrlBytes:
			return 0, fmt.Errorf("%w: %v control payload length %d exceeds %d", ErrFrame, op, n, maxCtrlBytes)
		}
		*h = frameHeader{Op: op, Value: v, NBytes: int(n)}
		return frameFixed, nil
	}
	switch {
	case nargs > conduit.MaxArgs:
		return 0, fmt.Errorf("%w: nargs %d exceeds gex_AM_MaxArgs %d", ErrFrame, nargs, conduit.MaxArgs)
	case cat == conduit.Short && n != 0:
		return 0, fmt.Errorf("%w: Short with payload length %d", ErrFrame, n)
	case int64(n) > int64(maxPayload):
		return 0, fmt.Errorf("%w: %v payload length %d exceeds the maximum %d", ErrFrame, cat, n, maxPayload)
	case cat != conduit.Long && v != 0:
		return 0, fmt.Errorf("%w: %v with a destination address %#x", ErrFrame, cat, v)
	}
	h.Header = conduit.Header{Cat: cat, IsReq: k&kindReq != 0, Handler: s[offHandler], NArgs: nargs, Dest: v,
		EP: binary.LittleEndian.Uint16(s[offEP:]), SrcEP: binary.LittleEndian.Uint16(s[offSrcEP:])}
	h.Op, h.Value, h.NBytes = 0, 0, int(n)
	return headLen(int(nargs)), nil
}

// decodeArgs fills h.Args from the args part of an encoded header s (whose
// fixed part decodeFixed accepted). len(s) must be at least headLen(h.NArgs).
func decodeArgs(s []byte, h *frameHeader) {
	a := s[offArgs:headLen(int(h.NArgs))]
	for i := 0; i < int(h.NArgs); i++ {
		h.Args[i] = int32(binary.LittleEndian.Uint32(a[4*i:]))
	}
}

// parseFrame decodes one whole frame at the start of b. It returns the header,
// the payload (a sub-slice of b, no copy) and the frame's length. If b holds
// only part of a valid frame it returns io.ErrUnexpectedEOF (wait for more
// bytes); any other error wraps ErrFrame. It never panics and never allocates.
func parseFrame(b []byte, h *frameHeader, maxPayload int) (payload []byte, n int, err error) {
	if len(b) < frameFixed {
		return nil, 0, io.ErrUnexpectedEOF
	}
	hl, err := decodeFixed(b, h, maxPayload)
	if err != nil {
		return nil, 0, err
	}
	if len(b) < hl+h.NBytes {
		return nil, 0, io.ErrUnexpectedEOF
	}
	decodeArgs(b, h)
	return b[hl : hl+h.NBytes : hl+h.NBytes], hl + h.NBytes, nil
}
