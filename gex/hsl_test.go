package gex_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// GASNet-EX "Handler-safe locks (HSLs)": "Lock semantics are identical to
// those in GASNet-1": a mutual-exclusion lock that may be taken both by
// handlers and by the application, initialised by GEX_HSL_INITIALIZER (the
// zero value) or gex_HSL_Init; unlocking an HSL one does not hold, and
// destroying or re-initialising a locked one, are errors (fatal in GASNet,
// panics here).

// An HSL protects a plain (non-atomic) counter updated both by handlers on the
// receive goroutine and by the application goroutine. Run under -race: a hole
// in the exclusion is a reported race, and a lost update a wrong count.
//
// One rank sending to itself: the harness registers its barrier handler after
// ClientInit has started the receive goroutine, so with several ranks a
// peer's first barrier AM can arrive before that registration.
func TestHSLMutualExclusion(t *testing.T) {
	const perSide = 2000
	conformance(t, 1, jobOpts{rcv: true}, func(e *rankEnv) {
		var h gex.HSL
		counter := 0 // guarded by h
		var handled atomic.Int32
		table := []gex.AMEntry{{Name: "inc", Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) {
			h.Lock()
			v := counter
			runtime.Gosched() // widen the window for a broken lock
			counter = v + 1
			h.Unlock()
			handled.Add(1)
		}}}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		for i := 0; i < perSide; i++ {
			e.Check(e.tm.RequestShort(e.rank, table[0].Index, 0), "RequestShort")
			h.Lock()
			v := counter
			if i%16 == 0 {
				runtime.Gosched()
			}
			counter = v + 1
			h.Unlock()
		}
		e.Check(e.c.BlockUntil(func() bool { return handled.Load() == perSide }), "BlockUntil")
		h.Lock()
		got := counter
		h.Unlock()
		if got != 2*perSide {
			e.Fatalf("counter = %d after %d locked increments on each side, want %d", got, perSide, 2*perSide)
		}
	})
}

func TestHSLTryLock(t *testing.T) {
	var h gex.HSL // GEX_HSL_INITIALIZER
	if !h.TryLock() {
		t.Fatal("TryLock of a zero-value HSL failed")
	}
	other := func() bool {
		ch := make(chan bool)
		go func() {
			ok := h.TryLock()
			if ok {
				h.Unlock()
			}
			ch <- ok
		}()
		return <-ch
	}
	if other() {
		t.Fatal("TryLock succeeded on another goroutine while the HSL was held")
	}
	if h.TryLock() {
		t.Fatal("TryLock by the holder succeeded (HSLs are not recursive)")
	}
	h.Unlock()
	if !other() {
		t.Fatal("TryLock on another goroutine failed after Unlock")
	}
	// Lock blocks while another goroutine holds it.
	h.Lock()
	acquired := make(chan struct{})
	go func() {
		h.Lock()
		close(acquired)
		h.Unlock()
	}()
	select {
	case <-acquired:
		t.Fatal("Lock returned on another goroutine while the HSL was held")
	default:
	}
	h.Unlock()
	<-acquired
}

// mustPanic reports whether f panics.
func mustPanic(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}

func TestHSLMisuse(t *testing.T) {
	var h gex.HSL
	if !mustPanic(h.Unlock) {
		t.Error("Unlock of an unlocked HSL did not panic")
	}
	h.Lock()
	var wg sync.WaitGroup
	wg.Add(1)
	var otherPanicked bool
	go func() {
		defer wg.Done()
		otherPanicked = mustPanic(h.Unlock)
	}()
	wg.Wait()
	if !otherPanicked {
		t.Error("Unlock by a goroutine that does not hold the HSL did not panic")
	}
	if !mustPanic(h.Init) {
		t.Error("Init of a locked HSL did not panic")
	}
	if !mustPanic(h.Destroy) {
		t.Error("Destroy of a locked HSL did not panic")
	}
	if !mustPanic(h.Lock) {
		t.Error("Lock by the holder did not panic (HSLs are not recursive)")
	}
	// The refused calls left the lock held by this goroutine, and usable.
	if h.TryLock() {
		t.Fatal("the HSL became free after refused calls")
	}
	h.Unlock()
	h.Init()
	h.Lock()
	h.Unlock()
	h.Destroy()
}

// HSLs are process-wide, not per client: holding one restricts the goroutine
// for every client, and only that goroutine.
func TestHSLRestrictsOnlyHolder(t *testing.T) {
	c, ep, tm := selfClient(t)
	var ran atomic.Int32
	table := []gex.AMEntry{{Fn: func(*gex.Token, []byte, []gex.AMArg) { ran.Add(1) }, Flags: gex.FlagAMShort | gex.FlagAMRequest}}
	if err := ep.RegisterHandlers(table); err != nil {
		t.Fatal(err)
	}
	var h gex.HSL
	h.Lock()
	if err := tm.RequestShort(0, table[0].Index, 0); err == nil {
		t.Error("RequestShort while holding an HSL succeeded")
	}
	done := make(chan error)
	go func() {
		err := tm.RequestShort(0, table[0].Index, 0)
		if err == nil {
			err = c.BlockUntil(func() bool { return ran.Load() == 1 })
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Errorf("another goroutine was restricted while this one held an HSL: %v", err)
	}
	h.Unlock()
	if ran.Load() != 1 {
		t.Errorf("%d handlers ran, want 1", ran.Load())
	}
}
