package shm

import (
	"encoding/binary"
	"testing"
)

// Offsets of every shared word, as documented in doc.go. Changing one is a
// change of the shared layout: bump the version.
func TestLayoutConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"ringOffMagic", ringOffMagic, 0},
		{"ringOffVersion", ringOffVersion, 4},
		{"ringOffNSlots", ringOffNSlots, 8},
		{"ringOffSlotSize", ringOffSlotSize, 12},
		{"ringOffTail", ringOffTail, 64},
		{"ringOffHead", ringOffHead, 128},
		{"ringOffSlots", ringOffSlots, 256},
		{"slotOffSeq", slotOffSeq, 0},
		{"slotOffData", slotOffData, 8},
		{"poolOffMagic", poolOffMagic, 0},
		{"poolOffVersion", poolOffVersion, 4},
		{"poolOffNBufs", poolOffNBufs, 8},
		{"poolOffBufSize", poolOffBufSize, 12},
		{"poolOffFlags", poolOffFlags, 64},
		{"poolFlagStride", poolFlagStride, 64},
		{"bellOffValue", bellOffValue, 0},
		{"bellOffSleepers", bellOffSleepers, 4},
		{"BellSize", BellSize, 8},
		{"DescSize", DescSize, 32},
		{"descOffKind", descOffKind, 0},
		{"descOffPID", descOffPID, 4},
		{"descOffFD", descOffFD, 8},
		{"descOffSize", descOffSize, 16},
		{"descOffID", descOffID, 24},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if RingMagic != binary.LittleEndian.Uint32([]byte("GXRQ")) {
		t.Errorf("RingMagic %#x is not \"GXRQ\"", RingMagic)
	}
	if PoolMagic != binary.LittleEndian.Uint32([]byte("GXPL")) {
		t.Errorf("PoolMagic %#x is not \"GXPL\"", PoolMagic)
	}
}

func line(a uintptr) uintptr { return a / 64 }

// The ring's atomic words are where the constants say, aligned, and the hot
// words have cache lines of their own.
func TestRingLayout(t *testing.T) {
	const nslots, slotSize = 8, 192
	q, b := newTestRing(t, nslots, slotSize)
	base := addrOf(b)
	if q.tail != Uint64At(b, ringOffTail) || q.head != Uint64At(b, ringOffHead) {
		t.Fatal("tail/head views are not at ringOffTail/ringOffHead")
	}
	tail, head := base+ringOffTail, base+ringOffHead
	if tail%64 != 0 || head%64 != 0 {
		t.Errorf("tail at %#x, head at %#x: not cache-line aligned", tail, head)
	}
	if line(tail) == line(base) || line(tail) == line(head) || line(head) == line(base+ringOffSlots) {
		t.Error("tail, head, header and slot 0 do not have cache lines of their own")
	}
	for i := range uint64(nslots) {
		off := ringOffSlots + int(i)*slotSize
		if q.seqAt(i) != Uint64At(b, off+slotOffSeq) {
			t.Errorf("slot %d: seq view not at offset %d", i, off)
		}
		if (base+uintptr(off))%64 != 0 {
			t.Errorf("slot %d not 64-byte aligned", i)
		}
		// Masking: ticket i+nslots is the same slot.
		if q.seqAt(i+nslots) != q.seqAt(i) {
			t.Errorf("ticket %d does not map to slot %d", i+nslots, i)
		}
		d := q.dataAt(i)
		if len(d) != slotSize-8 || cap(d) != slotSize-8 || &d[0] != &b[off+slotOffData] {
			t.Errorf("slot %d: data view wrong (len %d cap %d)", i, len(d), cap(d))
		}
	}
	// Raw bytes as documented.
	if string(b[0:4]) != "GXRQ" || binary.LittleEndian.Uint32(b[4:]) != 1 ||
		binary.LittleEndian.Uint32(b[8:]) != nslots || binary.LittleEndian.Uint32(b[12:]) != slotSize {
		t.Errorf("header bytes % x", b[:16])
	}
	for i := range nslots {
		if s := binary.LittleEndian.Uint64(b[ringOffSlots+i*slotSize:]); s != uint64(i) {
			t.Errorf("slot %d: initial seq %d", i, s)
		}
	}
	d, tk, ok := q.TryReserve()
	if !ok || tk != 0 {
		t.Fatal("TryReserve on empty ring")
	}
	d[0] = 0xAB
	if binary.LittleEndian.Uint64(b[64:]) != 1 {
		t.Error("tail bytes not 1 after a reserve")
	}
	q.Commit(tk)
	if binary.LittleEndian.Uint64(b[256:]) != 1 || b[264] != 0xAB {
		t.Error("slot 0 seq/data bytes wrong after commit")
	}
	q.Peek()
	q.Release()
	if binary.LittleEndian.Uint64(b[128:]) != 1 || binary.LittleEndian.Uint64(b[256:]) != nslots {
		t.Error("head / slot 0 seq bytes wrong after release")
	}
}

func TestPoolLayout(t *testing.T) {
	const nbufs, bufSize = 5, 128
	b := alignedBytes(PoolBytes(nbufs, bufSize))
	p, err := InitPool(b, nbufs, bufSize)
	if err != nil {
		t.Fatal(err)
	}
	if PoolBytes(nbufs, bufSize) != 64+nbufs*64+nbufs*bufSize {
		t.Errorf("PoolBytes = %d", PoolBytes(nbufs, bufSize))
	}
	base := addrOf(b)
	bufs := 64 + nbufs*64
	for i := range nbufs {
		off := poolOffFlags + i*poolFlagStride
		if p.flagAt(i) != Uint32At(b, off) {
			t.Errorf("flag %d not at offset %d", i, off)
		}
		if (base+uintptr(off))%64 != 0 {
			t.Errorf("flag %d not on its own cache line", i)
		}
		buf := p.bufAt(i)
		if &buf[0] != &b[bufs+i*bufSize] || len(buf) != bufSize || cap(buf) != bufSize {
			t.Errorf("buffer %d view wrong", i)
		}
		if (base+uintptr(bufs+i*bufSize))%64 != 0 {
			t.Errorf("buffer %d not 64-byte aligned", i)
		}
	}
	if string(b[0:4]) != "GXPL" || binary.LittleEndian.Uint32(b[4:]) != 1 ||
		binary.LittleEndian.Uint32(b[8:]) != nbufs || binary.LittleEndian.Uint32(b[12:]) != bufSize {
		t.Errorf("header bytes % x", b[:16])
	}
	idx, _, _ := p.TryAlloc()
	if binary.LittleEndian.Uint32(b[64+64*idx:]) != 1 {
		t.Error("busy flag byte not 1")
	}
}

func TestBellLayout(t *testing.T) {
	b := alignedBytes(64)
	bl := BellAt(b, 8)
	if bl.value != Uint32At(b, 8+bellOffValue) || bl.sleepers != Uint32At(b, 8+bellOffSleepers) {
		t.Error("bell words not at their offsets")
	}
	for _, off := range []int{-4, 2, 57, 64} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("BellAt(%d) did not panic", off)
				}
			}()
			BellAt(b, off)
		}()
	}
}

func TestAtomicAtBounds(t *testing.T) {
	b := alignedBytes(64)
	Uint32At(b, 60)
	Uint64At(b, 56)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Uint32At(-4)", func() { Uint32At(b, -4) }},
		{"Uint32At(61)", func() { Uint32At(b, 61) }},
		{"Uint32At(2)", func() { Uint32At(b, 2) }},
		{"Uint64At(60)", func() { Uint64At(b, 60) }},
		{"Uint64At(4)", func() { Uint64At(b, 4) }},
		{"Uint64At(nil)", func() { Uint64At(nil, 0) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", c.name)
				}
			}()
			c.f()
		}()
	}
}
