package shm

import (
	"encoding/binary"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// envTestNoFence, set to a non-empty value, removes the membarrier from the
// consumer's Sleep in TestHeavyFenceNoLostWakeup while the producer still
// commits with a release store: the test must then fail (lost wake-ups).
const envTestNoFence = "GEXGO_TEST_NO_FENCE"

// lostWakeups runs iters rounds of one consumer going to sleep on a Bell
// just as one producer commits a one-slot message and rings, and returns
// the rounds in which the consumer's futex wait ended by timeout while a
// message was in the ring (a lost wake-up: correct operation never waits
// that long). The producer waits until the consumer announces each round,
// then commits, each side after a varying pause, so that its
// commit and its load of the sleeper count land in the consumer's window
// between announcing itself and checking the ring. It stops after 3 losses.
//
// With standing, the consumer first sleeps until a short timeout with
// nothing to do before each round, so that its real Sleep finds that
// announcement standing and skips its own membarrier (Bell.Sleep), and
// withdraws it when it finds the message, as the smp conduit's Poll does.
func lostWakeups(t *testing.T, iters int, release, heavy bool, standing ...bool) (lost int) {
	t.Helper()
	const timeout = time.Second
	b := alignedBytes(MsgRingBytes(64) + 64)
	cq, err := InitMsgRing(b[:MsgRingBytes(64)], 64)
	if err != nil {
		t.Fatal(err)
	}
	pq, err := AttachMsgRing(b[:MsgRingBytes(64)])
	if err != nil {
		t.Fatal(err)
	}
	if release {
		pq.SetReleaseCommit()
	}
	pb := BellAt(b, MsgRingBytes(64))
	cb := pb
	if heavy {
		cb = pb.WithHeavyFence()
	}
	var ready, done atomic.Uint64
	quit := make(chan struct{})
	go func() {
		for i := uint64(1); i <= uint64(iters); i++ {
			for ready.Load() != i {
				select {
				case <-quit:
					return
				default:
				}
			}
			for j := i / 97 % 5; j > 0; j-- { // a varying pause
				_ = done.Load()
			}
			data, tk, ok := pq.Reserve(8)
			if !ok {
				panic("ring full")
			}
			binary.LittleEndian.PutUint64(data, i)
			pq.Commit(tk)
			pb.Ring()
			for done.Load() != i {
				select {
				case <-quit:
					return
				default:
				}
				runtime.Gosched()
			}
		}
	}()
	defer close(quit)
	check := func() bool { return !cq.Empty() }
	stand := len(standing) > 0 && standing[0]
	for i := uint64(1); i <= uint64(iters) && lost < 3; i++ {
		if stand { // a late Ring of the last round may end one early: retry
			for k := 0; !cb.Sleep(check, time.Microsecond); k++ {
				if k == 100 {
					t.Fatalf("round %d: idle Sleeps with nothing in the ring never time out", i)
				}
			}
		}
		ready.Store(i)
		for j := i % 97; j > 0; j-- { // a varying pause: sweep the window
			_ = ready.Load()
		}
		for {
			if cb.Sleep(check, timeout) && !cq.Empty() {
				lost++
				t.Logf("round %d: the consumer slept until its %v timeout with a message in the ring", i, timeout)
			}
			data, ok := cq.Peek()
			if !ok {
				continue
			}
			if got := binary.LittleEndian.Uint64(data); got != i {
				t.Fatalf("round %d: message %d", i, got)
			}
			cq.Release()
			cq.Publish()
			if stand {
				cb.Withdraw()
			}
			break
		}
		done.Store(i)
	}
	return lost
}

func fenceIters() int {
	if testing.Short() {
		return 2000
	}
	return 50000
}

// TestHeavyFenceNoLostWakeup: release-store commits to a consumer that
// sleeps with membarrier (Bell.WithHeavyFence) lose no wake-up.
// GEXGO_TEST_NO_FENCE=1 removes the barrier to show the test failing.
func TestHeavyFenceNoLostWakeup(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two threads running at once (GOMAXPROCS >= 2)")
	}
	if !EnableHeavyFence() {
		t.Skip("membarrier MEMBARRIER_CMD_GLOBAL_EXPEDITED unavailable here (TestSeqCstCommitNoLostWakeup covers the fallback)")
	}
	if os.Getenv(envTestNoFence) != "" {
		testSkipHeavyFence = true
		defer func() { testSkipHeavyFence = false }()
	}
	if lost := lostWakeups(t, fenceIters(), true, true); lost != 0 {
		t.Fatalf("%d lost wake-ups in %d rounds", lost, fenceIters())
	}
}

// TestHeavyFenceStandingNoLostWakeup: the same with the consumer's
// announcement left standing by an idle Sleep before every round, so that
// the Sleep that races the producer skips the membarrier (one fence per idle
// period) and counts on that standing announcement. (Without the fence it
// passes too: an announcement made long before the producer's commit is
// seen by the producer's load anyway; the fence guards fresh ones, which
// TestHeavyFenceNoLostWakeup covers.)
func TestHeavyFenceStandingNoLostWakeup(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two threads running at once (GOMAXPROCS >= 2)")
	}
	if !EnableHeavyFence() {
		t.Skip("membarrier MEMBARRIER_CMD_GLOBAL_EXPEDITED unavailable here")
	}
	iters := fenceIters() / 5
	if lost := lostWakeups(t, iters, true, true, true); lost != 0 {
		t.Fatalf("%d lost wake-ups in %d rounds", lost, iters)
	}
}

// TestBellStanding: a fenced Sleep that times out with nothing to do leaves
// one sleeper announced (producers keep ringing), a later one adds none,
// Withdraw takes it back, and a Sleep that finds work leaves nothing.
func TestBellStanding(t *testing.T) {
	if !EnableHeavyFence() {
		t.Skip("membarrier unavailable")
	}
	b := alignedBytes(64)
	pb := BellAt(b, 0)
	cb := pb.WithHeavyFence()
	sleepers := Uint32At(b, bellOffSleepers)
	value := Uint32At(b, bellOffValue)
	idle := func() bool { return false }
	if !cb.Sleep(idle, time.Microsecond) {
		t.Fatal("an idle Sleep did not time out")
	}
	if n := sleepers.Load(); n != 1 {
		t.Fatalf("after an idle Sleep: %d sleepers announced, want 1 standing", n)
	}
	cb.Sleep(idle, time.Microsecond)
	if n := sleepers.Load(); n != 1 {
		t.Fatalf("after a second idle Sleep: %d sleepers announced, want 1", n)
	}
	v := value.Load()
	pb.Ring()
	if value.Load() == v {
		t.Fatal("Ring while an announcement stands did not bump the futex word")
	}
	cb.Withdraw()
	if n := sleepers.Load(); n != 0 {
		t.Fatalf("after Withdraw: %d sleepers announced, want 0", n)
	}
	cb.Sleep(idle, time.Microsecond)
	if cb.Sleep(func() bool { return true }, time.Second) {
		t.Fatal("a Sleep whose check is true timed out")
	}
	if n := sleepers.Load(); n != 0 {
		t.Fatalf("a Sleep that found work left %d sleepers announced, want 0 (it withdraws the standing one)", n)
	}
	cb.Withdraw() // nothing standing: no change
	if n := sleepers.Load(); n != 0 {
		t.Fatalf("after a second Withdraw: %d sleepers, want 0", n)
	}
	if cb.Sleep(func() bool { return true }, time.Second) {
		t.Fatal("a Sleep whose check is true timed out")
	}
	if n := sleepers.Load(); n != 0 {
		t.Fatalf("after a Sleep that found work: %d sleepers, want 0", n)
	}
	pb.Sleep(idle, time.Microsecond) // a plain Bell never leaves one standing
	if n := sleepers.Load(); n != 0 {
		t.Fatalf("after a plain Bell's idle Sleep: %d sleepers, want 0", n)
	}
	pb.Withdraw()
}

// TestSeqCstCommitNoLostWakeup is the fallback where membarrier is missing:
// sequentially consistent commits to a consumer sleeping without the
// barrier lose no wake-up either.
func TestSeqCstCommitNoLostWakeup(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two threads running at once (GOMAXPROCS >= 2)")
	}
	if lost := lostWakeups(t, fenceIters(), false, false); lost != 0 {
		t.Fatalf("%d lost wake-ups in %d rounds", lost, fenceIters())
	}
}

func TestFenceNoAllocs(t *testing.T) {
	if !EnableHeavyFence() {
		t.Skip("membarrier unavailable")
	}
	b := alignedBytes(MsgRingBytes(64) + 64)
	q, err := InitMsgRing(b[:MsgRingBytes(64)], 64)
	if err != nil {
		t.Fatal(err)
	}
	q.SetReleaseCommit()
	bell := BellAt(b, MsgRingBytes(64)).WithHeavyFence()
	check := func() bool { return true }
	if n := testing.AllocsPerRun(100, func() {
		_, tk, _ := q.Reserve(8)
		q.Commit(tk)
		bell.Ring()
		bell.Sleep(check, time.Second)
		q.Peek()
		q.Release()
		q.Publish()
	}); n != 0 {
		t.Fatalf("%v allocs per commit, ring and fenced sleep, want 0", n)
	}
}
