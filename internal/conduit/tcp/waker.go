package tcp

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// waker wakes a rank sleeping in the block wait mode when one of its sockets
// becomes readable. The rank sleeps on its shared-memory doorbell (ranks of
// its own host ring it too); before sleeping it arms the waker, whose
// goroutine then waits in epoll_wait(2) on every socket and, when traffic
// arrives, marks the transport kready (which Pending reports, so a ring that
// comes before the sleeper is announced is not lost) and rings the doorbell.
// In the spin wait mode nobody arms it: the polling goroutine finds the
// bytes itself, with no goroutine between the kernel and the handler.
type waker struct {
	epfd, evfd int
	armc       chan struct{}
	quit, done chan struct{}
	mu         sync.Mutex // guards the epoll set against close
	stopped    bool
}

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
	fds := []int{evfd}
	for _, l := range t.links {
		fds = append(fds, l.fd)
	}
	for _, fd := range fds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			w.stop()
			return fmt.Errorf("tcp: epoll_ctl: %w", err)
		}
	}
	w.armc = make(chan struct{}, 1)
	w.quit, w.done = make(chan struct{}), make(chan struct{})
	go w.loop(t)
	return nil
}

func (w *waker) loop(t *Transport) {
	defer close(w.done)
	var evs [8]unix.EpollEvent
	for {
		select {
		case <-w.armc:
		case <-w.quit:
			return
		}
		for {
			_, err := unix.EpollWait(w.epfd, evs[:], -1)
			if err != unix.EINTR {
				break
			}
		}
		if t.closed.Load() {
			return
		}
		t.kready.Store(true)
		t.wake()
	}
}

// arm asks the waker to watch the sockets (Sleep, before it sleeps).
func (w *waker) arm() {
	if w.armc == nil {
		return
	}
	select {
	case w.armc <- struct{}{}:
	default: // already armed
	}
}

// forget takes a lost connection out of the epoll set (it would be readable
// for ever).
func (w *waker) forget(l *link) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.epfd >= 0 && !w.stopped && l.fd >= 0 {
		unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, l.fd, nil)
	}
}

// stop ends the waker's goroutine and closes its descriptors.
func (w *waker) stop() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.mu.Unlock()
	if w.armc != nil {
		var one = [8]byte{1}
		unix.Write(w.evfd, one[:]) // ends an epoll_wait in progress
		close(w.quit)
		<-w.done
	}
	if w.epfd >= 0 {
		unix.Close(w.epfd)
	}
	if w.evfd >= 0 {
		unix.Close(w.evfd)
	}
}
