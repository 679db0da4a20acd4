package memcopy

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

type benchCopy struct {
	name string
	fn   func(dst, src []byte) int
}

var benchCopies = []benchCopy{
	{"go", func(dst, src []byte) int { return copy(dst, src) }},
	{"memcopy", Copy},
}

var benchSizes = []int{256, 1 << 10, 2 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkCopyHot is one thread copying between two buffers that stay in
// its cache (the single-thread hot-cache case Copy must not make worse).
func BenchmarkCopyHot(b *testing.B) {
	for _, c := range benchCopies {
		for _, n := range benchSizes {
			b.Run(c.name+"/"+sizeName(n), func(b *testing.B) {
				src, dst := pattern(n, 1), make([]byte, n)
				b.SetBytes(int64(n))
				for b.Loop() {
					c.fn(dst, src)
				}
			})
		}
	}
}

// pin locks the calling goroutine to its thread and the thread to cpu. The
// thread is not unlocked: it ends with the goroutine.
func pin(b *testing.B, cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		b.Skipf("sched_setaffinity: %v", err)
	}
}

// pingPong runs b.N round trips between two threads pinned to CPUs 0 and 1.
// Each half of a round trip is one call of step on that side's thread, then
// a flag store the other side spins on.
func pingPong(b *testing.B, stepA, stepB func()) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs two CPUs")
	}
	var turn atomic.Uint32
	var wg sync.WaitGroup
	wg.Add(2)
	N := b.N
	go func() {
		defer wg.Done()
		pin(b, 1)
		for i := 0; i < N; i++ {
			for turn.Load() != 1 {
			}
			stepB()
			turn.Store(0)
		}
	}()
	go func() {
		defer wg.Done()
		pin(b, 0)
		b.ResetTimer()
		for i := 0; i < N; i++ {
			stepA()
			turn.Store(1)
			for turn.Load() != 0 {
			}
		}
		b.StopTimer()
	}()
	wg.Wait()
}

// BenchmarkMediumPattern is the AM Medium echo: side A copies its own (hot)
// payload into a shared buffer X, side B copies X into a shared buffer Y
// (the reply's pool buffer). X's lines were last read by B, so A's writes
// find them in the other core; B's reads fetch them from A.
func BenchmarkMediumPattern(b *testing.B) {
	for _, c := range benchCopies {
		for _, n := range patternSizes {
			b.Run(c.name+"/"+sizeName(n), func(b *testing.B) {
				src, x, y := pattern(n, 1), make([]byte, n), make([]byte, n)
				b.SetBytes(int64(2 * n))
				pingPong(b, func() { c.fn(x, src) }, func() { c.fn(y, x) })
			})
		}
	}
}

// BenchmarkLongPattern is the AM Long echo: A copies Y into X, B copies X
// into Y, so every copy reads lines the other core wrote and writes lines
// the other core read.
func BenchmarkLongPattern(b *testing.B) {
	for _, c := range benchCopies {
		for _, n := range patternSizes {
			b.Run(c.name+"/"+sizeName(n), func(b *testing.B) {
				x, y := pattern(n, 1), make([]byte, n)
				b.SetBytes(int64(2 * n))
				pingPong(b, func() { c.fn(x, y) }, func() { c.fn(y, x) })
			})
		}
	}
}

var patternSizes = []int{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20}
