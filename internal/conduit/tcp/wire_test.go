package tcp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/gexgo/gexgo/internal/conduit"
)

const testMax = 1 << 20

func sampleAM(cat conduit.Category, isReq bool, nargs int) conduit.Header {
	h := conduit.Header{Cat: cat, IsReq: isReq, Handler: 200, NArgs: uint8(nargs), EP: uint16(3 + nargs), SrcEP: 0xfffe}
	if cat == conduit.Long {
		h.Dest = 0x7f0000001000
	}
	for i := 0; i < nargs; i++ {
		h.Args[i] = int32(-1000*(i+1) + i)
	}
	return h
}

// sampleFrames is a stream of every frame shape, with payloads.
func sampleFrames() (hs []frameHeader, payloads [][]byte) {
	for _, cat := range []conduit.Category{conduit.Short, conduit.Medium, conduit.Long} {
		for _, nargs := range []int{0, 1, 7, conduit.MaxArgs} {
			for _, isReq := range []bool{true, false} {
				var p []byte
				if cat != conduit.Short {
					p = bytes.Repeat([]byte{byte(nargs), 0xA5}, 50+nargs)
				}
				hs = append(hs, frameHeader{Header: sampleAM(cat, isReq, nargs), NBytes: len(p)})
				payloads = append(payloads, p)
			}
		}
	}
	for op := ctrlHello; op <= ctrlMax; op++ {
		p := []byte("control " + op.String())
		hs = append(hs, frameHeader{Op: op, Value: 0xdeadbeef00 + uint64(op), NBytes: len(p)})
		payloads = append(payloads, p)
	}
	return hs, payloads
}

// TestFrameLayout pins the frame layout: offsets, sizes and the encoded bytes
// of a sample frame field by field.
func TestFrameLayout(t *testing.T) {
	if frameFixed != 20 || frameMaxHead != 84 || offArgs != offSrcEP+2 || offLen%4 != 0 || offDest%8 != 0 {
		t.Fatalf("layout: fixed %d, max head %d, len at %d, dest at %d, args at %d", frameFixed, frameMaxHead, offLen, offDest, offArgs)
	}
	if conduit.MaxArgs != 16 {
		t.Fatalf("layout assumes gex_AM_MaxArgs 16, conduit.MaxArgs is %d", conduit.MaxArgs)
	}
	for nargs := 0; nargs <= conduit.MaxArgs; nargs++ {
		h := sampleAM(conduit.Short, true, nargs)
		if b := appendAMHeader(nil, &h, 0); len(b) != 20+4*nargs || len(b) != headLen(nargs) {
			t.Fatalf("Short with %d args: %d bytes, want %d", nargs, len(b), 20+4*nargs)
		}
	}
	h := sampleAM(conduit.Long, true, 2)
	b := appendAM(nil, &h, []byte{9, 8, 7})
	want := []byte{
		0xE2,       // magic|version
		3 | 4,      // Long, request
		200,        // handler
		2,          // nargs
		3, 0, 0, 0, // payload length
		0x00, 0x10, 0, 0, 0x00, 0x7f, 0, 0, // dest
		5, 0, // destination endpoint index
		0xfe, 0xff, // source endpoint index
		0x18, 0xfc, 0xff, 0xff, // args[0] = -1000
		0x31, 0xf8, 0xff, 0xff, // args[1] = -1999
		9, 8, 7, // payload
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded Long:\n got % x\nwant % x", b, want)
	}
	c := appendControl(nil, ctrlSegInfo, 0x1122334455667788, nil)
	if len(c) != frameFixed || c[offKind] != catControl || c[offOp] != byte(ctrlSegInfo) || binary.LittleEndian.Uint64(c[offValue:]) != 0x1122334455667788 {
		t.Fatalf("encoded control frame % x", c)
	}
	// A non-Long does not carry Dest even if the caller left one in the header.
	m := sampleAM(conduit.Medium, false, 0)
	m.Dest = 42
	if b := appendAMHeader(nil, &m, 0); binary.LittleEndian.Uint64(b[offDest:]) != 0 || b[offKind] != 2 {
		t.Fatalf("Medium reply header % x", b)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	hs, ps := sampleFrames()
	var stream []byte
	for i := range hs {
		stream = appendFrame(stream, &hs[i], ps[i])
	}
	// Byte-slice decoding.
	rest := stream
	for i := range hs {
		var got frameHeader
		p, n, err := parseFrame(rest, &got, testMax)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got != hs[i] || !bytes.Equal(p, ps[i]) || n != hs[i].frameLen() {
			t.Fatalf("frame %d: got %+v (%d bytes, payload %q) want %+v", i, got, n, p, hs[i])
		}
		rest = rest[n:]
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left over", len(rest))
	}
	// Streaming decoding, alternating Payload, ReadPayload and skipping.
	fr := newFrameReader(bufio.NewReaderSize(bytes.NewReader(stream), 16), testMax)
	for i := range hs {
		var got frameHeader
		if err := fr.Next(&got); err != nil {
			t.Fatalf("stream frame %d: %v", i, err)
		}
		if got != hs[i] {
			t.Fatalf("stream frame %d: got %+v want %+v", i, got, hs[i])
		}
		switch i % 3 {
		case 0:
			p, err := fr.Payload()
			if err != nil || !bytes.Equal(p, ps[i]) {
				t.Fatalf("stream frame %d payload %q, %v", i, p, err)
			}
		case 1:
			p := make([]byte, got.NBytes)
			if err := fr.ReadPayload(p); err != nil || !bytes.Equal(p, ps[i]) {
				t.Fatalf("stream frame %d ReadPayload %q, %v", i, p, err)
			}
		}
	}
	var h frameHeader
	if err := fr.Next(&h); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestFrameTruncated(t *testing.T) {
	h := sampleAM(conduit.Medium, true, 3)
	full := appendAM(nil, &h, make([]byte, 100))
	for cut := 1; cut < len(full); cut++ {
		var got frameHeader
		if _, _, err := parseFrame(full[:cut], &got, testMax); err != io.ErrUnexpectedEOF {
			t.Fatalf("parse cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
		fr := newFrameReader(bufio.NewReader(bytes.NewReader(full[:cut])), testMax)
		err := fr.Next(&got)
		if err == nil {
			_, err = fr.Payload()
		}
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("stream cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
}

func TestFrameRejects(t *testing.T) {
	h := sampleAM(conduit.Medium, true, 2)
	good := appendAM(nil, &h, make([]byte, 10))
	ctrl := appendControl(nil, ctrlHello, 1, nil)
	le32 := func(s []byte, off int, v uint32) { binary.LittleEndian.PutUint32(s[off:], v) }
	cases := []struct {
		name string
		base []byte
		mut  func(s []byte)
	}{
		{"bad magic", good, func(s []byte) { s[offMagic] = 0x47 }},
		{"future version", good, func(s []byte) { s[offMagic] = frameMagic | 3 }},
		{"old version", good, func(s []byte) { s[offMagic] = frameMagic | 1 }},
		{"control with endpoint", ctrl, func(s []byte) { s[offEP] = 1 }},
		{"unknown kind bit", good, func(s []byte) { s[offKind] |= 0x80 }},
		{"nargs 17", good, func(s []byte) { s[offNArgs] = 17 }},
		{"nargs 255", good, func(s []byte) { s[offNArgs] = 255 }},
		{"payload above max", good, func(s []byte) { le32(s, offLen, testMax+1) }},
		{"payload 4 GiB-1", good, func(s []byte) { le32(s, offLen, 0xffffffff) }},
		{"Short with payload", good, func(s []byte) { s[offKind] = byte(conduit.Short) }},
		{"Medium with dest", good, func(s []byte) { s[offDest+3] = 1 }},
		{"control op 0", ctrl, func(s []byte) { s[offOp] = 0 }},
		{"control op unknown", ctrl, func(s []byte) { s[offOp] = byte(ctrlMax) + 1 }},
		{"control with nargs", ctrl, func(s []byte) { s[offNArgs] = 1 }},
		{"control with request bit", ctrl, func(s []byte) { s[offKind] = kindReq }},
		{"control payload too long", ctrl, func(s []byte) { le32(s, offLen, maxCtrlBytes+1) }},
	}
	for _, c := range cases {
		s := append([]byte(nil), c.base...)
		c.mut(s)
		var got frameHeader
		_, _, err := parseFrame(s, &got, testMax)
		if !errors.Is(err, ErrFrame) {
			t.Errorf("%s: parseFrame: %v, want ErrFrame", c.name, err)
		}
		fr := newFrameReader(bufio.NewReader(bytes.NewReader(s)), testMax)
		if err := fr.Next(&got); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: Next: %v, want ErrFrame", c.name, err)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// TestFrameNoAllocs: encoding into a reused buffer and decoding (slice and
// stream, with the payload buffer warm) do not allocate.
func TestFrameNoAllocs(t *testing.T) {
	h := sampleAM(conduit.Long, true, conduit.MaxArgs)
	payload := make([]byte, 512)
	buf := make([]byte, 0, 4096)
	if a := testing.AllocsPerRun(1000, func() {
		buf = appendAM(buf[:0], &h, payload)
		buf = appendControl(buf, ctrlPing, 7, nil)
		buf = appendAMHeader(buf, &h, len(payload))
	}); a != 0 {
		t.Fatalf("encode: %v allocs/op", a)
	}
	frame := appendAM(nil, &h, payload)
	var got frameHeader
	if a := testing.AllocsPerRun(1000, func() {
		if _, _, err := parseFrame(frame, &got, testMax); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("parseFrame: %v allocs/op", a)
	}
	src := bytes.NewReader(frame)
	br := bufio.NewReader(src)
	fr := newFrameReader(br, testMax)
	if a := testing.AllocsPerRun(1000, func() {
		src.Reset(frame)
		br.Reset(src)
		if err := fr.Next(&got); err != nil {
			t.Fatal(err)
		}
		if _, err := fr.Payload(); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("frameReader: %v allocs/op", a)
	}
}

// TestFrameReaderBoundedBuffer: a header announcing a huge payload is
// rejected before anything is allocated for it, and the payload buffer never
// exceeds the largest accepted payload.
func TestFrameReaderBoundedBuffer(t *testing.T) {
	h := sampleAM(conduit.Medium, true, 0)
	hdr := appendAMHeader(nil, &h, 1<<30)
	fr := newFrameReader(bufio.NewReader(bytes.NewReader(hdr)), 4096)
	var got frameHeader
	if err := fr.Next(&got); !errors.Is(err, ErrFrame) {
		t.Fatalf("1 GiB payload with a 4 KiB max: %v", err)
	}
	if cap(fr.buf) != 0 {
		t.Fatalf("buffer of %d bytes allocated for a rejected frame", cap(fr.buf))
	}
	s := appendAM(nil, &h, make([]byte, 4096))
	fr = newFrameReader(bufio.NewReader(bytes.NewReader(s)), 4096)
	if err := fr.Next(&got); err != nil {
		t.Fatal(err)
	}
	if _, err := fr.Payload(); err != nil || cap(fr.buf) != 4096 {
		t.Fatalf("payload buffer %d bytes, %v", cap(fr.buf), err)
	}
}

func FuzzDecodeFrame(f *testing.F) {
	hs, ps := sampleFrames()
	var stream []byte
	for i := range hs {
		fr := appendFrame(nil, &hs[i], ps[i])
		f.Add(fr)
		stream = append(stream, fr...)
	}
	f.Add(stream)
	const max = 4096
	f.Fuzz(func(t *testing.T, b []byte) {
		// Slice decoding: every accepted frame is in range and re-encodes to the
		// same bytes.
		rest := b
		var frames int
		for len(rest) > 0 {
			var h frameHeader
			p, n, err := parseFrame(rest, &h, max)
			if err != nil {
				if err != io.ErrUnexpectedEOF && !errors.Is(err, ErrFrame) {
					t.Fatalf("parseFrame: unexpected error %v", err)
				}
				break
			}
			if h.NArgs > conduit.MaxArgs || (h.Control() && h.NBytes > maxCtrlBytes) || (!h.Control() && h.NBytes > max) || n > len(rest) {
				t.Fatalf("accepted out-of-range frame %+v (%d bytes of %d)", h, n, len(rest))
			}
			if re := appendFrame(nil, &h, p); !bytes.Equal(re, rest[:n]) {
				t.Fatalf("re-encode mismatch:\n got % x\nwant % x", re, rest[:n])
			}
			rest = rest[n:]
			frames++
		}
		// Stream decoding agrees with slice decoding.
		fr := newFrameReader(bufio.NewReaderSize(bytes.NewReader(b), 16), max)
		for i := 0; ; i++ {
			var h frameHeader
			err := fr.Next(&h)
			if err == nil {
				_, err = fr.Payload()
			}
			if err != nil {
				if i != frames {
					t.Fatalf("stream decoded %d frames, slice %d (%v)", i, frames, err)
				}
				if cap(fr.buf) > maxCtrlBytes {
					t.Fatalf("payload buffer grew to %d", cap(fr.buf))
				}
				return
			}
		}
	})
}
