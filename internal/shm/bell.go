package shm

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

// Bell layout: byte offsets from the Bell's start, which must be 4-byte
// aligned. Give a Bell its own 64-byte line in the owner's region: producers
// read sleepers on every Ring.
const (
	bellOffValue    = 0 // uint32 futex word: bumped by ringers when sleepers != 0
	bellOffSleepers = 4 // uint32: number of sleepers announced by the owner
	BellSize        = 8
)

// Bell is a futex doorbell in shared memory: a rank sleeps on its one Bell for
// all its inbound rings, and producers ring the destination's Bell after
// committing. It is a view: copy it freely.
type Bell struct {
	value    *atomic.Uint32
	sleepers *atomic.Uint32
	heavy    bool // Sleep issues membarrier after announcing (WithHeavyFence)
	// standing is set while one fenced announcement is left in sleepers by
	// a Sleep that timed out with nothing to do (WithHeavyFence views only;
	// shared by the owner's copies). See Sleep.
	standing *atomic.Bool
}

// BellAt returns the Bell at b[off:off+BellSize]. It panics if that is out of
// range or not 4-byte aligned (off is a layout constant of the caller). A
// zero-filled Bell is ready for use.
func BellAt(b []byte, off int) Bell {
	if off < 0 || off > len(b)-BellSize {
		panic("shm: BellAt: offset " + strconv.Itoa(off) + " outside a " + strconv.Itoa(len(b)) + "-byte slice")
	}
	return Bell{value: Uint32At(b, off+bellOffValue), sleepers: Uint32At(b, off+bellOffSleepers)}
}

// WithHeavyFence returns the owner's view of b whose Sleep issues
// membarrier(2) MEMBARRIER_CMD_GLOBAL_EXPEDITED between announcing the
// sleeper and calling check, so that producers may commit with a release
// store only (MsgRing.SetReleaseCommit). Only after EnableHeavyFence
// reported true; it panics otherwise.
func (b Bell) WithHeavyFence() Bell {
	if !EnableHeavyFence() {
		panic("shm: Bell.WithHeavyFence without a registered membarrier")
	}
	b.heavy = true
	b.standing = new(atomic.Bool)
	return b
}

// Withdraw takes back the announcement a timed-out Sleep left standing, if
// any. The owner calls it when it finds work (a Poll that delivered
// messages), so that producers stop ringing a rank that is awake. A load
// only, when nothing stands.
func (b Bell) Withdraw() {
	if b.standing != nil && b.standing.Load() && b.standing.CompareAndSwap(true, false) {
		b.sleepers.Add(^uint32(0))
	}
}

// Ring wakes the Bell's sleepers, if any: a load of sleepers when nobody
// sleeps; otherwise value++ and FutexWake(all). Call it after the Commit that
// the sleeper must see.
func (b Bell) Ring() {
	if b.sleepers.Load() != 0 {
		bellWake(b.value)
	}
}

// bellWake is Ring's path with sleepers, out of line so that Ring inlines
// into every sender (a load and a branch).
//
//go:noinline
func bellWake(value *atomic.Uint32) {
	value.Add(1)
	FutexWake(value, math.MaxInt32)
}

// testSkipHeavyFence removes the membarrier from Sleep (tests only: it shows
// that the lost wake-up the fence prevents does happen without it).
var testSkipHeavyFence bool

// Sleep announces a sleeper, then calls check, which reports whether there is
// work (for example that some inbound ring is not Empty); only if there is
// none does it wait on the futex, for at most timeout (<= 0: no limit). It may
// return early; callers loop. It reports whether it waited and the wait
// ended because the timeout expired.
//
// No wake-up is lost. The producer's side is "store the work, then load
// sleepers" (Commit, then Ring); the sleeper's is "store sleepers, then load
// the work" (the announcement, then check). That is Dekker's pattern: it
// needs both sides' store-load order, or both loads may read the old values
// (on x86 a load may pass an earlier store still in the store buffer), the
// producer skipping the wake and the sleeper missing the work.
//
//   - The sleeper's announcement is a locked read-modify-write, a full
//     barrier on its side.
//   - A producer that commits with a sequentially consistent store (the
//     default MsgRing.Commit) has the barrier on its side too: either its
//     commit precedes check (which then sees it) or the announcement
//     precedes its load of sleepers (so it bumps value, and the futex wait
//     returns at once or is woken).
//   - A producer that commits with a release store (a plain store on x86:
//     the fast path) has no barrier between its commit and its load of
//     sleepers. A Bell made by WithHeavyFence supplies it from the sleeper's
//     side, as liburcu and Folly's asymmetricHeavyBarrier do: after the
//     announcement it calls membarrier(2) MEMBARRIER_CMD_GLOBAL_EXPEDITED,
//     which returns only after every running thread of every registered
//     process has executed a full memory barrier (and threads not running
//     have gone through the scheduler, also a full barrier; membarrier(2),
//     "MEMBARRIER_CMD_GLOBAL_EXPEDITED"). The producer's thread thus passed
//     a full barrier at some point P during the call. If P precedes the
//     producer's commit store, the announcement (made before the call) is
//     visible to the producer's later load of sleepers, which bumps value
//     and wakes. If P follows the commit store, the commit is visible when
//     membarrier returns, and check, which runs after, sees it. Either way
//     the message is not missed. The producer's process must have
//     registered (EnableHeavyFence), or the call does not reach its threads:
//     that is why a producer commits with a release store only when both it
//     and the consumer registered.
//
// The membarrier costs the sleeper an inter-processor interrupt to the CPUs
// running registered threads (microseconds), paid only on the way to a
// futex wait; the producer's fast path has no locked instruction at all.
func (b Bell) Sleep(check func() bool, timeout time.Duration) (timedOut bool) {
	b.sleepers.Add(1)
	// One fence per idle period, not per sleep: an idle rank re-sleeps every
	// few hundred microseconds, and each membarrier interrupts every CPU
	// running the job's busy ranks. A Sleep that times out with nothing to do
	// leaves its fenced announcement standing (sleepers stays >= 1) until the
	// owner finds work (Withdraw). A later Sleep that, after its own
	// announcement, still sees one standing needs no fence: sleepers has been
	// >= 1 without a gap since that announcement's fence (the standing one is
	// withdrawn only after standing is cleared, which this load would have
	// seen), so every commit after that fence's barrier point is followed by a
	// producer's load that sees a sleeper and rings, and every commit before
	// it is visible to check.
	if b.heavy && !testSkipHeavyFence && !b.standing.Load() {
		heavyFence()
	}
	v := b.value.Load()
	if !check() {
		timedOut = futexWaitTimedOut(b.value, v, timeout)
	}
	if timedOut && b.heavy && b.standing.CompareAndSwap(false, true) {
		return timedOut // this announcement stands, fenced, until Withdraw
	}
	b.sleepers.Add(^uint32(0))
	if !timedOut {
		b.Withdraw() // woken, or work found: the owner is awake
	}
	return timedOut
}
