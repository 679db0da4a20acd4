package tcp

import (
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/conduit"
)

const (
	// rxBufSize is a connection's initial receive buffer: a batch of small
	// frames or a few Mediums per read(2). It grows (doubling) only to hold
	// a frame larger than itself, or while the deliverer runs a handler and
	// a blocked sender must keep reading.
	rxBufSize = 256 << 10
	// directMin: a Long payload of at least this many bytes whose
	// destination lies in this rank's segment is read from the socket
	// straight into the segment (no staging copy); a smaller one is copied
	// out of the receive buffer.
	directMin = 16 << 10
	// pollBudget is the most AMs one Poll delivers from one connection.
	pollBudget = 256
)

// rx is a connection's receive state, guarded by link.rmu. Bytes arrive in
// buf[w:]; buf[r:w] are bytes not yet delivered, starting at a frame
// boundary. While a handler runs on a frame of buf (delivering), buf[r:] is
// not moved in place: a reader that needs room allocates a new buffer, so
// the handler's payload stays valid.
type rx struct {
	buf        []byte
	r, w       int
	delivering bool
	long       longRead // a Long being read straight into the segment
	fh         frameHeader
	// afterLong: the last bytes read ended a Long read straight into the
	// segment, and nothing has been read since. The next frame of a put
	// or get stream is most likely another large Long, so the next read
	// takes only a frame header: its payload then goes straight into the
	// segment too instead of up to a buffer's worth of it being staged
	// and copied (startLong).
	afterLong bool
	// drained: the last read of fill found the socket empty (EAGAIN, or
	// fewer bytes than it had room for). serve then does not read again
	// for a frame it lacks in the same Poll: the next Poll will. A wait
	// polls an empty socket with one read(2), not two, and a Poll that
	// delivered a ping-pong's reply returns without a read that can only
	// find nothing (one system call less per round trip on the initiator).
	drained bool
	// rpfd and rts: awaitLong's ppoll(2) set (every socket) and timeout.
	rpfd []unix.PollFd
	rts  unix.Timespec
}

// longRead is a Long whose payload goes from the socket straight into this
// rank's segment: header h, destination dst, got bytes so far.
type longRead struct {
	active, ready bool
	h             conduit.Header
	dst           []byte
	got           int
}

// errLostMidFrame: the stream ended inside a frame.
var errLostMidFrame = errors.New("the connection ended inside a frame")

// fill reads what the kernel holds for l into its buffer (or into the
// segment for a direct Long) with non-blocking reads, until the socket is
// empty or the buffer full. grow lets the buffer grow when full (a blocked
// sender must keep reading whatever it costs). It reports whether bytes
// arrived. The caller holds l.rmu.
func (t *Transport) fill(l *link, grow bool) bool {
	got := false
	l.drained = false
	for l.fd >= 0 && !l.gone.Load() {
		lr := &l.long
		if lr.active && !lr.ready {
			n, err := readNB(l.fd, lr.dst[lr.got:])
			if !t.readResult(l, n, err, true) {
				l.drained = true
				return got
			}
			got = true
			lr.got += n
			if lr.got == len(lr.dst) {
				lr.ready = true
				l.afterLong = true
			}
			continue
		}
		if l.w == len(l.buf) {
			switch {
			case l.r > 0 && !l.delivering:
				l.w = copy(l.buf, l.buf[l.r:l.w])
				l.r = 0
			case grow || l.r == 0 && !l.deliverable(t.maxLong()):
				// A frame larger than the buffer, or a reader that must
				// not stop: a new buffer twice the size (the old one stays
				// valid for a handler running on it).
				nb := make([]byte, 2*len(l.buf))
				l.w = copy(nb, l.buf[l.r:l.w])
				l.r = 0
				l.buf = nb
			default:
				return got // deliver first
			}
		}
		room := l.buf[l.w:]
		headOnly := l.afterLong && l.r == l.w
		if headOnly {
			room = room[:min(len(room), frameMaxHead)]
		}
		n, err := readNB(l.fd, room)
		if !t.readResult(l, n, err, l.r < l.w || lr.active) {
			l.drained = true
			return got
		}
		got = true
		l.w += n
		l.afterLong = false
		if headOnly || n < len(room) {
			// A frame header to look at first, or the socket is empty.
			l.drained = n < len(room)
			return got
		}
	}
	return got
}

// readResult handles the outcome of a read on l: it reports whether n > 0
// bytes arrived. EAGAIN is no data; the end of the stream between frames
// (midFrame false) ends the link quietly (the peer exited; if it died the
// launcher ends the job); an end inside a frame or an error ends the job
// with a message naming the peer, so nobody waits forever.
func (t *Transport) readResult(l *link, n int, err error, midFrame bool) bool {
	switch {
	case err == nil && n > 0:
		t.w.noteRead(l)
		return true
	case err == unix.EAGAIN || err == unix.EINTR:
		return false
	case err == nil && !midFrame:
		t.lose(l, io.EOF)
	case err == nil:
		t.lose(l, errLostMidFrame)
	default:
		t.lose(l, err)
	}
	return false
}

// lose marks l gone; unless the transport is closing or the peer ended
// cleanly (io.EOF), the job ends.
func (t *Transport) lose(l *link, err error) {
	if l.gone.Swap(true) {
		return
	}
	t.w.forget(l)
	t.rs.forget(l)
	if t.closed.Load() || err == io.EOF {
		return
	}
	// The peer's process may have ended: give the launcher, which sees
	// that, LostGrace to end the job naming it (its words are better than
	// "connection reset"); then end it here.
	msg := fmt.Sprintf("lost the connection to rank %d: %v", l.rank, err)
	time.AfterFunc(LostGrace, func() {
		if !t.closed.Load() {
			t.b.Abort(msg)
		}
	})
}

// LostGrace is how long a rank whose connection to a peer broke waits
// before it ends the job itself (Abort naming the peer): the launcher, which
// sees a peer process end, usually ends the job first, naming the rank and
// how it ended (docs/core.md, "Ending a job").
var LostGrace = time.Second

// fillAll reads every connection no other goroutine is reading.
func (t *Transport) fillAll() {
	for _, l := range t.links {
		if l.rmu.TryLock() {
			t.fill(l, true)
			l.rmu.Unlock()
		}
	}
}

// deliverable reports whether a whole frame (or a direct Long) waits in l.
// The caller holds l.rmu.
func (l *link) deliverable(maxPayload int) bool {
	if l.long.ready {
		return true
	}
	if l.long.active {
		return false
	}
	_, _, err := parseFrame(l.buf[l.r:l.w], &l.fh, maxPayload)
	return err != io.ErrUnexpectedEOF
}

// serve reads l and delivers its frames through d (only replies if
// repliesOnly: it stops at the first request), at most pollBudget of them,
// each on the bytes where they lie. If wait (PollWait: a library wait that
// may sleep), it may sleep in awaitLong while a large Long arrives; else
// (Poll, a sender waiting for room) it never sleeps. The caller holds t.dmu.
func (t *Transport) serve(l *link, repliesOnly, wait bool, d conduit.Delivery) int {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	t.fill(l, false)
	in := &t.inc
	n := 0
	slept := !wait // one awaitLong per serve (the caller runs between Longs), none unless wait
	for n < pollBudget {
		lr := &l.long
		if lr.active {
			if !lr.ready && !l.drained {
				t.fill(l, false)
			}
			if !lr.ready && l.drained && !slept && len(lr.dst)-lr.got >= longSleepMin {
				slept = true
				t.awaitLong(l)
			}
			if !lr.ready {
				break
			}
			if repliesOnly && lr.h.IsReq || !t.classLock(lr.h.IsReq) {
				break
			}
			in.Src, in.Header, in.Payload, in.Placed = l.rank, lr.h, lr.dst, true
			isReq := lr.h.IsReq
			*lr = longRead{}
			t.run(l, in, d)
			t.classUnlock(isReq)
			n++
			continue
		}
		payload, size, err := parseFrame(l.buf[l.r:l.w], &l.fh, t.maxLong())
		if err == nil && l.fh.Cat != conduit.Long && l.fh.NBytes > t.cfg.MaxPayload {
			err = fmt.Errorf("%w: %v payload length %d exceeds the maximum %d", ErrFrame, l.fh.Cat, l.fh.NBytes, t.cfg.MaxPayload)
		}
		if err == io.ErrUnexpectedEOF {
			if t.startLong(l) || !l.drained && t.fill(l, false) {
				continue
			}
			break
		}
		if err != nil {
			t.lose(l, err)
			break
		}
		fh := &l.fh
		if fh.Control() {
			l.r += size // no control messages are needed yet; skipped
			continue
		}
		if repliesOnly && fh.IsReq || !t.classLock(fh.IsReq) {
			break
		}
		in.Src, in.Header, in.Payload, in.Placed = l.rank, fh.Header, payload, false
		if fh.Cat == conduit.Long && fh.EP == 0 && len(payload) > 0 && t.place != nil {
			// A Long whose bytes lie in this rank's segment is placed
			// there; one outside arrives unplaced for the receiver to
			// refuse.
			if dst := t.place(fh.Dest, len(payload)); dst != nil {
				copy(dst, payload)
				in.Payload, in.Placed = dst, true
			}
		}
		isReq := fh.IsReq
		t.run(l, in, d)
		t.classUnlock(isReq)
		l.r += size
		if l.r == l.w {
			l.r, l.w = 0, 0
		}
		n++
	}
	return n
}

// run delivers in with l.rmu released (the handler may send, and a blocked
// send reads l), marking l delivering so that its buffer is not moved under
// the handler's payload.
func (t *Transport) run(l *link, in *conduit.Incoming, d conduit.Delivery) {
	l.delivering = true
	l.rmu.Unlock()
	d(in)
	in.Payload = nil
	l.rmu.Lock()
	l.delivering = false
}

// startLong begins reading the Long at the head of l's buffer straight into
// the segment, if it is large, its header complete and its destination in
// this rank's segment. The caller holds l.rmu.
func (t *Transport) startLong(l *link) bool {
	s := l.buf[l.r:l.w]
	if len(s) < frameFixed || t.place == nil {
		return false
	}
	fh := &l.fh
	hl, err := decodeFixed(s, fh, t.maxLong())
	// Only the primordial endpoint's segment is placed here (Memory Kinds:
	// a Long for another endpoint arrives unplaced, for that endpoint to
	// check and place).
	if err != nil || fh.Cat != conduit.Long || fh.EP != 0 || fh.NBytes < directMin || len(s) < hl {
		return false
	}
	dst := t.place(fh.Dest, fh.NBytes)
	if dst == nil {
		return false
	}
	decodeArgs(s, fh)
	k := copy(dst, s[hl:])
	l.long = longRead{active: true, ready: k == len(dst), h: fh.Header, dst: dst, got: k}
	l.r += hl + k
	if l.r == l.w {
		l.r, l.w = 0, 0
	}
	return true
}

const (
	// longWait is the longest one sleep of awaitLong (ppoll(2)); longWaitMax
	// the most one awaitLong sleeps in all (a serve runs at most one).
	longWait    = 200_000   // ns
	longWaitMax = 2_000_000 // ns
	// longSleepMin: with fewer bytes of the Long left to come, the poll
	// busy-polls instead (they arrive within tens of microseconds, and a
	// sleeper's wake-up would delay the handler, often the acknowledgement
	// the peer waits on).
	longSleepMin = 128 << 10
)

// awaitLong (PollWait only) waits, in ppoll(2), for the rest of the Long that l is reading
// straight into the segment, and reads it as it comes, until the Long is
// complete or longWaitMax has passed. The peer is in the middle of writing
// it, so the bytes are on their way: sleeping until the kernel has them,
// as the raw stream's poll(2) reader does, makes each read take what
// arrived meanwhile instead of busy-polling an empty socket (reads, socket
// lock round trips with the sender's softirq, sched_yield) while they come.
// Any connection's input wakes it too. The caller holds l.rmu and t.dmu.
func (t *Transport) awaitLong(l *link) {
	lr := &l.long
	if t.unflushed.Load() {
		// Frames that handlers sent before this Long (a previous Long's
		// acknowledgement) go out before the sleep: the peer may be
		// waiting for them. l.rmu is let go meanwhile, since a write
		// that meets a full socket reads (waitWritable); nothing in l's
		// buffer is in use.
		l.rmu.Unlock()
		t.flushAll()
		l.rmu.Lock()
	}
	start := nanotime()
	for !lr.ready && l.drained && len(lr.dst)-lr.got >= longSleepMin && l.fd >= 0 && !l.gone.Load() && nanotime()-start < longWaitMax {
		for i, k := range t.links {
			l.rpfd[i] = unix.PollFd{Fd: int32(k.sock), Events: unix.POLLIN}
			if k.gone.Load() {
				l.rpfd[i].Fd = -1
			}
		}
		l.rts = unix.NsecToTimespec(longWait)
		if t.sleepHook != nil {
			t.sleepHook()
		}
		ppoll(l.rpfd, &l.rts)
		for i, k := range t.links {
			if k != l && l.rpfd[i].Revents != 0 {
				// Another peer's frames wait: back to Poll, which serves
				// every connection.
				return
			}
		}
		t.fill(l, false)
	}
}
