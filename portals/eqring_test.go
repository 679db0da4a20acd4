package portals

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// eqFeed is an EQ of a physical NI of this process and a way to post into it as the NIC
// does (with the NI lock held), for the tests of the lock-free take.
func eqFeed(t *testing.T, count uint64) (EQHandle, *eqObj, func(uint64), func(int)) {
	t.Helper()
	if err := Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(Fini)
	h, _, err := NIInit(Interface(0), NIMatching|NIPhysical, PIDAny, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Fini() })
	eq := must(h.EQAlloc(count))
	q := liveEQ(eq)
	if q == nil {
		t.Fatal("a new EQ is not found live without the lock")
	}
	p := q.ni.p
	post := func(u uint64) {
		p.mu.Lock()
		q.post(&Event{Type: EventPut, UserPtr: u, MLength: u * 3})
		p.unlockWake()
	}
	grow := func(k int) {
		p.mu.Lock()
		q.grow(k)
		p.mu.Unlock()
	}
	return eq, q, post, grow
}

// TestEQDroppedOneConsumer: one consumer taking (PtlEQGet) while the NIC posts into a small
// EQ that overflows and grows: the events come in order, none twice, and PTL_EQ_DROPPED
// comes with exactly the events that follow a lost one (§3.13.7).
func TestEQDroppedOneConsumer(t *testing.T) {
	eq, _, post, grow := eqFeed(t, 4)
	const n = 20000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); i <= n; i++ {
			post(i)
			if i%5000 == 0 {
				grow(1)
			}
			if i%(i%7+1) == 0 {
				runtime.Gosched() // runs of 1 to 7 posts, some of them overflowing
			}
		}
	}()
	var last uint64
	drops, stop := 0, false
	for !stop {
		select {
		case <-done:
			stop = true
		default:
		}
		for {
			ev, err := eq.Get()
			if errors.Is(err, ErrEQEmpty) {
				break
			}
			if err != nil && !errors.Is(err, ErrEQDropped) {
				t.Fatal(err)
			}
			if ev.UserPtr <= last || ev.MLength != ev.UserPtr*3 {
				t.Fatalf("event %d (mlength %d) after %d", ev.UserPtr, ev.MLength, last)
			}
			if gap := ev.UserPtr != last+1; gap != errors.Is(err, ErrEQDropped) {
				t.Fatalf("event %d after %d with %v", ev.UserPtr, last, err)
			}
			if err != nil {
				drops++
			}
			last = ev.UserPtr
		}
	}
	if last != n {
		t.Fatalf("last event %d, want %d", last, n)
	}
	t.Logf("%d drops", drops)
}

// TestEQTakeConsumers: several goroutines take from one EQ (PtlEQGet and PtlEQWait) while
// the NIC posts into it, overflowing and growing it: each event is taken at most once, each
// goroutine sees them in order, and every event is taken once when none is dropped.
func TestEQTakeConsumers(t *testing.T) {
	for _, count := range []uint64{4, 1 << 16} {
		t.Run(strconv.FormatUint(count, 10), func(t *testing.T) { eqTakeConsumers(t, count) })
	}
}

func eqTakeConsumers(t *testing.T, count uint64) {
	{
		eq, _, post, grow := eqFeed(t, count)
		const n, workers = 20000, 3
		seen := make([][]uint64, workers)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var started sync.WaitGroup
		finished := false
		for w := range workers {
			wg.Add(1)
			started.Add(1)
			go func() {
				defer wg.Done()
				started.Done()
				var last uint64
				for {
					var ev Event
					var err error
					if w == 0 {
						ev, err = eq.Wait()
					} else {
						ev, err = eq.Get()
					}
					if errors.Is(err, ErrEQEmpty) {
						mu.Lock()
						f := finished
						mu.Unlock()
						if f {
							return
						}
						continue
					}
					if err != nil && !errors.Is(err, ErrEQDropped) {
						t.Error(err)
						return
					}
					if ev.UserPtr == 0 { // the end marker, once per waiter
						return
					}
					if ev.UserPtr <= last || ev.MLength != ev.UserPtr*3 {
						t.Errorf("worker %d: event %d (mlength %d) after %d", w, ev.UserPtr, ev.MLength, last)
						return
					}
					last = ev.UserPtr
					seen[w] = append(seen[w], last)
				}
			}()
		}
		started.Wait()
		for i := uint64(1); i <= n; i++ {
			post(i)
			if i%7000 == 0 {
				grow(2)
			}
			if i%(i%7+1) == 0 {
				runtime.Gosched()
			}
		}
		mu.Lock()
		finished = true
		mu.Unlock()
		for range workers { // end markers: a Get worker may take one, the waiter takes one
			post(0)
		}
		wg.Wait()
		got := make(map[uint64]bool)
		for _, s := range seen {
			for _, u := range s {
				if got[u] {
					t.Fatalf("count %d: event %d taken twice", count, u)
				}
				got[u] = true
			}
		}
		if count > n && len(got) != n {
			t.Fatalf("count %d: %d events taken, want %d", count, len(got), n)
		}
		t.Logf("count %d: %d of %d taken", count, len(got), n)
	}
}

// TestInitiatorRankSenders: a logical NI reports each sender's rank (§3.6.6) with messages
// from two senders interleaved (the last sender's rank is remembered) and after PtlSetMap
// gives the senders other ranks.
func TestInitiatorRankSenders(t *testing.T) {
	ok(t, Init())
	defer Fini()
	var nis [3]NIHandle
	var ids []ProcessID
	for i := range nis {
		h, _, err := NIInit(Interface(i), NIMatching|NILogical, PIDAny, nil)
		ok(t, err)
		defer h.Fini()
		nis[i] = h
		ids = append(ids, must(h.PhysID()))
	}
	for _, h := range nis {
		ok(t, h.SetMap(ids))
	}
	q := must(nis[0].EQAlloc(64))
	pt := must(nis[0].PTAlloc(0, q, PTAny))
	must(nis[0].MEAppend(pt, &ME{Buf: make([]byte, 8), UID: UIDAny, Options: OpPut | EventLinkDisable,
		MatchID: RankID(RankAny)}, PriorityList, 0))
	var mds [3]MDHandle
	for i := 1; i < 3; i++ {
		mds[i] = must(nis[i].MDBind(MD{Buf: make([]byte, 8)}))
	}
	check := func(from []int, rankOf func(int) Rank) {
		t.Helper()
		for _, s := range from {
			ok(t, Put(mds[s], 0, 8, NoAckReq, RankID(0), pt, 0, 0, 0, 0))
			ev := must(q.Wait())
			if ev.Initiator.Rank != rankOf(s) {
				t.Fatalf("a put from NI %d reports rank %d, want %d", s, ev.Initiator.Rank, rankOf(s))
			}
		}
	}
	check([]int{1, 2, 2, 1, 2, 1, 1}, func(s int) Rank { return Rank(s) })
	ok(t, nis[0].SetMap([]ProcessID{ids[0], ids[2], ids[1]}))
	check([]int{1, 1, 2, 1}, func(s int) Rank { return Rank(3 - s) })
}
