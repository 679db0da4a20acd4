package shm

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

func TestRingSingleProducerOrder(t *testing.T) {
	q, _ := newTestRing(t, 8, 64)
	if q.Cap() != 8 || q.SlotSize() != 56 {
		t.Fatalf("Cap %d SlotSize %d", q.Cap(), q.SlotSize())
	}
	if !q.Empty() {
		t.Fatal("new ring not empty")
	}
	if _, ok := q.Peek(); ok {
		t.Fatal("Peek on empty ring succeeded")
	}
	for i := range uint64(5) {
		if !push(q, 100+i) {
			t.Fatalf("push %d failed", i)
		}
	}
	if q.Empty() {
		t.Fatal("Empty after pushes")
	}
	for i := range uint64(5) {
		v, ok := pop(q)
		if !ok || v != 100+i {
			t.Fatalf("pop %d = %d, %v", i, v, ok)
		}
	}
	if !q.Empty() {
		t.Fatal("not empty after popping everything")
	}
}

func TestRingFullEmpty(t *testing.T) {
	q, _ := newTestRing(t, 4, 128)
	for i := range uint64(4) {
		if !push(q, i) {
			t.Fatalf("push %d failed before full", i)
		}
	}
	if _, _, ok := q.TryReserve(); ok {
		t.Fatal("TryReserve on a full ring succeeded")
	}
	if v, ok := pop(q); !ok || v != 0 {
		t.Fatalf("pop = %d %v", v, ok)
	}
	if !push(q, 4) {
		t.Fatal("push after one pop failed")
	}
	if push(q, 5) {
		t.Fatal("push on full ring succeeded")
	}
	for i := uint64(1); i <= 4; i++ {
		if v, ok := pop(q); !ok || v != i {
			t.Fatalf("pop = %d %v, want %d", v, ok, i)
		}
	}
	if _, ok := pop(q); ok {
		t.Fatal("pop on empty ring succeeded")
	}
}

// A reserved but uncommitted slot holds back the consumer; later commits
// become visible in ticket order once it commits.
func TestRingCommitOrder(t *testing.T) {
	q, _ := newTestRing(t, 4, 64)
	d0, t0, _ := q.TryReserve()
	d1, t1, _ := q.TryReserve()
	if t0 != 0 || t1 != 1 {
		t.Fatalf("tickets %d %d", t0, t1)
	}
	d1[0] = 1
	q.Commit(t1)
	if _, ok := q.Peek(); ok {
		t.Fatal("Peek passed an uncommitted slot")
	}
	d0[0] = 0
	q.Commit(t0)
	for want := range byte(2) {
		d, ok := q.Peek()
		if !ok || d[0] != want {
			t.Fatalf("Peek = %v %v, want %d", d[:1], ok, want)
		}
		q.Release()
	}
}

func TestRingWrapAround(t *testing.T) {
	q, b := newTestRing(t, 8, 64)
	rng := rand.New(rand.NewPCG(1, 2))
	var next, want uint64
	for range 20000 {
		for range rng.IntN(9) {
			if !push(q, next) {
				break
			}
			next++
		}
		for range rng.IntN(9) {
			v, ok := pop(q)
			if !ok {
				break
			}
			if v != want {
				t.Fatalf("popped %d, want %d", v, want)
			}
			want++
		}
	}
	for {
		v, ok := pop(q)
		if !ok {
			break
		}
		if v != want {
			t.Fatalf("popped %d, want %d", v, want)
		}
		want++
	}
	if want != next || next < 10000 {
		t.Fatalf("consumed %d of %d", want, next)
	}
	if tl, hd := binary.LittleEndian.Uint64(b[ringOffTail:]), binary.LittleEndian.Uint64(b[ringOffHead:]); tl != next || hd != next {
		t.Errorf("tail %d head %d, want %d", tl, hd, next)
	}
}

// MPSC stress on heap memory (so -race checks the publish order): producers
// ring a Bell, the consumer sleeps on it when the ring is empty. Every item
// must arrive exactly once and in each producer's order, with its payload
// intact.
func TestRingMPSCStress(t *testing.T) {
	const producers, perProducer = 4, 100_000
	n := perProducer
	if testing.Short() {
		n = 10_000
	}
	h := NewHeap()
	r, err := h.Create("stress", RingBytes(64, 64)+64)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	q, err := InitRing(r.Bytes(), 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	bell := BellAt(r.Bytes(), RingBytes(64, 64))
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			// A peer's view, as another rank would attach.
			o, err := h.Open(r.Desc())
			if err != nil {
				t.Error(err)
				return
			}
			pq, err := AttachRing(o.Bytes())
			if err != nil {
				t.Error(err)
				return
			}
			for i := range uint64(n) {
				for {
					d, tk, ok := pq.TryReserve()
					if ok {
						binary.LittleEndian.PutUint32(d[0:], uint32(p))
						binary.LittleEndian.PutUint64(d[8:], i)
						binary.LittleEndian.PutUint64(d[16:], i*0x9E3779B97F4A7C15+uint64(p))
						pq.Commit(tk)
						break
					}
					runtime.Gosched()
				}
				bell.Ring()
			}
		})
	}
	next := make([]uint64, producers)
	for got := 0; got < producers*n; {
		d, ok := q.Peek()
		if !ok {
			bell.Sleep(func() bool { return !q.Empty() }, 0)
			continue
		}
		p := binary.LittleEndian.Uint32(d[0:])
		i := binary.LittleEndian.Uint64(d[8:])
		c := binary.LittleEndian.Uint64(d[16:])
		q.Release()
		if p >= producers {
			t.Fatalf("item %d: producer %d", got, p)
		}
		if i != next[p] || c != i*0x9E3779B97F4A7C15+uint64(p) {
			t.Fatalf("producer %d: got item %d (check %#x), want %d", p, i, c, next[p])
		}
		next[p]++
		got++
	}
	wg.Wait()
	if !q.Empty() {
		t.Fatal("extra items after all were consumed")
	}
}

func TestRingGeometryErrors(t *testing.T) {
	for _, c := range []struct{ nslots, slotSize int }{
		{0, 64}, {1, 64}, {3, 64}, {-2, 64}, {1 << 31, 64},
		{2, 0}, {2, 32}, {2, 100}, {2, -64}, {2, 1<<31 + 64},
	} {
		if _, err := InitRing(alignedBytes(4096), c.nslots, c.slotSize); !errors.Is(err, ErrFormat) {
			t.Errorf("InitRing(%d, %d): %v", c.nslots, c.slotSize, err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RingBytes(%d, %d) did not panic", c.nslots, c.slotSize)
				}
			}()
			RingBytes(c.nslots, c.slotSize)
		}()
	}
	if _, err := InitRing(alignedBytes(RingBytes(4, 64)-1), 4, 64); !errors.Is(err, ErrFormat) {
		t.Error("InitRing on short memory:", err)
	}
	if _, err := InitRing(alignedBytes(RingBytes(4, 64) + 64)[8:], 4, 64); !errors.Is(err, ErrFormat) {
		t.Error("InitRing on misaligned memory:", err)
	}
}

func TestAttachRingValidates(t *testing.T) {
	const nslots, slotSize = 4, 128
	good := alignedBytes(RingBytes(nslots, slotSize) + 64)
	if _, err := InitRing(good, nslots, slotSize); err != nil {
		t.Fatal(err)
	}
	q, err := AttachRing(good)
	if err != nil {
		t.Fatal(err)
	}
	if q.Cap() != nslots || q.SlotSize() != slotSize-8 || len(q.b) != RingBytes(nslots, slotSize) {
		t.Fatalf("attached geometry %d %d %d", q.Cap(), q.SlotSize(), len(q.b))
	}
	mut := func(f func(b []byte)) []byte {
		b := alignedBytes(len(good))
		copy(b, good)
		f(b)
		return b
	}
	put := func(off int, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[off:], v) }
	}
	for _, c := range []struct {
		name  string
		b     []byte
		field string
	}{
		{"nil", nil, "length"},
		{"header only", good[:255], "length"},
		{"misaligned", good[8:], "address"},
		{"magic", mut(put(ringOffMagic, PoolMagic)), "magic"},
		{"version", mut(put(ringOffVersion, 2)), "version"},
		{"nslots 0", mut(put(ringOffNSlots, 0)), "nslots"},
		{"nslots 1", mut(put(ringOffNSlots, 1)), "nslots"},
		{"nslots 6", mut(put(ringOffNSlots, 6)), "nslots"},
		{"nslots 2^31", mut(put(ringOffNSlots, 1<<31)), "nslots"},
		{"slotSize 0", mut(put(ringOffSlotSize, 0)), "slotSize"},
		{"slotSize 72", mut(put(ringOffSlotSize, 72)), "slotSize"},
		{"slotSize huge", mut(put(ringOffSlotSize, 0xFFFFFFC0)), "slotSize"},
		{"too big for bytes", mut(put(ringOffNSlots, 8)), "nslots*slotSize"},
		{"truncated", good[:RingBytes(nslots, slotSize)-1], "nslots*slotSize"},
	} {
		_, err := AttachRing(c.b)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Layout != "ring" || fe.Field != c.field {
			t.Errorf("%s: %v, want ring field %q", c.name, err, c.field)
		}
	}
}

// Garbage in the shared words may lose messages but never panics, indexes
// outside the ring or makes TryReserve spin.
func TestRingCorruptWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		q, b := newTestRing(t, 4, 64)
		for _, off := range []int{ringOffTail, ringOffHead, 256, 256 + 64, 256 + 128, 256 + 192} {
			if rng.IntN(2) == 0 {
				binary.LittleEndian.PutUint64(b[off:], rng.Uint64()>>(rng.IntN(64)))
			}
		}
		for range 8 {
			if d, tk, ok := q.TryReserve(); ok {
				clear(d)
				q.Commit(tk)
			}
			if d, ok := q.Peek(); ok {
				clear(d)
				q.Release()
			}
			q.Empty()
		}
	}
}
