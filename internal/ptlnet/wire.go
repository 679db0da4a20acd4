package ptlnet

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// Wire formats. Every layout is a byte view with offset constants; every
// decoder checks each length field against the bytes it has before slicing
// and returns an error (never panics) on anything a peer may have written.

// Limits on what Send accepts and what a decoder believes.
const (
	// MaxHeaderSize is the largest hdr Send accepts (contract: at least 128).
	MaxHeaderSize = 192
	// MaxPayload is the largest payload Send accepts: 1 GiB.
	MaxPayload = 1 << 30
)

// errFrame is the class of every decoding failure (a malformed frame).
var errFrame = errors.New("ptlnet: malformed frame")

type frameError struct{ what string }

func (e *frameError) Error() string { return "ptlnet: malformed frame: " + e.what }
func (e *frameError) Unwrap() error { return errFrame }

func badFrame(what string) error { return &frameError{what} }

// ---------------------------------------------------------------------------
// Ring slot frames (shared-memory path). A slot's data (ring SlotSize bytes)
// holds one frame:
//
//	off size field
//	0   1    kind: slotEager, slotBulkFirst, slotBulkCont
//	1   1    reserved, 0
//	2   2    hdrLen (<= MaxHeaderSize; 0 for slotBulkCont)
//	4   4    n: eager payload length, or this chunk's length (bulk)
//	8        eager: hdr, then payload
//	8   4    bulk: pool buffer index holding the chunk
//	12  4    bulk: reserved, 0
//	16  8    bulkFirst: total payload length (<= MaxPayload)
//	24       bulkFirst: hdr
const (
	slotEager     = 1
	slotBulkFirst = 2
	slotBulkCont  = 3

	sOffKind   = 0
	sOffHdrLen = 2
	sOffN      = 4
	sOffEager  = 8
	sOffBuf    = 8
	sOffTotal  = 16
	sOffBulkH  = 24
)

// slotFrame is a decoded slot frame; hdr and payload alias the slot.
type slotFrame struct {
	kind    byte
	hdr     []byte // eager, bulkFirst
	payload []byte // eager
	n       int    // chunk length (bulk)
	buf     int    // pool buffer index (bulk)
	total   uint64 // bulkFirst
}

// eagerFits reports whether a message fits one slot of dataSize bytes.
func eagerFits(dataSize, hdrLen, payloadLen int) bool {
	return payloadLen <= dataSize && sOffEager+hdrLen+payloadLen <= dataSize
}

// putEager writes an eager frame into slot (eagerFits must hold).
func putEager(slot, hdr, payload []byte) {
	slot[sOffKind] = slotEager
	slot[1] = 0
	binary.LittleEndian.PutUint16(slot[sOffHdrLen:], uint16(len(hdr)))
	binary.LittleEndian.PutUint32(slot[sOffN:], uint32(len(payload)))
	copy(slot[sOffEager:], hdr)
	copy(slot[sOffEager+len(hdr):], payload)
}

// putBulk writes a bulk frame: first (with hdr and total) or a continuation.
func putBulk(slot []byte, first bool, hdr []byte, total uint64, buf, n int) {
	clear(slot[:sOffBulkH])
	if first {
		slot[sOffKind] = slotBulkFirst
		binary.LittleEndian.PutUint16(slot[sOffHdrLen:], uint16(len(hdr)))
		binary.LittleEndian.PutUint64(slot[sOffTotal:], total)
		copy(slot[sOffBulkH:], hdr)
	} else {
		slot[sOffKind] = slotBulkCont
	}
	binary.LittleEndian.PutUint32(slot[sOffN:], uint32(n))
	binary.LittleEndian.PutUint32(slot[sOffBuf:], uint32(buf))
}

// decodeSlot decodes the frame in a slot's data. bufSize bounds a bulk chunk
// and nbufs its buffer index.
func decodeSlot(d []byte, nbufs, bufSize int) (f slotFrame, err error) {
	err = decodeSlotInto(d, nbufs, bufSize, &f)
	return f, err
}

// decodeSlotInto is decodeSlot writing the frame into *f: the drain loop's way, without
// returning the frame by value (a copy of 80 bytes through the stack per message, read back
// with wider loads than it was written with).
func decodeSlotInto(d []byte, nbufs, bufSize int, f *slotFrame) error {
	*f = slotFrame{}
	if len(d) < sOffBulkH {
		return badFrame("slot of " + strconv.Itoa(len(d)) + " bytes, need " + strconv.Itoa(sOffBulkH))
	}
	f.kind = d[sOffKind]
	if d[1] != 0 {
		return badFrame("slot reserved byte set")
	}
	hl := int(binary.LittleEndian.Uint16(d[sOffHdrLen:]))
	n := uint64(binary.LittleEndian.Uint32(d[sOffN:]))
	if hl > MaxHeaderSize {
		return badFrame("header length " + strconv.Itoa(hl) + " > " + strconv.Itoa(MaxHeaderSize))
	}
	switch f.kind {
	case slotEager:
		if uint64(sOffEager+hl)+n > uint64(len(d)) {
			return badFrame("eager frame of " + strconv.Itoa(hl) + "+" + strconv.FormatUint(n, 10) +
				" bytes in a " + strconv.Itoa(len(d)) + "-byte slot")
		}
		f.hdr = d[sOffEager : sOffEager+hl : sOffEager+hl]
		end := sOffEager + hl + int(n)
		f.payload = d[sOffEager+hl : end : end]
		return nil
	case slotBulkFirst, slotBulkCont:
		if binary.LittleEndian.Uint32(d[12:]) != 0 {
			return badFrame("bulk reserved word set")
		}
		idx := binary.LittleEndian.Uint32(d[sOffBuf:])
		if uint64(idx) >= uint64(nbufs) {
			return badFrame("buffer index " + strconv.FormatUint(uint64(idx), 10) + " >= " + strconv.Itoa(nbufs))
		}
		if n > uint64(bufSize) || n == 0 {
			return badFrame("chunk of " + strconv.FormatUint(n, 10) + " bytes not in [1, " + strconv.Itoa(bufSize) + "]")
		}
		f.buf, f.n = int(idx), int(n)
		if f.kind == slotBulkCont {
			if hl != 0 || binary.LittleEndian.Uint64(d[sOffTotal:]) != 0 {
				return badFrame("continuation with a header or a total")
			}
			return nil
		}
		if sOffBulkH+hl > len(d) {
			return badFrame("bulk header of " + strconv.Itoa(hl) + " bytes overruns the slot")
		}
		f.total = binary.LittleEndian.Uint64(d[sOffTotal:])
		if f.total > MaxPayload || f.total < n {
			return badFrame("bulk total " + strconv.FormatUint(f.total, 10) + " not in [chunk, MaxPayload]")
		}
		f.hdr = d[sOffBulkH : sOffBulkH+hl : sOffBulkH+hl]
		return nil
	}
	return badFrame("slot kind " + strconv.Itoa(int(f.kind)))
}

// ---------------------------------------------------------------------------
// Connection hello (both transports), sent once by each side right after the
// connection is made (on TCP after the auth handshake):
//
//	off size field
//	0   4    magic "PTLN"
//	4   1    version (wireVersion)
//	5   1    kind: helloConnect, helloProbe
//	6   2    reserved, 0
//	8   4    nid
//	12  4    pid
//	16  4    uid
//	20  4    reserved, 0
const (
	helloMagic   = "PTLN"
	wireVersion  = 1
	helloSize    = 24
	helloConnect = 1
	helloProbe   = 2 // "do you hold this pid?": answered by a hello, then closed
)

type hello struct {
	kind byte
	id   PhysID
	uid  uint32
}

func (h hello) encode(b *[helloSize]byte) {
	*b = [helloSize]byte{}
	copy(b[:4], helloMagic)
	b[4] = wireVersion
	b[5] = h.kind
	binary.LittleEndian.PutUint32(b[8:], h.id.NID)
	binary.LittleEndian.PutUint32(b[12:], h.id.PID)
	binary.LittleEndian.PutUint32(b[16:], h.uid)
}

func decodeHello(b []byte) (h hello, err error) {
	switch {
	case len(b) != helloSize:
		return h, badFrame("hello of " + strconv.Itoa(len(b)) + " bytes, want " + strconv.Itoa(helloSize))
	case string(b[:4]) != helloMagic:
		return h, badFrame("hello magic")
	case b[4] != wireVersion:
		return h, badFrame("hello version " + strconv.Itoa(int(b[4])))
	case b[5] != helloConnect && b[5] != helloProbe:
		return h, badFrame("hello kind " + strconv.Itoa(int(b[5])))
	case b[6]|b[7]|b[20]|b[21]|b[22]|b[23] != 0:
		return h, badFrame("hello reserved bytes set")
	}
	h.kind = b[5]
	h.id = PhysID{NID: binary.LittleEndian.Uint32(b[8:]), PID: binary.LittleEndian.Uint32(b[12:])}
	h.uid = binary.LittleEndian.Uint32(b[16:])
	if h.id.PID == PIDAny {
		return h, badFrame("hello pid PIDAny")
	}
	return h, nil
}

// ---------------------------------------------------------------------------
// TCP frames: a 16-byte header, then hdr, then payload.
//
//	off size field
//	0   2    magic 0x5450 ("PT")
//	2   2    hdrLen (<= MaxHeaderSize)
//	4   4    reserved, 0
//	8   8    payload length (<= MaxPayload)
const (
	tcpMagic     = 0x5450
	tcpFrameSize = 16
)

func putTCPHeader(b []byte, hdrLen int, payloadLen uint64) {
	binary.LittleEndian.PutUint16(b[0:], tcpMagic)
	binary.LittleEndian.PutUint16(b[2:], uint16(hdrLen))
	binary.LittleEndian.PutUint32(b[4:], 0)
	binary.LittleEndian.PutUint64(b[8:], payloadLen)
}

func decodeTCPHeader(b []byte) (hdrLen int, payloadLen int, err error) {
	if len(b) < tcpFrameSize {
		return 0, 0, badFrame("tcp frame header of " + strconv.Itoa(len(b)) + " bytes")
	}
	if binary.LittleEndian.Uint16(b[0:]) != tcpMagic {
		return 0, 0, badFrame("tcp frame magic")
	}
	if binary.LittleEndian.Uint32(b[4:]) != 0 {
		return 0, 0, badFrame("tcp frame reserved word set")
	}
	hl := int(binary.LittleEndian.Uint16(b[2:]))
	if hl > MaxHeaderSize {
		return 0, 0, badFrame("tcp header length " + strconv.Itoa(hl) + " > " + strconv.Itoa(MaxHeaderSize))
	}
	pl := binary.LittleEndian.Uint64(b[8:])
	if pl > MaxPayload {
		return 0, 0, badFrame("tcp payload length " + strconv.FormatUint(pl, 10) + " > MaxPayload")
	}
	return hl, int(pl), nil
}
