package smp

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/shm"
)

// A rank that leaves the job early (its process ends without Close, Exit or
// Abort while other ranks are still in it) must never leave the others
// waiting in silence. Under gexrun the launcher sees the process end and
// tells every rank (boot.PeerWatch). Under a PMI process manager nobody of
// gexgo's does, so the ranks of a host watch each other's processes here
// (pidfd), and tell the normal end from an early one by a word each rank
// writes in its AM region header when it ends the normal way.

// offState is the state word of the AM region header: 0 while the rank is in
// the job, stateEnded once it called Close, stateEnding once it called Exit
// or Abort (the job is ending: ranks killed from now on did not leave).
const (
	offState    = 16
	stateEnded  = 1
	stateEnding = 2
	// offHolder holds the pid of the rank's PMI connection holder, or 0
	// (boot.HolderPID).
	offHolder = 20
)

// PeerLeftDelay is how long a rank that saw a peer leave (PMI) keeps
// running, its waits failing with an error naming the peer, before it ends
// with status 1 (boot's Leave: the process manager then ends the job).
var PeerLeftDelay = 500 * time.Millisecond

// liveness is the conduit's part of it. Its fields are guarded by mu.
type liveness struct {
	mu      sync.Mutex
	hooks   []func(rank int, msg string)
	pids    []int  // by rank: the process id of a same-host peer, or 0
	gone    []bool // by rank: its process ended
	left    []bool // by rank: it left the job early
	holders []int  // by rank: a pidfd of its PMI connection holder, or -1
	stop    chan struct{}
	once    sync.Once
	fired   atomic.Bool
}

// Bootstrap returns the bootstrap the conduit was built on (for the progress
// reports of package gex).
func (c *Conduit) Bootstrap() boot.Bootstrap { return c.b }

// OnPeerLeft registers fn to run when a rank leaves the job early: reported
// by the launcher (boot.PeerWatch) or, under PMI, seen by this conduit.
func (c *Conduit) OnPeerLeft(fn func(rank int, msg string)) {
	if w, ok := c.b.(boot.PeerWatch); ok {
		w.OnPeerLeft(fn)
	}
	c.live.mu.Lock()
	c.live.hooks = append(c.live.hooks, fn)
	c.live.mu.Unlock()
}

// state is rank p's state word.
func (c *Conduit) state(p int) *atomic.Uint32 {
	return shm.Uint32At(c.peers[p].region.Bytes(), offState)
}

// markEnded records in this rank's region that it ends the normal way:
// state is stateEnded (Close) or stateEnding (Exit, Abort).
func (c *Conduit) markEnded(state uint32) {
	if c.mine != nil {
		shm.Uint32At(c.mine.Bytes(), offState).CompareAndSwap(0, state)
	}
}

// watchPeers starts watching the processes of the same-host peers (pids by
// rank, 0 for others) when the job runs under PMI. It returns at once.
func (c *Conduit) watchPeers(pids []int) {
	if !boot.IsPMI(c.b) {
		return
	}
	boot.HoldFor(c.b, pids)
	l := &c.live
	l.pids, l.gone, l.left, l.stop = pids, make([]bool, c.size), make([]bool, c.size), make(chan struct{})
	l.holders = make([]int, c.size)
	for p := range l.holders {
		l.holders[p] = -1
		if hp := int(shm.Uint32At(c.peers[p].region.Bytes(), offHolder).Load()); p != c.rank && pids[p] > 0 && hp > 0 {
			if fd, err := unix.PidfdOpen(hp, 0); err == nil {
				l.holders[p] = fd
			}
		}
	}
	var fds []unix.PollFd
	var ranks []int
	for p, pid := range pids {
		if p == c.rank || pid <= 0 {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already, or no pidfd (Linux < 5.3): not watched
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		ranks = append(ranks, p)
	}
	if len(fds) == 0 {
		return
	}
	go func() {
		defer func() {
			for _, f := range fds {
				unix.Close(int(f.Fd))
			}
		}()
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			n, err := unix.Poll(fds, 200)
			if err != nil && err != unix.EINTR {
				return
			}
			if n <= 0 {
				continue
			}
			for i := range fds {
				if fds[i].Revents == 0 || fds[i].Fd < 0 {
					continue
				}
				p := ranks[i]
				unix.Close(int(fds[i].Fd))
				fds[i].Fd = -1 // poll ignores negative descriptors
				c.peerEnded(p)
			}
		}
	}()
}

// peerEnded handles the end of peer p's process: nothing if it ended the
// normal way; otherwise it left the job early.
func (c *Conduit) peerEnded(p int) {
	l := &c.live
	l.mu.Lock()
	l.gone[p] = true
	if c.state(p).Load() != 0 || c.state(c.rank).Load() != 0 {
		l.mu.Unlock()
		return // it ended the normal way, or this rank did
	}
	for q, pid := range l.pids {
		if pid > 0 && c.state(q).Load() == stateEnding {
			l.mu.Unlock()
			return // a rank ended the job (Exit, Abort): the rest are stopped
		}
	}
	l.left[p] = true
	var running []int
	for q, pid := range l.pids {
		if (pid > 0 || q == c.rank) && !l.gone[q] && c.state(q).Load() == 0 {
			running = append(running, q)
		}
	}
	hooks := append([]func(int, string){}, l.hooks...)
	l.mu.Unlock()
	msg := fmt.Sprintf("rank %d (pid %d) ended without calling Close; it left while %s still running; ending the job", p, l.pids[p], boot.RankList(running))
	if len(running) > 0 && running[0] == c.rank {
		// One line for the job: the lowest rank still running says it.
		fmt.Fprintf(os.Stderr, "gexgo: %s\n", msg)
	}
	for _, fn := range hooks {
		fn(p, msg)
	}
	if l.fired.CompareAndSwap(false, true) {
		time.AfterFunc(PeerLeftDelay, func() {
			c.markEnded(stateEnding)
			c.killHolders()
			if l, ok := c.b.(interface{ Leave(code int) }); ok {
				l.Leave(1)
			}
			c.b.Exit(1)
		})
	}
}

// killHolders kills the PMI connection holders of the ranks that left, so
// that the process manager sees them gone now.
func (c *Conduit) killHolders() {
	l := &c.live
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, fd := range l.holders {
		if fd >= 0 && l.left[p] {
			unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
	}
}

// stopWatch ends the watcher.
func (c *Conduit) stopWatch() {
	l := &c.live
	l.once.Do(func() {
		if l.stop != nil {
			close(l.stop)
		}
		l.mu.Lock()
		for p, fd := range l.holders {
			if fd >= 0 {
				unix.Close(fd)
				l.holders[p] = -1
			}
		}
		l.mu.Unlock()
	})
}
