package tcp

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/conduit"
)

// readySet lets a Poll with several connections ask the kernel which of
// them hold bytes, with one epoll_wait(2) that does not wait, instead of
// reading every socket. Reading them, a rank with k remote peers made k
// system calls per empty poll (0.5 us each on this project's VM), and a frame
// waited on average for half of them; through the set an empty poll costs
// 0.26-0.40 us whatever k (BenchmarkPollEmptyLinks: 0.30-0.40 against
// 3.9-4.4 us with 8 connections). The set exists only from readySetMin connections.
//
// The set is edge-triggered (EPOLLET): the kernel reports a socket once per
// arrival of bytes, and a wait that reports one costs less than under level
// triggering (which re-checks every reported socket at the next wait). Bytes
// the kernel has already reported are tracked here instead: want serves a
// connection whose last read did not find the socket empty (a poll may stop
// before reading everything: its budget, a class lock, a reply sender's
// stop at a request), whose buffer holds bytes not yet delivered, or which
// another goroutine is reading. Skipping a connection is what serving it
// would have done: a socket that becomes readable just after the wait is
// reported to the next poll, as it would have been read by the next poll
// had it arrived just after its read; a sleeper arms the waker's one-shot
// set first (waker.go), which fires at once for a socket that holds bytes.
//
// The wait, ev and hot are used under t.dmu (one deliverer at a time). mu
// orders forget and close; close does not wait for a poll (t.dmu may be
// held by a handler while the job ends): a wait that meets the closed set
// gets an error and serves every connection, which are closed too.
type readySet struct {
	epfd atomic.Int32      // -1: no set (fewer than readySetMin connections, or closed)
	ev   []unix.EpollEvent // the wait's events, one per connection
	hot  []bool            // by link index: the last wait reported it readable
	mu   sync.Mutex        // orders forget and close
}

// readySetMin is the number of connections from which a Poll asks the
// ready set (a variable for the benchmarks that compare both ways). A
// frame's arrival costs more through the set: the wait that reports it comes
// before the read, and the sender's kernel queues the event
// (BenchmarkShortRoundTripLinks: with one connection a round trip takes
// 0.6-1.3 us more through the set, by the medians of two runs). From four
// connections the round trip through the set measured as fast as or faster
// than reading every socket; with two or three, slower (docs/tcp.md, "Many
// connections").
var readySetMin = 4

// start creates the set of t's connections when there are at least
// readySetMin of them. Each event carries its connection's index in
// t.links.
func (s *readySet) start(t *Transport) error {
	s.epfd.Store(-1)
	if len(t.links) < readySetMin {
		return nil
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("tcp: epoll_create1: %w", err)
	}
	for i, l := range t.links {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(i)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, l.sock, &ev); err != nil {
			unix.Close(epfd)
			return fmt.Errorf("tcp: epoll_ctl: %w", err)
		}
	}
	s.ev = make([]unix.EpollEvent, len(t.links))
	s.hot = make([]bool, len(t.links))
	s.epfd.Store(int32(epfd))
	return nil
}

// on reports whether polls ask the set.
func (s *readySet) on() bool { return s.epfd.Load() >= 0 }

// wait records which connections the kernel holds bytes for. On an error
// (there should be none) every connection counts as readable. The caller
// holds t.dmu and has checked on.
func (s *readySet) wait() {
	n, err := epollWaitNB(int(s.epfd.Load()), s.ev)
	if err != nil {
		for i := range s.hot {
			s.hot[i] = true
		}
		return
	}
	clear(s.hot)
	for _, ev := range s.ev[:n] {
		if i := int(ev.Fd); i >= 0 && i < len(s.hot) {
			s.hot[i] = true
		}
	}
}

// want reports whether the poll serves l, the connection at index i: the
// set reported it; or its last read did not find the socket empty; or its
// buffer holds bytes not yet delivered; or it is in the middle of a Long
// read straight into the segment; or another goroutine is reading it (serve
// then waits for that reader and delivers what it read). The caller holds
// t.dmu and has called wait.
func (s *readySet) want(i int, l *link) bool {
	if s.hot[i] {
		return true
	}
	if !l.rmu.TryLock() {
		return true
	}
	has := !l.drained || l.r < l.w || l.long.active
	l.rmu.Unlock()
	return has
}

// forget takes a lost connection out of the set (its end of stream would
// be reported for ever).
func (s *readySet) forget(l *link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fd := int(s.epfd.Load()); fd >= 0 {
		unix.EpollCtl(fd, unix.EPOLL_CTL_DEL, l.sock, nil)
	}
}

// close closes the set.
func (s *readySet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fd := int(s.epfd.Swap(-1)); fd >= 0 {
		unix.Close(fd)
	}
}

// serveAll serves every connection, through the ready set when t has one,
// and returns the number of AMs delivered. The caller holds t.dmu.
func (t *Transport) serveAll(repliesOnly, wait bool, d conduit.Delivery) int {
	on := t.rs.on()
	if on {
		t.rs.wait()
	}
	n := 0
	for i, l := range t.links {
		if !on || t.rs.want(i, l) {
			n += t.serve(l, repliesOnly, wait, d)
		}
	}
	return n
}
