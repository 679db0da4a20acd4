package gctx

import (
	"sync"
	"testing"
)

func TestIDStableAndDistinct(t *testing.T) {
	a, b := ID(), ID()
	if a == 0 || a != b {
		t.Fatalf("ID not stable on one goroutine: %#x then %#x", a, b)
	}
	const n = 8
	ids := make([]uintptr, n)
	var wg sync.WaitGroup
	var start sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait() // all n goroutines are alive at once
			ids[i] = ID()
			if ids[i] != ID() {
				t.Errorf("goroutine %d: ID changed", i)
			}
			start.Wait()
		}()
	}
	start.Done()
	wg.Wait()
	seen := map[uintptr]bool{a: true}
	for i, id := range ids {
		if seen[id] {
			t.Fatalf("goroutine %d shares ID %#x with another live goroutine", i, id)
		}
		seen[id] = true
	}
}

func TestIDSurvivesStackGrowth(t *testing.T) {
	a := ID()
	var grow func(int) uintptr
	grow = func(d int) uintptr {
		var pad [256]byte
		if d == 0 {
			return ID() + uintptr(pad[0])
		}
		return grow(d - 1)
	}
	if b := grow(2000); b != a {
		t.Fatalf("ID changed after stack growth: %#x -> %#x", a, b)
	}
}

func BenchmarkID(b *testing.B) {
	for b.Loop() {
		ID()
	}
}
