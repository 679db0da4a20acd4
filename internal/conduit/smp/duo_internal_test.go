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
// it decoded (so a peer cannot make it read past the line or invent a
// message no sender encodes).
func FuzzDecodeDuo(f *testing.F) {
	line := make([]byte, shm.DuoBytes)
	f.Add(uint64(conduit.Short)|kindReq|3<<16, true, line)
	f.Add(uint64(conduit.Medium)|kindInline|duoLap|2<<16|48<<24, false, line)
	f.Add(uint64(0xff), true, line)
	f.Add(uint64(conduit.Long)|kindPlaced|kindReq|8<<16|4000<<24, true, line)
	f.Fuzz(func(t *testing.T, w uint64, isReq bool, l []byte) {
		if len(l) < shm.DuoBytes {
			l = append(l, make([]byte, shm.DuoBytes-len(l))...)
		}
		l = l[:shm.DuoBytes]
		var h conduit.Header
		if err := decodeDuo(l, w, isReq, &h); err != nil {
			return
		}
		n := duoLen(w)
		var payload []byte
		k := byte(h.Cat) | byte(w)&duoLap
		switch h.Cat {
		case conduit.Medium:
			o := duoPayloadOff(int(h.NArgs))
			payload = l[o : o+n]
			k |= kindInline
		case conduit.Long:
			payload = make([]byte, n) // placed: only its length is encoded
			k |= kindPlaced
		}
		if h.IsReq != isReq || !duoFits(h.Cat, int(h.NArgs), n) || h.Cat == conduit.Long && h.EP != 0 {
			t.Fatalf("accepted %#x as %+v, which does not fit a duo line", w, h)
		}
		if isReq {
			k |= kindReq
		}
		again := make([]byte, shm.DuoBytes)
		if w2 := encodeDuo(again, k, h.Handler, h.EP, h.SrcEP, h.Args[:h.NArgs], payload, h.Dest); w2 != w {
			t.Fatalf("accepted word %#x, which re-encodes as %#x", w, w2)
		}
		end := 8 + 4*int(h.NArgs)
		if h.Cat == conduit.Long {
			end = duoLongArgsOff + 4*int(h.NArgs)
		}
		if !bytes.Equal(again[8:end], l[8:end]) {
			t.Fatalf("args (and destination) of %#x decoded as %v, %#x", w, h.Args[:h.NArgs], h.Dest)
		}
	})
}

// TestDuoLayout pins the duo line encoding: eight args fit after the word,
// a Medium's payload starts 16-byte aligned after its args and ends within
// the line, a placed Long's args follow its destination, its length fits
// 24 bits, the lap bit is no kind bit, and the lines lie between the rings
// and the pools.
func TestDuoLayout(t *testing.T) {
	if 8+4*duoArgs > shm.DuoBytes || duoLongArgsOff+4*duoArgs > shm.DuoBytes || MaxLongMapped >= 1<<24 || duoLap&kindKnown != 0 {
		t.Fatalf("%d args from 8 (a Long's from %d), lengths up to %d in 24 bits, lap bit %#x against kind bits %#x", duoArgs, duoLongArgsOff, MaxLongMapped, duoLap, kindKnown)
	}
	for nargs := 0; nargs <= duoArgs; nargs++ {
		if o := duoPayloadOff(nargs); o%16 != 0 || o < 8+4*nargs || !duoFits(conduit.Medium, nargs, shm.DuoBytes-o) || duoFits(conduit.Medium, nargs, shm.DuoBytes-o+1) {
			t.Fatalf("a Medium of %d args has its payload at %d", nargs, o)
		}
	}
	for _, size := range []int{1, 2, 8, 64} {
		rings, pools, _ := regionBytes(size)
		lines := duoLines(rings)
		if lines%64 != 0 || lines < rings+2*shm.MsgRingBytes(ringSlots) || lines+size*shm.DuoBytes > pools {
			t.Fatalf("size %d: duo lines at %d (+%d) between rings at %d and pools at %d", size, lines, size*shm.DuoBytes, rings, pools)
		}
	}
	l := make([]byte, shm.DuoBytes)
	w := encodeDuo(l, byte(conduit.Medium)|kindInline, 7, 0x1234, 0x5678, []int32{-1}, []byte{9, 8}, 0)
	if w != uint64(conduit.Medium)|kindInline|7<<8|1<<16|2<<24|0x1234<<32|0x5678<<48 ||
		binary.LittleEndian.Uint32(l[8:]) != 0xffffffff || l[16] != 9 || l[17] != 8 {
		t.Fatalf("encodeDuo wrote word %#x and line %x", w, l)
	}
	w = encodeDuo(l, byte(conduit.Long)|kindPlaced|kindReq, 3, 0, 0x5678, []int32{1, 2, 3, 4, 5, 6, 7, 8}, make([]byte, MaxLongMapped), 0xdeadbeef00)
	var h conduit.Header
	if err := decodeDuo(l, w, true, &h); err != nil || h.Dest != 0xdeadbeef00 || duoLen(w) != MaxLongMapped || h.Args[7] != 8 || h.Cat != conduit.Long {
		t.Fatalf("placed Long of %d bytes decoded as %+v (length %d): %v", MaxLongMapped, h, duoLen(w), err)
	}
}
