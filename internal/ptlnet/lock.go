package ptlnet

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/internal/shm"
)

// spinLock is a mutex for the transport's short critical sections (a ring's
// consumer or producer side: Net.rxMu, shmConn.txMu) whose Unlock is a
// release store instead of sync.Mutex's locked add: on a ping-pong every
// message takes both locks once, and every idle Poll takes rxMu. A Lock that
// finds it held spins, yields to other goroutines, and after a while sleeps
// briefly (no holder blocks while holding it: Handlers never wait, and a
// Send releases txMu before it waits for room).
type spinLock struct {
	w atomic.Uintptr // 1 while held
}

// TryLock takes the lock if it is free (a load first: a poller finding it
// held writes nothing).
func (l *spinLock) TryLock() bool {
	return l.w.Load() == 0 && l.w.CompareAndSwap(0, 1)
}

// Lock takes the lock, waiting as long as it is held.
func (l *spinLock) Lock() {
	for i := 0; !l.TryLock(); i++ {
		switch {
		case i < 64:
		case i < 1024:
			runtime.Gosched()
		default:
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// Unlock releases the lock: the holder's writes are ordered before the next
// holder's CAS (shm.StoreReleaseUintptr).
func (l *spinLock) Unlock() { shm.StoreReleaseUintptr(&l.w, 0) }
