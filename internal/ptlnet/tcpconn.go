package ptlnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/auth"
	"github.com/gexgo/gexgo/internal/shm"
)

// The TCP path between nodes. The goroutine that polls (Poll, the progress
// goroutine) reads each connection itself with non-blocking read(2) and runs
// the Handler on every whole frame where it lies (pump); each connection's
// reader goroutine does the same when the netpoller finds the socket readable
// and no poller is at it, and tears the connection down when its stream ends.
// A flusher goroutine writes what Send had to queue, blocking only itself.

// authJobID is bound into the handshake's proofs: a gex tcp conduit and a
// ptlnet listener never accept each other's connections.
const authJobID = "gexgo-ptlnet"

type tcpConn struct {
	n    *Net
	peer Peer
	c    *net.TCPConn
	raw  syscall.RawConn

	txMu       sync.Mutex
	out        []byte // frames queued behind a full socket (under txMu)
	spare      []byte
	flushing   bool       // the flusher owns the socket's write side (under txMu)
	appWriting bool       // a Send writes a large rest itself (under txMu)
	cond       *sync.Cond // on txMu: flushing or appWriting ended, or dead
	dead       bool       // under txMu
	wake       chan struct{}

	// direct-write state, under txMu
	hb   [tcpFrameSize]byte
	iov  [3][]byte
	nw   int
	werr error
	wfn  func(fd uintptr) bool

	// receive side: rx under rmu (a try-lock: one goroutine pumps c at a time)
	rmu    sync.Mutex
	rx     tcpRx
	pres   int // poll's pump outcome (under rmu)
	pollFn func(fd uintptr)
	readFn func(fd uintptr) bool
}

func (c *tcpConn) peerOf() Peer { return c.peer }

func isAddrInUse(err error) bool { return errors.Is(err, syscall.EADDRINUSE) }

// tcpAddr is the TCP address of a physical ID.
func (n *Net) tcpAddr(id PhysID) string {
	return net.JoinHostPort(NIDAddr(id.NID).String(), strconv.Itoa(n.portBase+int(id.PID)))
}

func (n *Net) authParams() *auth.Params {
	return &auth.Params{Secret: n.secret, JobID: authJobID, Rank: int(n.id.PID), Size: 1 << 32, Timeout: setupTimeout}
}

// tcpHello exchanges hellos on c (the dialer writes first).
func (n *Net) tcpHello(c *net.TCPConn, dialer bool) (hello, error) {
	var mine [helloSize]byte
	hello{kind: helloConnect, id: n.id, uid: n.uid}.encode(&mine)
	var theirs [helloSize]byte
	c.SetDeadline(time.Now().Add(setupTimeout))
	defer c.SetDeadline(time.Time{})
	if dialer {
		if _, err := c.Write(mine[:]); err != nil {
			return hello{}, err
		}
	}
	if _, err := io.ReadFull(c, theirs[:]); err != nil {
		return hello{}, err
	}
	h, err := decodeHello(theirs[:])
	if err != nil {
		return hello{}, err
	}
	if h.kind != helloConnect {
		return hello{}, badFrame("tcp hello kind")
	}
	if !dialer {
		if _, err := c.Write(mine[:]); err != nil {
			return hello{}, err
		}
	}
	return h, nil
}

// dialTCP connects to dst across nodes.
func (n *Net) dialTCP(dst PhysID) (conn, error) {
	if n.secret == nil && !n.insecure {
		return nil, fmt.Errorf("%w: %v is on another node: TCP needs a job secret (%s) or %s=1", ErrUnreachable, dst, auth.EnvSecret, EnvTCPInsecure)
	}
	if int64(dst.PID) > n.maxPID() {
		return nil, fmt.Errorf("%w: %v: pid above %d has no TCP port", ErrUnreachable, dst, n.maxPID())
	}
	nc, err := net.DialTimeout("tcp4", n.tcpAddr(dst), setupTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %v: %v", ErrUnreachable, dst, err)
	}
	c := nc.(*net.TCPConn)
	if n.secret != nil {
		if _, err := auth.Handshake(c, n.authParams(), true, int(dst.PID)); err != nil {
			return nil, fmt.Errorf("%w: %v: %v", ErrUnreachable, dst, err)
		}
	}
	h, err := n.tcpHello(c, true)
	if err == nil && h.id != dst {
		err = fmt.Errorf("peer answered as %v", h.id)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %v: %v", ErrUnreachable, dst, err)
	}
	return n.startTCP(c, Peer{ID: h.id, UID: h.uid})
}

// serveTCP runs the acceptor's side of a TCP connection: the handshake (when
// there is a secret), then the hellos; the pid the peer proved must be the
// one it states.
func (n *Net) serveTCP(c *net.TCPConn) {
	r := -1
	if n.secret != nil {
		var err error
		if r, err = auth.Handshake(c, n.authParams(), false, -1); err != nil {
			n.st.refused.Add(1) // Handshake closed c
			return
		}
	}
	h, err := n.tcpHello(c, false)
	if err != nil || (r >= 0 && h.id.PID != uint32(r)) {
		n.st.refused.Add(1)
		c.Close()
		return
	}
	n.startTCP(c, Peer{ID: h.id, UID: h.uid})
}

// startTCP registers an authenticated connection and starts its goroutines.
func (n *Net) startTCP(c *net.TCPConn, peer Peer) (conn, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %v: %v", ErrUnreachable, peer.ID, err)
	}
	c.SetNoDelay(true)
	tc := &tcpConn{n: n, peer: peer, c: c, raw: raw, wake: make(chan struct{}, 1)}
	tc.wfn = tc.writeNow
	tc.pollFn = tc.pollFD
	tc.readFn = tc.readFD
	tc.rx.buf = make([]byte, tcpReadBuf)
	tc.cond = sync.NewCond(&tc.txMu)
	route := n.addConn(peer.ID, tc, nil, tc, 2)
	if route == nil {
		c.Close()
		return nil, ErrClosed
	}
	n.st.tcpConns.Add(1)
	go tc.reader()
	go tc.flusher()
	return route, nil
}

// writeNow is one non-blocking writev of c.iov (RawConn.Write callback).
func (c *tcpConn) writeNow(fd uintptr) bool {
	c.nw, c.werr = writev(int(fd), &c.iov)
	return true
}

// Application (non-Handler) Sends wait for a busy socket instead of copying
// a payload of tcpNoCopy bytes or more, or queueing behind tcpMaxQueue bytes.
const (
	tcpNoCopy   = 64 << 10
	tcpMaxQueue = 4 << 20
)

// send is Send over TCP: writev straight from the caller's buffers when the
// socket is idle. What the socket does not take at once is, in a Handler (or
// for a small rest), copied to the queue the flusher writes; otherwise the
// caller writes it itself, blocking with txMu released so that Handlers queue
// behind it and never wait.
func (c *tcpConn) send(hdr, payload []byte, noWait bool) error {
	n := c.n
	c.txMu.Lock()
	for (c.flushing || c.appWriting) && !c.dead && !noWait && !n.inHandler.Load() &&
		(len(payload) >= tcpNoCopy || len(c.out) >= tcpMaxQueue) {
		c.cond.Wait()
	}
	if c.dead {
		c.txMu.Unlock()
		return fmt.Errorf("%w: %v: connection lost", ErrUnreachable, c.peer.ID)
	}
	putTCPHeader(c.hb[:], len(hdr), uint64(len(payload)))
	if c.flushing || c.appWriting {
		c.out = append(append(append(c.out, c.hb[:]...), hdr...), payload...)
		n.st.queued.Add(1)
		c.txMu.Unlock()
		return nil
	}
	c.iov = [3][]byte{c.hb[:], hdr, payload}
	total := tcpFrameSize + len(hdr) + len(payload)
	c.nw, c.werr = 0, nil
	if err := c.raw.Write(c.wfn); err != nil {
		c.werr = err
	}
	w := max(c.nw, 0)
	if c.werr != nil && c.werr != unix.EAGAIN {
		c.dead = true
		c.cond.Broadcast()
		c.txMu.Unlock()
		c.c.Close()
		return fmt.Errorf("%w: %v: %v", ErrUnreachable, c.peer.ID, c.werr)
	}
	if w == total {
		c.iov = [3][]byte{}
		c.txMu.Unlock()
		return nil
	}
	// The frame header's unwritten part must not stay in c.hb: the next Send
	// rewrites c.hb while this one may still be writing its rest.
	hb := c.hb
	c.iov[0] = hb[:]
	var rest net.Buffers
	for _, b := range c.iov {
		if w >= len(b) {
			w -= len(b)
			continue
		}
		rest = append(rest, b[w:])
		w = 0
	}
	c.iov = [3][]byte{}
	n.st.queued.Add(1)
	if noWait || n.inHandler.Load() || total-c.nw < tcpNoCopy {
		for _, b := range rest {
			c.out = append(c.out, b...)
		}
		c.flushing = true
		c.wakeFlusher()
		c.txMu.Unlock()
		return nil
	}
	c.appWriting = true
	c.txMu.Unlock()
	_, err := rest.WriteTo(c.c)
	c.txMu.Lock()
	c.appWriting = false
	if err != nil {
		c.dead = true
		c.cond.Broadcast()
		c.txMu.Unlock()
		c.c.Close()
		return fmt.Errorf("%w: %v: %v", ErrUnreachable, c.peer.ID, err)
	}
	if len(c.out) > 0 {
		c.flushing = true
		c.wakeFlusher()
	} else {
		c.cond.Broadcast()
	}
	c.txMu.Unlock()
	return nil
}

func (c *tcpConn) wakeFlusher() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// flusher writes queued frames, blocking only itself.
func (c *tcpConn) flusher() {
	defer c.n.wg.Done()
	for {
		select {
		case <-c.wake:
		case <-c.n.done:
			return
		}
		for {
			c.txMu.Lock()
			if c.appWriting {
				c.txMu.Unlock() // it wakes us when done
				break
			}
			if len(c.out) == 0 || c.dead {
				c.flushing = false
				c.cond.Broadcast()
				c.txMu.Unlock()
				break
			}
			b := c.out
			c.out, c.spare = c.spare[:0], nil
			c.txMu.Unlock()
			_, err := c.c.Write(b)
			c.txMu.Lock()
			if cap(b) <= 4<<20 {
				c.spare = b[:0]
			}
			if err != nil {
				c.dead = true
				c.flushing = false
				c.cond.Broadcast()
				c.txMu.Unlock()
				c.c.Close()
				break
			}
			c.txMu.Unlock()
		}
	}
}

// idle reports whether nothing is queued.
func (c *tcpConn) idle() bool {
	c.txMu.Lock()
	defer c.txMu.Unlock()
	return !(c.flushing || c.appWriting) || c.dead
}

func (n *Net) tcpIdle() bool {
	n.mu.Lock()
	var l []*tcpConn
	for c := range n.tcps {
		l = append(l, c)
	}
	n.mu.Unlock()
	for _, c := range l {
		if !c.idle() {
			return false
		}
	}
	return true
}

// shut closes the socket (the reader and flusher end).
func (c *tcpConn) shut() {
	c.txMu.Lock()
	c.dead = true
	c.cond.Broadcast()
	c.txMu.Unlock()
	c.c.Close()
}

// tcpReadBuf is a connection's receive buffer: frames that fit are handled in
// place; larger payloads are read straight into a buffer of their own.
const tcpReadBuf = 256 << 10

// tcpRx is a connection's receive state, guarded by tcpConn.rmu: whichever
// goroutine holds rmu (a Poll, the progress goroutine, or the reader) reads
// the socket with non-blocking read(2) and delivers every whole frame where it
// lies. buf[r:w] are bytes not yet delivered, starting at a frame boundary.
type tcpRx struct {
	buf  []byte
	r, w int
	// A payload too large for buf is read into big: bigOn while it is,
	// big[:bigGot] read so far, hdr[:hl] its frame's hdr.
	big    []byte
	bigOn  bool
	bigGot int
	hl     int
	hdr    [MaxHeaderSize]byte
	ended  bool // the stream ended (lost, malformed or stopped): nobody reads it again
	// polled counts pumps by pollers; the reader parks off the netpoller
	// while they keep coming (reader).
	polled, seen uint64
	stops        uint32
	// the reader's last pump: its outcome, and whether it should park
	res  int
	park bool
}

// pump outcomes
const (
	rxAgain = iota // the socket is empty (EAGAIN)
	rxEnd          // the stream ended: the caller tears the connection down
)

// pump reads fd until the kernel has nothing more (EAGAIN, or a read shorter
// than its room) and delivers
// every whole frame; rxLocked says the caller holds n.rxMu (a Poll),
// otherwise each delivery takes it. The caller holds c.rmu. A malformed
// frame is counted, a lost stream (end, reset) too, unless the Net closes.
func (c *tcpConn) pump(fd int, rxLocked bool) int {
	n := c.n
	x := &c.rx
	if x.ended {
		return rxEnd
	}
	drained := false
	for {
		// Deliver what is whole.
		for !x.bigOn {
			if x.w-x.r < tcpFrameSize {
				break
			}
			hl, pl, err := decodeTCPHeader(x.buf[x.r : x.r+tcpFrameSize])
			if err != nil {
				n.st.malformed.Add(1)
				x.ended = true
				return rxEnd
			}
			if tcpFrameSize+hl+pl > len(x.buf) {
				if x.w-x.r < tcpFrameSize+hl {
					break
				}
				b := x.r + tcpFrameSize
				x.hl = copy(x.hdr[:], x.buf[b:b+hl])
				if cap(x.big) < pl {
					x.big = make([]byte, pl)
				}
				x.big = x.big[:pl]
				x.bigGot = copy(x.big, x.buf[b+hl:x.w])
				x.r = b + hl + x.bigGot
				x.bigOn = true
				break
			}
			end := x.r + tcpFrameSize + hl + pl
			if end > x.w {
				break
			}
			b := x.r + tcpFrameSize
			if !c.deliver(x.buf[b:b+hl:b+hl], x.buf[b+hl:end:end], rxLocked) {
				x.ended = true
				return rxEnd
			}
			x.r = end
		}
		if x.r == x.w {
			x.r, x.w = 0, 0
		}
		if x.bigOn && x.bigGot == len(x.big) {
			x.bigOn = false
			ok := c.deliver(x.hdr[:x.hl:x.hl], x.big[:len(x.big):len(x.big)], rxLocked)
			if cap(x.big) > 64<<20 {
				x.big = nil
			}
			if !ok {
				x.ended = true
				return rxEnd
			}
			continue
		}
		// Read more.
		var room []byte
		if x.bigOn {
			room = x.big[x.bigGot:]
		} else {
			if x.r > 0 && x.w == len(x.buf) || x.r > len(x.buf)/2 {
				x.w = copy(x.buf, x.buf[x.r:x.w])
				x.r = 0
			}
			room = x.buf[x.w:]
		}
		if len(room) == 0 {
			return rxAgain // cannot happen: a frame that fits buf is whole when buf is full
		}
		if drained {
			return rxAgain
		}
		k, err := readNB(fd, room)
		switch {
		case k > 0:
			if x.bigOn {
				x.bigGot += k
			} else {
				x.w += k
			}
			// Fewer bytes than room: the kernel had no more (a later
			// arrival is a new edge for the netpoller, so the reader is
			// not stranded). Deliver them and return without the read
			// that could only find EAGAIN: one system call less per
			// message received (as gex's tcp conduit, fill's drained).
			drained = k < len(room)
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return rxAgain
		default: // the end of the stream (k == 0), or an error
			x.ended = true
			if err == nil {
				err = io.EOF
			}
			c.lost(err)
			return rxEnd
		}
	}
}

// deliver runs the Handler on one frame.
func (c *tcpConn) deliver(h, p []byte, rxLocked bool) bool {
	n := c.n
	if !rxLocked {
		n.rxMu.Lock()
		defer n.rxMu.Unlock()
	}
	if n.stopped {
		return false
	}
	n.st.recv.Add(1)
	n.inHandler.Store(true)
	n.h(c.peer, h, p)
	n.inHandler.Store(false)
	return true
}

// poll reads and delivers what has arrived on c unless another goroutine is
// at it (a Poll, with n.rxMu held). It returns how many frames it delivered.
func (c *tcpConn) poll() int {
	if !c.rmu.TryLock() {
		return 0
	}
	before := c.n.st.recv.Load()
	c.rx.polled++
	c.pres = rxAgain
	if c.raw.Control(c.pollFn) != nil {
		c.pres = rxAgain // closed: the reader tears down
	}
	res := c.pres
	c.rmu.Unlock()
	if res == rxEnd {
		c.shut() // the reader sees the socket closed and tears down
	}
	return int(c.n.st.recv.Load() - before)
}

// pollFD is poll's RawConn.Control callback.
func (c *tcpConn) pollFD(fd uintptr) { c.pres = c.pump(int(fd), true) }

// pollTCP polls every TCP connection; n.rxMu held.
func (n *Net) pollTCP() int {
	k := 0
	for _, c := range *n.tcpList.Load() {
		k += c.poll()
	}
	return k
}

// readFD is the reader's RawConn.Read callback: it pumps c when no poller
// does, and reports false (park in the netpoller until the socket is
// readable) while there is nothing to read. When pollers keep pumping c, it
// reports true with rx.park set: the reader then waits off the netpoller (a
// poller's PollStop or parkFor ends it), so that arrivals do not wake it.
func (c *tcpConn) readFD(fd uintptr) bool {
	n := c.n
	st := n.stops.Load() // before polled: see progressLoop
	if !c.rmu.TryLock() {
		return false // a poller reads to EAGAIN: a later arrival wakes us
	}
	x := &c.rx
	x.res = c.pump(int(fd), false)
	d := x.polled - x.seen
	x.seen = x.polled
	x.park = x.res == rxAgain && d >= parkMin && st == x.stops
	x.stops = st
	c.rmu.Unlock()
	return x.res == rxEnd || x.park
}

// reader waits for the socket to be readable and pumps it (readFD) while no
// poller does; it tears the connection down when its stream ends.
func (c *tcpConn) reader() {
	n := c.n
	defer n.wg.Done()
	defer func() {
		c.shut()
		n.dropConn(c.peer.ID, c, nil)
		n.dropTCP(c)
	}()
	for {
		err := c.raw.Read(c.readFn)
		c.rmu.Lock()
		ended, park := c.rx.ended, c.rx.park
		c.rx.ended = c.rx.ended || err != nil
		c.rmu.Unlock()
		if err != nil {
			if !ended {
				c.lost(err)
			}
			return
		}
		if ended {
			return
		}
		if park {
			n.readersParked.Add(1)
			if !n.closed.Load() {
				shm.FutexWait(&n.stops, c.rx.stops, parkFor)
			}
			n.readersParked.Add(-1)
		}
	}
}

// dropTCP forgets c (Close's list, the pollers' list).
func (n *Net) dropTCP(c *tcpConn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.tcps, c)
	var l []*tcpConn
	for _, x := range *n.tcpList.Load() {
		if x != c {
			l = append(l, x)
		}
	}
	n.tcpList.Store(&l)
}

// lost counts a connection that ended other than by our Close.
func (c *tcpConn) lost(err error) {
	if !c.n.closed.Load() {
		c.n.st.lost.Add(1)
	}
}
