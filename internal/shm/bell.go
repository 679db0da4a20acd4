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

// Ring wakes the Bell's sleepers, if any: a load of sleepers when nobody
// sleeps; otherwise value++ and FutexWake(all). Call it after the Commit that
// the sleeper must see.
func (b Bell) Ring() {
	if b.sleepers.Load() != 0 {
		b.value.Add(1)
		FutexWake(b.value, math.MaxInt32)
	}
}

// Sleep announces a sleeper, then calls check, which reports whether there is
// work (for example that some inbound ring is not Empty); only if there is
// none does it wait on the futex, for at most timeout (<= 0: no limit). It may
// return early; callers loop. No wake-up is lost: a producer's Commit either
// precedes check (which then sees it) or follows the announcement (so its Ring
// sees sleepers != 0 and bumps value, which makes the wait return).
func (b Bell) Sleep(check func() bool, timeout time.Duration) {
	b.sleepers.Add(1)
	v := b.value.Load()
	if !check() {
		FutexWait(b.value, v, timeout)
	}
	b.sleepers.Add(^uint32(0))
}
