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
)

// The TCP path between nodes. Each connection has a reader goroutine (which
// runs the Handler under Net.rxMu for every frame) and a flusher goroutine
// (which writes what Send had to queue, blocking only itself).

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

// tcpReadBuf is the reader's buffer: frames that fit are handled in place;
// larger payloads are read straight into a buffer of their own.
const tcpReadBuf = 256 << 10

// reader reads frames and runs the Handler for each.
func (c *tcpConn) reader() {
	n := c.n
	defer n.wg.Done()
	defer func() {
		c.shut()
		n.dropConn(c.peer.ID, c, nil)
		n.mu.Lock()
		delete(n.tcps, c)
		n.mu.Unlock()
	}()
	buf := make([]byte, tcpReadBuf)
	var big []byte
	var hdr [MaxHeaderSize]byte
	r, w := 0, 0
	fill := func(need int) error { // ensure buf[r:w] holds need bytes
		if r+need > len(buf) {
			copy(buf, buf[r:w])
			w -= r
			r = 0
		}
		for w-r < need {
			k, err := c.c.Read(buf[w:])
			if k > 0 {
				w += k
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	deliver := func(h, p []byte) bool {
		n.rxMu.Lock()
		defer n.rxMu.Unlock()
		if n.stopped {
			return false
		}
		n.st.recv.Add(1)
		n.inHandler.Store(true)
		n.h(c.peer, h, p)
		n.inHandler.Store(false)
		return true
	}
	for {
		if err := fill(tcpFrameSize); err != nil {
			c.lost(err)
			return
		}
		hl, pl, err := decodeTCPHeader(buf[r : r+tcpFrameSize])
		if err != nil {
			n.st.malformed.Add(1)
			return
		}
		r += tcpFrameSize
		if hl+pl <= len(buf) {
			if err := fill(hl + pl); err != nil {
				c.lost(err)
				return
			}
			if !deliver(buf[r:r+hl:r+hl], buf[r+hl:r+hl+pl:r+hl+pl]) {
				return
			}
			r += hl + pl
			continue
		}
		if err := fill(hl); err != nil {
			c.lost(err)
			return
		}
		copy(hdr[:], buf[r:r+hl])
		r += hl
		if cap(big) < pl {
			big = make([]byte, pl)
		}
		p := big[:pl:pl]
		k := copy(p, buf[r:w])
		r += k
		if _, err := io.ReadFull(c.c, p[k:]); err != nil {
			c.lost(err)
			return
		}
		if !deliver(hdr[:hl:hl], p) {
			return
		}
		if cap(big) > 64<<20 {
			big = nil
		}
	}
}

// lost counts a connection that ended other than by our Close.
func (c *tcpConn) lost(err error) {
	if !c.n.closed.Load() {
		c.n.st.lost.Add(1)
	}
}
