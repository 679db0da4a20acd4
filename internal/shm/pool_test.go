package shm

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
)

func TestPoolAllocFree(t *testing.T) {
	const nbufs, bufSize = 4, 256
	b := alignedBytes(PoolBytes(nbufs, bufSize))
	p, err := InitPool(b, nbufs, bufSize)
	if err != nil {
		t.Fatal(err)
	}
	if p.NumBufs() != nbufs || p.BufSize() != bufSize {
		t.Fatalf("geometry %d %d", p.NumBufs(), p.BufSize())
	}
	seen := map[int]bool{}
	for i := range nbufs {
		idx, buf, ok := p.TryAlloc()
		if !ok {
			t.Fatalf("alloc %d failed", i)
		}
		if seen[idx] || len(buf) != bufSize || cap(buf) != bufSize {
			t.Fatalf("alloc %d: idx %d (dup %v), len %d", i, idx, seen[idx], len(buf))
		}
		seen[idx] = true
		buf[0] = byte(idx)
	}
	if _, _, ok := p.TryAlloc(); ok {
		t.Fatal("TryAlloc on an exhausted pool succeeded")
	}
	// A peer's view sees the buffers and frees one.
	peer, err := AttachPool(b)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := peer.Buf(2)
	if err != nil || buf[0] != 2 {
		t.Fatalf("peer Buf(2) = %v, %v", buf[:1], err)
	}
	if err := peer.Free(2); err != nil {
		t.Fatal(err)
	}
	if err := peer.Free(2); !errors.Is(err, ErrNotBusy) {
		t.Errorf("double Free: %v", err)
	}
	idx, _, ok := p.TryAlloc()
	if !ok || idx != 2 {
		t.Fatalf("realloc = %d %v, want 2", idx, ok)
	}
	for _, i := range []int{-1, nbufs, nbufs + 1, 1 << 40, -1 << 62} {
		if _, err := p.Buf(i); !errors.Is(err, ErrBadIndex) {
			t.Errorf("Buf(%d): %v", i, err)
		}
		if err := p.Free(i); !errors.Is(err, ErrBadIndex) {
			t.Errorf("Free(%d): %v", i, err)
		}
	}
}

// Concurrent allocators never get the same buffer twice.
func TestPoolConcurrent(t *testing.T) {
	const nbufs = 8
	p, err := InitPool(alignedBytes(PoolBytes(nbufs, 64)), nbufs, 64)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 20000 {
				idx, buf, ok := p.TryAlloc()
				if !ok {
					continue
				}
				tag := uint64(g)<<32 | uint64(i)
				binary.LittleEndian.PutUint64(buf, tag)
				if got := binary.LittleEndian.Uint64(buf); got != tag {
					t.Errorf("buffer %d shared: wrote %#x, read %#x", idx, tag, got)
					return
				}
				if err := p.Free(idx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestPoolValidates(t *testing.T) {
	for _, c := range []struct{ nbufs, bufSize int }{{0, 64}, {-1, 64}, {1 << 25, 64}, {1, 0}, {1, 96}, {1, -64}} {
		if _, err := InitPool(alignedBytes(4096), c.nbufs, c.bufSize); !errors.Is(err, ErrFormat) {
			t.Errorf("InitPool(%d, %d): %v", c.nbufs, c.bufSize, err)
		}
	}
	if _, err := InitPool(alignedBytes(PoolBytes(2, 64)-1), 2, 64); !errors.Is(err, ErrFormat) {
		t.Error("InitPool on short memory:", err)
	}
	good := alignedBytes(PoolBytes(2, 128) + 64)
	if _, err := InitPool(good, 2, 128); err != nil {
		t.Fatal(err)
	}
	mut := func(off int, v uint32) []byte {
		b := alignedBytes(len(good))
		copy(b, good)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	for _, c := range []struct {
		name  string
		b     []byte
		field string
	}{
		{"nil", nil, "length"},
		{"misaligned", good[4:], "address"},
		{"magic", mut(poolOffMagic, RingMagic), "magic"},
		{"version", mut(poolOffVersion, 0), "version"},
		{"nbufs 0", mut(poolOffNBufs, 0), "nbufs"},
		{"nbufs huge", mut(poolOffNBufs, 1<<31), "nbufs"},
		{"bufSize 100", mut(poolOffBufSize, 100), "bufSize"},
		{"bufSize 0", mut(poolOffBufSize, 0), "bufSize"},
		{"too big", mut(poolOffNBufs, 3), "nbufs*bufSize"},
		{"truncated", good[:PoolBytes(2, 128)-1], "nbufs*bufSize"},
	} {
		_, err := AttachPool(c.b)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Layout != "pool" || fe.Field != c.field {
			t.Errorf("%s: %v, want pool field %q", c.name, err, c.field)
		}
	}
}

// TestPoolPut: Put frees like Free (a peer's view frees, the owner allocates
// the same buffer again; the hinted buffer is taken at once when free, and a
// busy one is skipped), and ignores an index out of range.
func TestPoolPut(t *testing.T) {
	const nbufs, bufSize = 4, 256
	_, p, peer := newPoolPair(t, nbufs, bufSize)
	for round := range 3 * nbufs {
		idx, _, ok := p.TryAlloc()
		if !ok || idx != round%nbufs {
			t.Fatalf("round %d: TryAlloc = %d %v, want %d (round robin)", round, idx, ok, round%nbufs)
		}
		peer.Put(idx)
	}
	// Buffer 0 (the hint) busy: the next free one is taken.
	if idx, _, ok := p.TryAlloc(); !ok || idx != 0 {
		t.Fatalf("TryAlloc = %d %v, want 0", idx, ok)
	}
	p.next.Store(0)
	if idx, _, ok := p.TryAlloc(); !ok || idx != 1 {
		t.Fatalf("TryAlloc with the hint busy = %d %v, want 1", idx, ok)
	}
	// TryAllocHot: the buffer freed last is taken again while it is free;
	// busy, the next free one is.
	peer.Put(0)
	peer.Put(1)
	p.next.Store(1)
	for range nbufs {
		if idx, _, ok := p.TryAllocHot(); !ok || idx != 1 {
			t.Fatalf("TryAllocHot = %d %v, want 1 again", idx, ok)
		}
		peer.Put(1)
	}
	if idx, _, ok := p.TryAllocHot(); !ok || idx != 1 {
		t.Fatalf("TryAllocHot = %d %v, want 1", idx, ok)
	}
	if idx, _, ok := p.TryAllocHot(); !ok || idx != 2 {
		t.Fatalf("TryAllocHot with buffer 1 busy = %d %v, want 2", idx, ok)
	}
	peer.Put(1)
	peer.Put(2)
	p.next.Store(0)
	for _, i := range []int{-1, nbufs, 1 << 40} {
		peer.Put(i)
	}
	peer.Put(0)
	if err := peer.Free(0); !errors.Is(err, ErrNotBusy) {
		t.Fatalf("Free after Put: %v, want ErrNotBusy", err)
	}
}

// TestPoolPrefetch: PrefetchPut and PrefetchHot are only hints. They leave
// every flag, every buffer byte and the allocation hint as they were (a
// busy buffer stays busy until Put, a free one stays free), and an index
// outside the pool is ignored.
func TestPoolPrefetch(t *testing.T) {
	const nbufs, bufSize = 2, 128
	b, p, peer := newPoolPair(t, nbufs, bufSize)
	for i := range b[poolOffFlags+nbufs*poolFlagStride:] {
		b[poolOffFlags+nbufs*poolFlagStride+i] = byte(i)
	}
	before := append([]byte(nil), b...)
	// Both free: prefetching changes nothing.
	for _, i := range []int{-1, 0, 1, nbufs, 1 << 40} {
		peer.PrefetchPut(i)
	}
	p.PrefetchHot()
	if string(b) != string(before) {
		t.Fatal("PrefetchPut or PrefetchHot on free buffers changed the pool's bytes")
	}
	idx, _, ok := p.TryAlloc()
	if !ok {
		t.Fatal("TryAlloc failed")
	}
	other, _, ok := p.TryAlloc()
	if !ok {
		t.Fatal("second TryAlloc failed")
	}
	busy := append([]byte(nil), b...)
	hint := p.next.Load()
	peer.PrefetchPut(idx)
	peer.PrefetchPut(other)
	p.PrefetchHot()
	if string(b) != string(busy) {
		t.Fatal("PrefetchPut or PrefetchHot on busy buffers changed the pool's bytes")
	}
	if p.next.Load() != hint {
		t.Fatalf("PrefetchHot moved the hint: %d, was %d", p.next.Load(), hint)
	}
	if _, _, ok := p.TryAlloc(); ok {
		t.Fatal("a buffer became free by PrefetchPut alone")
	}
	peer.Put(idx)
	if got, _, ok := p.TryAllocHot(); !ok || got != idx {
		t.Fatalf("after Put: TryAllocHot = %d %v, want %d", got, ok, idx)
	}
}

// newPoolPair makes a pool of nbufs buffers of bufSize bytes in new aligned
// memory b, and a second view of it, as a peer attaches it.
func newPoolPair(t *testing.T, nbufs, bufSize int) (b []byte, owner, peer *Pool) {
	t.Helper()
	b = alignedBytes(PoolBytes(nbufs, bufSize))
	owner, err := InitPool(b, nbufs, bufSize)
	if err != nil {
		t.Fatal(err)
	}
	if peer, err = AttachPool(b); err != nil {
		t.Fatal(err)
	}
	return b, owner, peer
}
