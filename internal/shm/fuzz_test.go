package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzDescUnmarshal: arbitrary bytes never panic; whatever decodes
// re-encodes to the same bytes (the encoding is strict and canonical).
func FuzzDescUnmarshal(f *testing.F) {
	for _, d := range validDescs {
		b, err := d.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(make([]byte, DescSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Desc
		if err := d.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error not a FormatError: %v", err)
			}
			if d != (Desc{}) {
				t.Fatal("Desc modified on error")
			}
			return
		}
		e, err := d.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %v does not encode: %v", d, err)
		}
		if !bytes.Equal(e, b) {
			t.Fatalf("re-encoding differs:\n% x\n% x", b, e)
		}
		_ = d.String()
	})
}

// ringSeeds returns encoder-made rings: fresh, mid-stream and wrapped.
func ringSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, g := range []struct{ nslots, slotSize, ops int }{{2, 64, 0}, {2, 64, 3}, {4, 64, 9}, {2, 128, 1}, {8, 64, 21}} {
		b := alignedBytes(RingBytes(g.nslots, g.slotSize))
		q, err := InitRing(b, g.nslots, g.slotSize)
		if err != nil {
			f.Fatal(err)
		}
		for i := range g.ops {
			push(q, uint64(i))
			if i%3 != 2 {
				pop(q)
			}
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// exerciseRing runs producer and consumer operations on an attached ring of
// arbitrary contents: they must not panic or loop forever.
func exerciseRing(q *Ring) {
	for range 2 * q.Cap() {
		if d, tk, ok := q.TryReserve(); ok {
			clear(d)
			q.Commit(tk)
		}
	}
	for range 2 * q.Cap() {
		if d, ok := q.Peek(); ok {
			_ = d[len(d)-1]
			q.Release()
		}
		q.Empty()
	}
}

// FuzzAttachRing: arbitrary bytes as a peer's ring never panic, at any
// alignment; an accepted ring can be used.
func FuzzAttachRing(f *testing.F) {
	for _, b := range ringSeeds(f) {
		f.Add(b)
	}
	f.Add(make([]byte, 256))
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := AttachRing(in); err != nil && !errors.Is(err, ErrFormat) {
			t.Fatal(err)
		}
		b := alignedBytes(len(in))
		copy(b, in)
		q, err := AttachRing(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatal(err)
			}
			return
		}
		if len(q.b) > len(b) || q.Cap() < 2 || q.SlotSize() < 56 {
			t.Fatalf("accepted bad geometry: %d slots of %d in %d bytes", q.Cap(), q.SlotSize(), len(b))
		}
		exerciseRing(q)
	})
}

// FuzzAttachPool: arbitrary bytes as a peer's pool never panic; indices from
// the peer are checked.
func FuzzAttachPool(f *testing.F) {
	for _, g := range []struct{ nbufs, bufSize, busy int }{{1, 64, 0}, {2, 64, 1}, {3, 128, 3}} {
		b := alignedBytes(PoolBytes(g.nbufs, g.bufSize))
		p, err := InitPool(b, g.nbufs, g.bufSize)
		if err != nil {
			f.Fatal(err)
		}
		for range g.busy {
			p.TryAlloc()
		}
		f.Add(b)
	}
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := AttachPool(in); err != nil && !errors.Is(err, ErrFormat) {
			t.Fatal(err)
		}
		b := alignedBytes(len(in))
		copy(b, in)
		p, err := AttachPool(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatal(err)
			}
			return
		}
		// Indices a peer might send: taken from the bytes themselves.
		for k := 0; k+4 <= len(in) && k < 64; k += 4 {
			idx := int(int32(binary.LittleEndian.Uint32(in[k:])))
			if buf, err := p.Buf(idx); err == nil {
				clear(buf)
			} else if idx >= 0 && idx < p.NumBufs() {
				t.Fatalf("Buf(%d) of %d: %v", idx, p.NumBufs(), err)
			}
			if err := p.Free(idx); errors.Is(err, ErrBadIndex) != (idx < 0 || idx >= p.NumBufs()) {
				t.Fatalf("Free(%d) of %d: %v", idx, p.NumBufs(), err)
			}
		}
		for range p.NumBufs() + 1 {
			if idx, buf, ok := p.TryAlloc(); ok {
				clear(buf)
				if err := p.Free(idx); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
