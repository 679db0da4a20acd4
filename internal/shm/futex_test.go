package shm

import (
	"sync/atomic"
	"testing"
	"time"
)

// A sleeper is woken: if the wake were lost the test would hang (and fail on
// the go test timeout).
func TestFutexWake(t *testing.T) {
	var w atomic.Uint32
	done := make(chan struct{})
	go func() {
		for w.Load() == 0 {
			FutexWait(&w, 0, 0)
		}
		close(done)
	}()
	w.Store(1)
	FutexWake(&w, 1)
	<-done
}

func TestFutexTimeoutReturns(t *testing.T) {
	var w atomic.Uint32
	FutexWait(&w, 0, time.Millisecond) // times out
	FutexWait(&w, 1, 0)                // value differs: returns at once
	FutexWake(&w, 0)
	FutexWake(&w, 1<<40) // no sleepers; n capped
}

// The futex is not process-private: a waiter on one mapping of a memfd is
// woken through a different virtual address of the same page (what two
// processes see).
func TestFutexAcrossMappings(t *testing.T) {
	r1, err := Memfd{}.Create(testName(t), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := Memfd{}.Open(r1.Desc())
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	w1, w2 := Uint32At(r1.Bytes(), 64), Uint32At(r2.Bytes(), 64)
	done := make(chan struct{})
	go func() {
		for w1.Load() == 0 {
			FutexWait(w1, 0, 0)
		}
		close(done)
	}()
	// Wake through the other mapping without changing the value: only a
	// shared futex key reaches the sleeper (with a private key this never
	// wakes anyone, and the test hangs).
	for futexWakeN(w2, 1) == 0 {
		time.Sleep(time.Millisecond)
	}
	w2.Store(1)
	FutexWake(w2, 1)
	<-done
}

func TestBell(t *testing.T) {
	b := alignedBytes(64)
	bl := BellAt(b, 0)
	bl.Ring() // nobody sleeps: value unchanged
	if bl.value.Load() != 0 {
		t.Error("Ring without sleepers changed value")
	}
	// check reports work: Sleep returns without waiting.
	bl.Sleep(func() bool { return true }, 0)
	if bl.sleepers.Load() != 0 {
		t.Error("sleepers not restored")
	}
	// A sleeper with no work is woken by a Ring.
	var work atomic.Bool
	done := make(chan struct{})
	go func() {
		for !work.Load() {
			bl.Sleep(work.Load, 0)
		}
		close(done)
	}()
	for bl.sleepers.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	work.Store(true)
	bl.Ring()
	<-done
	if bl.sleepers.Load() != 0 {
		t.Error("sleepers not restored")
	}
	if bl.value.Load() == 0 {
		t.Error("Ring with a sleeper did not bump value")
	}
	bl.Sleep(func() bool { return false }, time.Millisecond) // times out
}
