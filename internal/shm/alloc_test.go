package shm

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"
)

// Budgets: the hot operations allocate nothing.
func TestNoAllocs(t *testing.T) {
	q, _ := newTestRing(t, 4096, 64)
	const runs = 1000
	if n := testing.AllocsPerRun(runs, func() {
		d, tk, ok := q.TryReserve()
		if !ok {
			panic("full")
		}
		d[0] = 1
		q.Commit(tk)
	}); n != 0 {
		t.Errorf("TryReserve+Commit: %v allocs/op", n)
	}
	if n := testing.AllocsPerRun(runs, func() {
		d, ok := q.Peek()
		if !ok {
			panic("empty")
		}
		_ = d[0]
		q.Release()
	}); n != 0 {
		t.Errorf("Peek+Release: %v allocs/op", n)
	}
	if n := testing.AllocsPerRun(runs, func() { q.Empty() }); n != 0 {
		t.Errorf("Empty: %v allocs/op", n)
	}
	p, err := InitPool(alignedBytes(PoolBytes(16, 64)), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(runs, func() {
		idx, _, ok := p.TryAlloc()
		if !ok {
			panic("exhausted")
		}
		if _, err := p.Buf(idx); err != nil {
			panic(err)
		}
		if err := p.Free(idx); err != nil {
			panic(err)
		}
		p.Free(-1)
	}); n != 0 {
		t.Errorf("TryAlloc+Buf+Free: %v allocs/op", n)
	}
	bell := BellAt(alignedBytes(64), 0)
	if n := testing.AllocsPerRun(runs, bell.Ring); n != 0 {
		t.Errorf("Bell.Ring: %v allocs/op", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		bell.Sleep(func() bool { return !q.Empty() }, time.Nanosecond)
	}); n != 0 {
		t.Errorf("Bell.Sleep: %v allocs/op", n)
	}
}

// BenchmarkRingReserveCommit: producer cost on an uncontended ring (drained
// with the timer stopped whenever it fills).
func BenchmarkRingReserveCommit(b *testing.B) {
	q, _ := newTestRing(b, 4096, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d, tk, ok := q.TryReserve()
		if !ok {
			b.StopTimer()
			for _, ok := q.Peek(); ok; _, ok = q.Peek() {
				q.Release()
			}
			b.StartTimer()
			d, tk, _ = q.TryReserve()
		}
		d[0] = byte(i)
		q.Commit(tk)
	}
}

// BenchmarkRingPeekRelease: consumer cost (refilled with the timer stopped).
func BenchmarkRingPeekRelease(b *testing.B) {
	q, _ := newTestRing(b, 4096, 64)
	b.ReportAllocs()
	var sink byte
	for i := 0; i < b.N; i++ {
		d, ok := q.Peek()
		if !ok {
			b.StopTimer()
			for push(q, 0) {
			}
			b.StartTimer()
			d, _ = q.Peek()
		}
		sink += d[0]
		q.Release()
	}
	_ = sink
}

// BenchmarkRingRoundTripSameGoroutine: all four operations, one message at a
// time, on one goroutine (the cost without any cache-line transfer).
func BenchmarkRingRoundTripSameGoroutine(b *testing.B) {
	q, _ := newTestRing(b, 64, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d, tk, _ := q.TryReserve()
		d[0] = byte(i)
		q.Commit(tk)
		d, _ = q.Peek()
		_ = d[0]
		q.Release()
	}
}

// spinPeek polls q until a message arrives, yielding now and then so that it
// also works with GOMAXPROCS=1.
func spinPeek(q *Ring) []byte {
	for n := 0; ; n++ {
		if d, ok := q.Peek(); ok {
			return d
		}
		if n&127 == 127 {
			runtime.Gosched()
		}
	}
}

func spinReserve(q *Ring) ([]byte, uint64) {
	for n := 0; ; n++ {
		if d, tk, ok := q.TryReserve(); ok {
			return d, tk
		}
		if n&127 == 127 {
			runtime.Gosched()
		}
	}
}

// BenchmarkRingPing: a message to another goroutine and its echo back
// through a second ring, both sides polling; ns/op is one round trip.
func BenchmarkRingPing(b *testing.B) {
	there, _ := newTestRing(b, 64, 64)
	back, _ := newTestRing(b, 64, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			d := spinPeek(there)
			v := binary.LittleEndian.Uint64(d)
			there.Release()
			e, tk := spinReserve(back)
			binary.LittleEndian.PutUint64(e, v)
			back.Commit(tk)
			if v == ^uint64(0) {
				return
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, tk := spinReserve(there)
		binary.LittleEndian.PutUint64(d, uint64(i))
		there.Commit(tk)
		e := spinPeek(back)
		if binary.LittleEndian.Uint64(e) != uint64(i) {
			b.Fatal("wrong echo")
		}
		back.Release()
	}
	b.StopTimer()
	d, tk := spinReserve(there)
	binary.LittleEndian.PutUint64(d, ^uint64(0))
	there.Commit(tk)
	spinPeek(back)
	back.Release()
	<-done
}

// BenchmarkRingPingBell: as BenchmarkRingPing, but both sides sleep on a
// Bell when their ring is empty (the futex path).
func BenchmarkRingPingBell(b *testing.B) {
	there, _ := newTestRing(b, 64, 64)
	back, _ := newTestRing(b, 64, 64)
	bells := alignedBytes(128)
	thereBell, backBell := BellAt(bells, 0), BellAt(bells, 64)
	wait := func(q *Ring, bl Bell) []byte {
		for {
			if d, ok := q.Peek(); ok {
				return d
			}
			bl.Sleep(func() bool { return !q.Empty() }, 0)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			d := wait(there, thereBell)
			v := binary.LittleEndian.Uint64(d)
			there.Release()
			e, tk := spinReserve(back)
			binary.LittleEndian.PutUint64(e, v)
			back.Commit(tk)
			backBell.Ring()
			if v == ^uint64(0) {
				return
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, tk := spinReserve(there)
		binary.LittleEndian.PutUint64(d, uint64(i))
		there.Commit(tk)
		thereBell.Ring()
		wait(back, backBell)
		back.Release()
	}
	b.StopTimer()
	d, tk := spinReserve(there)
	binary.LittleEndian.PutUint64(d, ^uint64(0))
	there.Commit(tk)
	thereBell.Ring()
	wait(back, backBell)
	back.Release()
	<-done
}

// BenchmarkRingMPSC: throughput of producers on every P into one consumer
// goroutine; ns/op is per message.
func BenchmarkRingMPSC(b *testing.B) {
	q, _ := newTestRing(b, 1024, 64)
	stop := make(chan struct{})
	consumed := make(chan int)
	go func() {
		n := 0
		for {
			if _, ok := q.Peek(); ok {
				q.Release()
				n++
				continue
			}
			select {
			case <-stop:
				for _, ok := q.Peek(); ok; _, ok = q.Peek() {
					q.Release()
					n++
				}
				consumed <- n
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			d, tk := spinReserve(q)
			d[0] = 1
			q.Commit(tk)
		}
	})
	close(stop)
	if n := <-consumed; n != b.N {
		b.Fatalf("consumed %d of %d", n, b.N)
	}
}

func BenchmarkPoolAllocFree(b *testing.B) {
	p, err := InitPool(alignedBytes(PoolBytes(64, 64)), 64, 64)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		idx, _, _ := p.TryAlloc()
		p.Free(idx)
	}
}

func BenchmarkBellRingNoSleeper(b *testing.B) {
	bell := BellAt(alignedBytes(64), 0)
	for i := 0; i < b.N; i++ {
		bell.Ring()
	}
}
