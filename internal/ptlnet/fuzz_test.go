package ptlnet

import (
	"bytes"
	"testing"
)

// Fuzzers for every decoder of bytes a peer writes, seeded from the encoders.

func FuzzDecodeSlot(f *testing.F) {
	const ds = txEagerMax
	d := make([]byte, ds)
	putEager(d, []byte("header"), []byte("payload"))
	f.Add(bytes.Clone(d))
	putEager(d, make([]byte, MaxHeaderSize), make([]byte, ds-8-MaxHeaderSize))
	f.Add(bytes.Clone(d))
	putBulk(d, true, []byte("hdr"), 1<<20, 3, txBufSize)
	f.Add(bytes.Clone(d))
	putBulk(d, false, nil, 0, txBufs-1, 17)
	f.Add(bytes.Clone(d))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeSlot(b, txBufs, txBufSize)
		if err != nil {
			return
		}
		if len(fr.hdr) > MaxHeaderSize || cap(fr.hdr) > len(b) || cap(fr.payload) > len(b) {
			t.Fatalf("views out of bounds: hdr %d, payload %d, slot %d", len(fr.hdr), len(fr.payload), len(b))
		}
		e := make([]byte, len(b))
		switch fr.kind {
		case slotEager:
			if !eagerFits(len(b), len(fr.hdr), len(fr.payload)) {
				t.Fatalf("decoded an eager frame that does not fit: %d+%d in %d", len(fr.hdr), len(fr.payload), len(b))
			}
			putEager(e, fr.hdr, fr.payload)
			n := sOffEager + len(fr.hdr) + len(fr.payload)
			if !bytes.Equal(e[:n], b[:n]) {
				t.Fatal("re-encoding differs")
			}
		case slotBulkFirst, slotBulkCont:
			if fr.buf < 0 || fr.buf >= txBufs || fr.n < 1 || fr.n > txBufSize {
				t.Fatalf("bulk frame out of bounds: buf %d n %d", fr.buf, fr.n)
			}
			if fr.kind == slotBulkFirst && (fr.total > MaxPayload || fr.total < uint64(fr.n)) {
				t.Fatalf("bulk total %d", fr.total)
			}
			putBulk(e, fr.kind == slotBulkFirst, fr.hdr, fr.total, fr.buf, fr.n)
			n := sOffBulkH + len(fr.hdr)
			if !bytes.Equal(e[:n], b[:n]) {
				t.Fatal("re-encoding differs")
			}
		default:
			t.Fatalf("decoded kind %d", fr.kind)
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	var b [helloSize]byte
	hello{kind: helloConnect, id: PhysID{0x0a000001, 5}, uid: 1000}.encode(&b)
	f.Add(b[:])
	hello{kind: helloProbe, id: PhysID{1, 0}}.encode(&b)
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := decodeHello(in)
		if err != nil {
			return
		}
		h.encode(&b)
		if !bytes.Equal(b[:], in) {
			t.Fatalf("re-encoding %+v differs", h)
		}
	})
}

func FuzzDecodeTCPHeader(f *testing.F) {
	var b [tcpFrameSize]byte
	putTCPHeader(b[:], 64, 8)
	f.Add(b[:])
	putTCPHeader(b[:], MaxHeaderSize, MaxPayload)
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, in []byte) {
		hl, pl, err := decodeTCPHeader(in)
		if err != nil {
			return
		}
		if hl < 0 || hl > MaxHeaderSize || pl < 0 || pl > MaxPayload {
			t.Fatalf("decoded hdr %d payload %d", hl, pl)
		}
		putTCPHeader(b[:], hl, uint64(pl))
		if !bytes.Equal(b[:], in[:tcpFrameSize]) {
			t.Fatal("re-encoding differs")
		}
	})
}
