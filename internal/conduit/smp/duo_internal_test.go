package smp

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/shm"
)

// FuzzDecodeDuo feeds decodeDuo any word and line: it must never panic,
// and what it accepts must be exactly what encodeDuo writes for the fields
// it decoded (so a peer cannot make it read past the half or invent a
// message no sender encodes).
func FuzzDecodeDuo(f *testing.F) {
	line := make([]byte, shm.DuoBytes)
	f.Add(uint64(conduit.Short)|kindReq|3<<16, true, line)
	f.Add(uint64(conduit.Medium)|kindInline|2<<16|16<<24, false, line)
	f.Add(uint64(0xff), true, line)
	f.Add(uint64(conduit.Long)|kindPlaced|kindReq|4<<16|4000<<24, true, line)
	f.Fuzz(func(t *testing.T, w uint64, isReq bool, l []byte) {
		if len(l) < shm.DuoBytes {
			l = append(l, make([]byte, shm.DuoBytes-len(l))...)
		}
		l = l[:shm.DuoBytes]
		off := shm.DuoHalf
		if isReq {
			off = 0
		}
		var h conduit.Header
		if err := decodeDuo(l, off, w, isReq, &h); err != nil {
			return
		}
		n := duoLen(w, &h)
		var payload []byte
		switch h.Cat {
		case conduit.Medium:
			payload = duoPayload(l, off, n)
		case conduit.Long:
			payload = make([]byte, n) // placed: only its length is encoded
		}
		if h.IsReq != isReq || !duoFits(h.Cat, int(h.NArgs), n) || h.Cat == conduit.Long && h.EP != 0 {
			t.Fatalf("accepted %#x as %+v, which does not fit a duo half", w, h)
		}
		k := byte(h.Cat)
		switch h.Cat {
		case conduit.Medium:
			k |= kindInline
		case conduit.Long:
			k |= kindPlaced
		}
		if isReq {
			k |= kindReq
		}
		again := make([]byte, shm.DuoBytes)
		w2 := encodeDuo(again, off, k, h.Handler, h.EP, h.SrcEP, h.Args[:h.NArgs], payload, h.Dest)
		if w2 != w {
			t.Fatalf("accepted word %#x, which re-encodes as %#x", w, w2)
		}
		end := off + 8 + 4*int(h.NArgs)
		if h.Cat == conduit.Long {
			end = off + duoLongArgsOff + 4*int(h.NArgs)
		}
		if !bytes.Equal(again[off+8:end], l[off+8:end]) {
			t.Fatalf("args (and destination) of %#x decoded as %v, %#x", w, h.Args[:h.NArgs], h.Dest)
		}
	})
}

// TestDuoLayout pins the duo half encoding: six Short args fill a half's
// data, a Medium payload starts 16-byte aligned in the line and ends at its
// half's end, and the lines lie between the rings and the pools.
func TestDuoLayout(t *testing.T) {
	if 8+4*duoShortArgs != shm.DuoHalf {
		t.Fatalf("%d Short args end at %d, not at the half's end %d", duoShortArgs, 8+4*duoShortArgs, shm.DuoHalf)
	}
	if duoPayloadOff%16 != 0 || 8+4*duoMediumArgs > duoPayloadOff || duoPayloadOff+duoMediumBytes != shm.DuoHalf || shm.DuoHalf%16 != 0 {
		t.Fatalf("Medium payload at %d (+%d) with %d args in a %d-byte half", duoPayloadOff, duoMediumBytes, duoMediumArgs, shm.DuoHalf)
	}
	for _, size := range []int{1, 2, 8, 64} {
		rings, pools, _ := regionBytes(size)
		lines := duoLines(rings)
		if lines%64 != 0 || lines < rings+2*shm.MsgRingBytes(ringSlots) || lines+size*shm.DuoBytes > pools {
			t.Fatalf("size %d: duo lines at %d (+%d) between rings at %d and pools at %d", size, lines, size*shm.DuoBytes, rings, pools)
		}
	}
	l := make([]byte, shm.DuoBytes)
	w := encodeDuo(l, shm.DuoHalf, byte(conduit.Medium)|kindInline, 7, 0x1234, 0x5678, []int32{-1}, []byte{9, 8}, 0)
	if w != uint64(conduit.Medium)|kindInline|7<<8|1<<16|2<<24|0x1234<<32|0x5678<<48 ||
		binary.LittleEndian.Uint32(l[shm.DuoHalf+8:]) != 0xffffffff || l[shm.DuoHalf+duoPayloadOff] != 9 || l[shm.DuoHalf+duoPayloadOff+1] != 8 {
		t.Fatalf("encodeDuo wrote word %#x and line %x", w, l)
	}
	if 8+8+4*duoLongArgs != shm.DuoHalf || duoLongArgsOff != 16 || MaxLongMapped >= 1<<24 {
		t.Fatalf("a placed Long's %d args after its destination end at %d, its length (up to %d) in 24 bits", duoLongArgs, 16+4*duoLongArgs, MaxLongMapped)
	}
	w = encodeDuo(l, 0, byte(conduit.Long)|kindPlaced|kindReq, 3, 0, 0x5678, []int32{1, 2, 3, 4}, make([]byte, MaxLongMapped), 0xdeadbeef00)
	var h conduit.Header
	if err := decodeDuo(l, 0, w, true, &h); err != nil || h.Dest != 0xdeadbeef00 || duoLen(w, &h) != MaxLongMapped || h.Args[3] != 4 || h.Cat != conduit.Long {
		t.Fatalf("placed Long of %d bytes decoded as %+v (length %d): %v", MaxLongMapped, h, duoLen(w, &h), err)
	}
}
