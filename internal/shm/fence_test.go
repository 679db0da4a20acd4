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
func lostWakeups(t *testing.T, iters int, release, heavy bool) (lost int) {
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
	for i := uint64(1); i <= uint64(iters) && lost < 3; i++ {
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
