package tcp

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// waker wakes a rank sleeping in the block wait mode when one of its sockets
// becomes readable. The rank sleeps on its shared-memory doorbell (ranks of
// its own host ring it too). The waker's goroutine waits in epoll_wait(2) on
// an epoll set; before sleeping, the rank arms its sockets in it, one-shot
// (epoll_ctl, from its own goroutine: no goroutine is woken to arm). When
// traffic arrives on an armed socket the waker marks the transport kready
// (which Pending reports, so a ring that comes before the sleeper is
// announced is not lost) and rings the doorbell; the kernel has disarmed
// the socket, and it stays disarmed until the next sleep. In the spin wait
// mode nothing is armed: the polling goroutine finds the bytes itself, and
// no goroutine runs between the kernel and the handler.
//
// A socket enters the set at its first arming, and leaves it again once
// dropAfter reads have found bytes on it since it was last armed. An entry
// in the set, armed or not, is a sleeper on the socket's wait queue, and
// every segment that reaches the socket walks that queue (sock_def_readable
// -> ep_poll_callback, with interrupts off) in the sender's system call; a
// raw socket pays none of it. But taking a socket out and adding it back
// costs more than re-arming it in place (1.7 against 0.4 us here:
// BenchmarkEpollAddRemove, BenchmarkEpollRearm), so a rank
// that sleeps between every few messages (the block mode) keeps its
// sockets in the set, and a busy one (traffic between sleeps) takes them
// out (docs/tcp.md, "Ninth campaign").
type waker struct {
	epfd, evfd int
	done       chan struct{}
	mu         sync.Mutex // guards the set against stop
	stopped    bool
}

// armed is the event mask of an armed socket.
const armed = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT

// start creates the epoll set of t's sockets and the waker's goroutine.
func (w *waker) start(t *Transport) error {
	w.epfd, w.evfd = -1, -1
	if len(t.links) == 0 {
		return nil
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("tcp: epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return fmt.Errorf("tcp: eventfd: %w", err)
	}
	w.epfd, w.evfd = epfd, evfd
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)} // stop's wake-up, always armed
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		w.stop()
		return fmt.Errorf("tcp: epoll_ctl: %w", err)
	}
	w.done = make(chan struct{})
	go w.loop(t)
	return nil
}

func (w *waker) loop(t *Transport) {
	defer close(w.done)
	var evs [8]unix.EpollEvent
	for {
		n, err := unix.EpollWait(w.epfd, evs[:], -1)
		if t.closed.Load() {
			return
		}
		if err == nil && n > 0 {
			for _, ev := range evs[:n] {
				// The kernel disarmed the socket as it reported it:
				// the next arm must re-arm it. (Before the ring: a
				// sleeper that skips it as still armed is woken by
				// this very event.)
				if l := t.linkBySock(int(ev.Fd)); l != nil {
					l.armed.Store(false)
				}
			}
			t.kready.Store(true)
			t.wake()
		}
	}
}

// arm arms every socket (Sleep, before it sleeps): the waker rings once one
// has input, at once if one has already. A socket still armed from an
// earlier sleep (none of its input reported since) is left as it is: an
// idle rank that wakes every sleepCap to re-check its condition makes no
// system call here. A socket out of the set is added to it.
func (w *waker) arm(t *Transport) {
	if w.done == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	for _, l := range t.links {
		if l.gone.Load() || l.armed.Load() {
			continue
		}
		l.armed.Store(true) // before: an event after the epoll_ctl must leave it false
		l.sinceArm.Store(0)
		ev := unix.EpollEvent{Events: armed, Fd: int32(l.sock)}
		if l.inSet.Load() {
			unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, l.sock, &ev)
		} else if unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, l.sock, &ev) == nil {
			l.inSet.Store(true)
		}
	}
}

// dropAfter is how many reads that find bytes on a socket since it was last
// armed take it out of the waker's set (see waker): from about this many
// segments between sleeps, their wait-queue walks cost more than adding the
// socket back at the next sleep.
const dropAfter = 16

// noteRead counts a read that found bytes on l (the caller holds l.rmu).
// Only a socket in the waker's set counts: one load otherwise.
func (w *waker) noteRead(l *link) {
	if l.inSet.Load() {
		w.countRead(l)
	}
}

// countRead is noteRead's count: the dropAfter'th read since l was armed
// takes l out of the set, unless l is armed (a sleep that ended for another
// reason, or an event the waker has not yet handled): then the count starts
// again.
func (w *waker) countRead(l *link) {
	if n := l.sinceArm.Load() + 1; n < dropAfter {
		l.sinceArm.Store(n)
		return
	}
	l.sinceArm.Store(0)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped && l.inSet.Load() && !l.armed.Load() {
		unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, l.sock, nil)
		l.inSet.Store(false)
	}
}

// forget takes a lost connection out of the epoll set (it would be readable
// for ever).
func (w *waker) forget(l *link) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.epfd >= 0 && !w.stopped && l.inSet.Load() {
		unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, l.sock, nil)
		l.inSet.Store(false)
	}
}

// stop ends the waker's goroutine and closes its descriptors. The caller
// has set t.closed.
func (w *waker) stop() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.mu.Unlock()
	if w.done != nil {
		var one = [8]byte{1}
		unix.Write(w.evfd, one[:]) // ends the epoll_wait
		<-w.done
	}
	if w.epfd >= 0 {
		unix.Close(w.epfd)
	}
	if w.evfd >= 0 {
		unix.Close(w.evfd)
	}
}

// linkBySock returns the link of socket fd, or nil.
func (t *Transport) linkBySock(fd int) *link {
	for _, l := range t.links {
		if l.sock == fd {
			return l
		}
	}
	return nil
}
