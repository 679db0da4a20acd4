package smp

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/memcopy"
)

const testSlotData = 248

func sampleSlot(cat conduit.Category, isReq, inline bool, nargs int, payload []byte) (slotHeader, []byte) {
	var h slotHeader
	h.Src, h.NBytes, h.Buf, h.Inline = 3, len(payload), 2, inline
	h.Cat, h.IsReq, h.Handler, h.NArgs, h.Dest = cat, isReq, 200, uint8(nargs), 0x7f0000001000
	h.EP, h.SrcEP = uint16(nargs+1), 0xfffe
	for i := 0; i < nargs; i++ {
		h.Args[i] = int32(-1000 * (i + 1))
	}
	s := make([]byte, testSlotData)
	encodeSlotHeader(s, &h, payload)
	return h, s
}

func TestSlotRoundTrip(t *testing.T) {
	for _, cat := range []conduit.Category{conduit.Short, conduit.Medium, conduit.Long} {
		for _, nargs := range []int{0, 1, 16} {
			for _, isReq := range []bool{true, false} {
				var payload []byte
				inline := false
				if cat != conduit.Short {
					payload = bytes.Repeat([]byte{0xA5}, 100)
					inline = true
				}
				want, s := sampleSlot(cat, isReq, inline, nargs, payload)
				var got slotHeader
				if err := decodeSlotHeader(s, &got, 4, 65536); err != nil {
					t.Fatalf("%v nargs=%d req=%v: decode: %v", cat, nargs, isReq, err)
				}
				if got != want {
					t.Fatalf("%v nargs=%d req=%v: got %+v want %+v", cat, nargs, isReq, got, want)
				}
				if inline && !bytes.Equal(s[payloadOff(nargs):payloadOff(nargs)+got.NBytes], payload) {
					t.Fatalf("inline payload mismatch")
				}
			}
		}
	}
}

func TestSlotRejects(t *testing.T) {
	_, good := sampleSlot(conduit.Medium, true, true, 2, make([]byte, 10))
	cases := []struct {
		name string
		mut  func(s []byte)
		size int
	}{
		{"short slot", nil, 4},
		{"category 0", func(s []byte) { s[offKind] &^= kindCatMask }, 4},
		{"unknown kind bit", func(s []byte) { s[offKind] |= 0x80 }, 4},
		{"nargs 17", func(s []byte) { s[offNArgs] = 17 }, 4},
		{"src out of range", func(s []byte) { s[offSrc] = 9 }, 4},
		{"inline too long", func(s []byte) { s[offNBytes] = 0xff; s[offNBytes+1] = 0 }, 4},
		{"payload above max", func(s []byte) { s[offKind] &^= kindInline; s[offNBytes+2] = 2 }, 4},
		{"placed medium", func(s []byte) { s[offKind] |= kindPlaced }, 4},
		{"args past the message", func(s []byte) {}, 4},
	}
	for _, c := range cases {
		s := append([]byte(nil), good...)
		if c.mut == nil {
			s = s[:offArgs-1]
		} else {
			c.mut(s)
		}
		if c.name == "args past the message" {
			s = s[:argsEnd(2)-1]
		}
		var h slotHeader
		if err := decodeSlotHeader(s, &h, c.size, 65536); err == nil {
			t.Errorf("%s: decode accepted a malformed slot", c.name)
		}
	}
}

func FuzzDecodeSlot(f *testing.F) {
	for _, cat := range []conduit.Category{conduit.Short, conduit.Medium, conduit.Long} {
		_, s := sampleSlot(cat, true, cat != conduit.Short, 16, make([]byte, 40))
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		var h slotHeader
		if err := decodeSlotHeader(s, &h, 4, 65536); err != nil {
			return
		}
		// Anything accepted must be self-consistent and re-encode to the same header.
		if h.NArgs > conduit.MaxArgs || h.Src >= 4 || h.NBytes > 65536 {
			t.Fatalf("accepted out-of-range header %+v", h)
		}
		po := payloadOff(int(h.NArgs))
		if h.Inline && po+h.NBytes > len(s) || argsEnd(int(h.NArgs)) > len(s) {
			t.Fatalf("accepted a payload or args beyond the message: %+v", h)
		}
		out := make([]byte, len(s))
		var payload []byte
		if h.Inline {
			payload = s[po : po+h.NBytes]
		}
		encodeSlotHeader(out, &h, payload)
		var h2 slotHeader
		if err := decodeSlotHeader(out, &h2, 4, 65536); err != nil || h2 != h {
			t.Fatalf("re-encode mismatch: %v %+v vs %+v", err, h2, h)
		}
	})
}

// testArgs returns nargs distinct AM arguments (mul*(i+1) ^ i<<shift, so
// that every byte of each differs between tests and positions) and copies
// them into h.Args.
func testArgs(h *conduit.Header, nargs int, mul int32, shift int) []int32 {
	args := make([]int32, nargs)
	for i := range args {
		args[i] = mul*int32(i+1) ^ int32(i<<shift)
		h.Args[i] = args[i]
	}
	return args
}

// TestEncodeShort: the Short fast path (SendShort) writes the same bytes as
// encodeSlot does for the same AM sent through Send, for every number of
// args, request and reply, over a message that held other bytes before.
func TestEncodeShort(t *testing.T) {
	for nargs := 0; nargs <= conduit.MaxArgs; nargs++ {
		for _, isReq := range []bool{true, false} {
			h := conduit.Header{Cat: conduit.Short, IsReq: isReq, Handler: 201, NArgs: uint8(nargs), EP: 0x1234, SrcEP: 0xfedc}
			args := testArgs(&h, nargs, -7919, 20)
			want := bytes.Repeat([]byte{0x5a}, testSlotData)
			got := bytes.Repeat([]byte{0xc3}, testSlotData)
			encodeSlot(want, &h, 0x7654321, 0, -1, 0)
			encodeShort(got, isReq, 201, 0x1234, 0xfedc, 0x7654321, args)
			n := argsEnd(nargs)
			if !bytes.Equal(got[:n], want[:n]) {
				t.Fatalf("nargs=%d req=%v:\nencodeShort % x\nencodeSlot  % x", nargs, isReq, got[:n], want[:n])
			}
		}
	}
}

// FuzzDecodeSlotAgrees: decodeSlot (its checks in one condition) and
// decodeSlotChecked (one check at a time, each with its error) accept the
// same messages and decode them alike, for several job sizes and payload
// limits. The seeds are good messages of every category and each of
// TestSlotRejects' malformations, so the seed run alone fails if the fast
// condition drops a check.
func FuzzDecodeSlotAgrees(f *testing.F) {
	for _, cat := range []conduit.Category{conduit.Short, conduit.Medium, conduit.Long} {
		for _, nargs := range []int{0, 3, 16} {
			_, s := sampleSlot(cat, cat == conduit.Medium, cat == conduit.Medium, nargs, make([]byte, 40*int(cat-1)))
			f.Add(s, 4, 65536)
		}
	}
	_, good := sampleSlot(conduit.Medium, true, true, 2, make([]byte, 10))
	placed, _ := sampleSlot(conduit.Long, false, false, 1, nil)
	placed.Placed, placed.NBytes = true, 100
	ps := make([]byte, testSlotData)
	encodeSlotHeader(ps, &placed, nil)
	f.Add(ps, 4, 65536)
	f.Add(ps, 4, 99)
	for _, mut := range []func(s []byte) []byte{
		func(s []byte) []byte { return s[:offArgs-1] },
		func(s []byte) []byte { s[offKind] &^= kindCatMask; return s },
		func(s []byte) []byte { s[offKind] |= 0x80; return s },
		func(s []byte) []byte { s[offNArgs] = 17; return s },
		func(s []byte) []byte { s[offSrc] = 9; return s },
		func(s []byte) []byte { s[offNBytes] = 0xff; s[offNBytes+1] = 0; return s },
		func(s []byte) []byte { s[offKind] &^= kindInline; s[offNBytes+2] = 2; return s },
		func(s []byte) []byte { s[offKind] |= kindPlaced; return s },
		func(s []byte) []byte { return s[:argsEnd(2)-1] },
		func(s []byte) []byte { s[offKind] = byte(conduit.Short) | kindReq; return s }, // a Short with a payload length
	} {
		f.Add(mut(append([]byte(nil), good...)), 4, 65536)
	}
	f.Fuzz(func(t *testing.T, s []byte, size, maxPayload int) {
		var a, b slotHeader
		errA := decodeSlot(s, &a.Header, &a.slotMeta, size, maxPayload)
		errB := decodeSlotChecked(s, &b.Header, &b.slotMeta, size, maxPayload)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("decodeSlot: %v; decodeSlotChecked: %v (% x)", errA, errB, s)
		}
		if errA == nil && a != b {
			t.Fatalf("decoded differently:\n%+v\n%+v", a, b)
		}
		if errA != nil && errA.Error() != errB.Error() {
			t.Fatalf("errors differ: %v / %v", errA, errB)
		}
	})
}

// TestEncodeMedium: the inline Medium fast path (SendMedium) writes the
// same header bytes as encodeSlot does for the same AM sent through Send,
// for every number of args, request and reply, and payload lengths from 0
// to maxInline, over a message that held other bytes before.
func TestEncodeMedium(t *testing.T) {
	for nargs := 0; nargs <= conduit.MaxArgs; nargs++ {
		for _, isReq := range []bool{true, false} {
			for _, n := range []int{0, 1, 8, maxInline} {
				h := conduit.Header{Cat: conduit.Medium, IsReq: isReq, Handler: 133, NArgs: uint8(nargs), EP: 0x4321, SrcEP: 0xcdef}
				args := testArgs(&h, nargs, 7907, 22)
				want := bytes.Repeat([]byte{0x5a}, testSlotData)
				got := bytes.Repeat([]byte{0xc3}, testSlotData)
				encodeSlot(want, &h, 0x1234567, n, -1, kindInline)
				k := byte(conduit.Medium) | kindInline
				if isReq {
					k |= kindReq
				}
				encodeFields(got, k, 133, 0x4321, 0xcdef, 0x1234567, n, -1, args)
				if m := argsEnd(nargs); !bytes.Equal(got[:m], want[:m]) {
					t.Fatalf("nargs=%d req=%v n=%d:\nencodeFields % x\nencodeSlot   % x", nargs, isReq, n, got[:m], want[:m])
				}
			}
		}
	}
}

// TestEncodeMediumPooled: the pooled Medium fast path (sendMediumPooled:
// encodeFields with the pool buffer's index and no kind bits beside the
// category and request flag) writes the same header bytes as encodeSlot
// does for the same AM sent through Send (SendRef's pool-buffer case), for
// every number of args, request and reply, payload lengths from just
// above maxInline to MaxMedium and every buffer index.
func TestEncodeMediumPooled(t *testing.T) {
	for nargs := 0; nargs <= conduit.MaxArgs; nargs++ {
		for _, isReq := range []bool{true, false} {
			for _, n := range []int{maxInline + 1, 4096, memcopy.Threshold, MaxMedium} {
				for buf := range poolBufs {
					h := conduit.Header{Cat: conduit.Medium, IsReq: isReq, Handler: 201, NArgs: uint8(nargs), EP: 0x1357, SrcEP: 0x2468}
					args := testArgs(&h, nargs, -7919, 20)
					want := bytes.Repeat([]byte{0x5a}, testSlotData)
					got := bytes.Repeat([]byte{0xc3}, testSlotData)
					encodeSlot(want, &h, 0x3456789, n, buf, 0)
					k := byte(conduit.Medium)
					if isReq {
						k |= kindReq
					}
					encodeFields(got, k, 201, 0x1357, 0x2468, 0x3456789, n, buf, args)
					if m := argsEnd(nargs); !bytes.Equal(got[:m], want[:m]) {
						t.Fatalf("nargs=%d req=%v n=%d buf=%d:\nencodeFields % x\nencodeSlot   % x", nargs, isReq, n, buf, got[:m], want[:m])
					}
					// And the receiver reads it as a pooled Medium from buf.
					var d slotHeader
					if err := decodeSlotHeader(got[:argsEnd(nargs)], &d, 0x3456789+1, MaxMedium); err != nil {
						t.Fatalf("nargs=%d req=%v n=%d buf=%d: %v", nargs, isReq, n, buf, err)
					}
					if d.Inline || d.Placed || d.Buf != buf || d.NBytes != n || d.Src != 0x3456789 || d.Cat != conduit.Medium || d.IsReq != isReq {
						t.Fatalf("nargs=%d req=%v n=%d buf=%d: decoded %+v", nargs, isReq, n, buf, d)
					}
				}
			}
		}
	}
}

// TestEncodeLong: SendLong's message (encodeFields with kindPlaced, then
// the destination word) is byte for byte what encodeSlot writes for the
// same placed Long sent through Send.
func TestEncodeLong(t *testing.T) {
	for nargs := 0; nargs <= conduit.MaxArgs; nargs++ {
		for _, isReq := range []bool{true, false} {
			h := conduit.Header{Cat: conduit.Long, IsReq: isReq, Handler: 140, NArgs: uint8(nargs), SrcEP: 0x0102, Dest: 0x7fedcba987654321}
			args := testArgs(&h, nargs, -104729, 24)
			want := bytes.Repeat([]byte{0x5a}, testSlotData)
			got := bytes.Repeat([]byte{0xc3}, testSlotData)
			encodeSlot(want, &h, 0x2345678, 4096, -1, kindPlaced)
			k := byte(conduit.Long) | kindPlaced
			if isReq {
				k |= kindReq
			}
			encodeFields(got, k, 140, 0, 0x0102, 0x2345678, 4096, -1, args)
			binary.LittleEndian.PutUint64(got[offDest:], h.Dest)
			if m := argsEnd(nargs); !bytes.Equal(got[:m], want[:m]) {
				t.Fatalf("nargs=%d req=%v:\nSendLong   % x\nencodeSlot % x", nargs, isReq, got[:m], want[:m])
			}
		}
	}
}
