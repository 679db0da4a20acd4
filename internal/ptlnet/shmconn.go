package ptlnet

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/shm"
)

// shmConn is a same-node connection: a unix socket (kept open only to learn
// that the peer is gone) and two transmit regions, ours and the peer's.
//
// Locks: txMu guards the transmit side (our ring as producer, our pool's
// allocations, the pending queue, dead). The receive side (the peer's ring as
// consumer, the assembly state) is used only under Net.rxMu. Lock order:
// Net.rxMu, then txMu.
type shmConn struct {
	peer Peer
	sock *net.UnixConn
	n    *Net

	txMem, rxMem, peerBellMem []byte
	tx, rx                    *shm.MsgRing
	txPool, rxPool            *shm.Pool
	peerBell                  shm.Bell
	txBlocked, rxBlocked      *atomic.Uint32 // the blocked word of our region, of the peer's

	txMu     sync.Mutex
	dead     bool // under txMu: the regions are unmapped, Send fails
	pend     []pendItem
	pendH    int
	arena    []byte // bytes of queued small messages (pendItem.off)
	hasPend  atomic.Bool
	partial  bool   // under txMu: a waiting Send has sent part of its message
	sentN    uint64 // under txMu: messages sent or queued (Stats.Sent; a counter of the Net's would be a locked instruction per Send)
	kickDue  bool   // under txMu: frames committed since the last kick
	lastMail bool   // under txMu: the last frame went to the ring's mailbox (mailInOrder)
	mailSkip int    // under txMu: frames left that skip mailInOrder's look at the ring

	gone   atomic.Bool // the socket ended: drain, then reap
	reaped bool        // under Net.mu... set once by reap or Close

	// assembly of a multi-chunk bulk message (under Net.rxMu)
	asm      []byte
	asmHdr   [MaxHeaderSize]byte
	asmHL    int
	asmTotal int
	asmOff   int
	asmOn    bool
}

// pendItem is a queued message: its bytes (in big, or at arena[off:off+n])
// are the hdr (hl bytes) then the payload bytes not yet sent; pos is how
// many of them have gone out; total is the whole payload's length.
type pendItem struct {
	big     []byte
	off, n  int
	hl, pos int
	total   int
	started bool
}

// pendBig is the size from which a queued message gets a buffer of its own.
const pendBig = 64 << 10

var errNoSuchName = errors.New("ptlnet: no process holds that name")

func (c *shmConn) peerOf() Peer { return c.peer }

// ---------------------------------------------------------------------------
// Connection set-up.

// peerCred returns the kernel credentials of a unix socket's peer.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, serr
}

const setupTimeout = 10 * time.Second

// sendHello writes a hello with fds attached.
func sendHello(c *net.UnixConn, h hello, fds ...int) error {
	var b [helloSize]byte
	h.encode(&b)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.SetWriteDeadline(time.Now().Add(setupTimeout))
	_, _, err := c.WriteMsgUnix(b[:], oob, nil)
	c.SetWriteDeadline(time.Time{})
	return err
}

// readHello reads a hello and, unless want < 0, exactly want fds (on error
// every received fd is closed).
func readHello(c *net.UnixConn, want int) (hello, []int, error) {
	var b [helloSize + 1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	c.SetReadDeadline(time.Now().Add(setupTimeout))
	nb, noob, _, _, err := c.ReadMsgUnix(b[:], oob)
	c.SetReadDeadline(time.Time{})
	var fds []int
	if noob > 0 {
		if msgs, e := unix.ParseSocketControlMessage(oob[:noob]); e == nil {
			for _, m := range msgs {
				if f, e := unix.ParseUnixRights(&m); e == nil {
					fds = append(fds, f...)
				}
			}
		}
	}
	closeAll := func() {
		for _, f := range fds {
			unix.Close(f)
		}
	}
	if err != nil {
		closeAll()
		return hello{}, nil, err
	}
	h, err := decodeHello(b[:nb])
	if err != nil {
		closeAll()
		return hello{}, nil, err
	}
	if want >= 0 && len(fds) != want {
		closeAll()
		return hello{}, nil, badFrame(fmt.Sprintf("hello with %d descriptors, want %d", len(fds), want))
	}
	return h, fds, nil
}

// uidOK reports whether a same-node peer of uid may talk to us.
func (n *Net) uidOK(uid uint32) bool { return uid == n.uid || n.anyUID }

// newShmConn maps the peer's doorbell page and transmit region (closing their
// fds) and creates ours; it returns the conn and our region's fd to pass.
func (n *Net) newShmConn(sock *net.UnixConn, peer Peer) (*shmConn, int, error) {
	fd, mem, err := createSealed("gexgo-ptl-tx", txRegionSize)
	if err != nil {
		return nil, -1, err
	}
	c := &shmConn{peer: peer, sock: sock, n: n, txMem: mem}
	if c.tx, err = shm.InitMsgRing(mem[txOffRing:txPoolOff], txSlots); err == nil {
		c.txPool, err = shm.InitPool(mem[txPoolOff:], txBufs, txBufSize)
	}
	if err != nil {
		unmapClose(fd, mem)
		return nil, -1, err
	}
	c.txBlocked = shm.Uint32At(mem, txOffBlocked)
	putRegionHeader(mem, txMagic)
	return c, fd, nil
}

// attachPeer maps the peer's doorbell page and transmit region; fds are closed.
func (c *shmConn) attachPeer(bellFD, txFD int) error {
	bm, err := mapSealed(bellFD, bellRegionSize)
	if err != nil {
		unix.Close(txFD)
		return err
	}
	c.peerBellMem = bm
	if err := checkRegionHeader(bm, bellMagic); err != nil {
		return err
	}
	c.peerBell = shm.BellAt(bm, bellOff)
	// Commit with a release store only where both sides use the asymmetric
	// fence (shm.MsgRing.SetReleaseCommit; the argument is at shm.Bell.Sleep):
	// this process registered (n.fenced) and the peer's Bell.Sleep issues it.
	// Set before the view is shared: the connection is not registered yet.
	if c.n.fenced && shm.Uint32At(bm, bellOffFenced).Load() == bellFencedYes {
		c.tx.SetReleaseCommit()
	}
	rm, err := mapSealed(txFD, txRegionSize)
	if err != nil {
		return err
	}
	c.rxMem = rm
	if err := checkRegionHeader(rm, txMagic); err != nil {
		return err
	}
	if c.rx, err = shm.AttachMsgRing(rm[txOffRing:txPoolOff]); err != nil {
		return err
	}
	if c.rxPool, err = shm.AttachPool(rm[txPoolOff:]); err != nil {
		return err
	}
	c.rxBlocked = shm.Uint32At(rm, txOffBlocked)
	return nil
}

// release unmaps everything of c (its goroutine is gone, nobody uses it).
func (c *shmConn) release() {
	c.txMu.Lock()
	c.dead = true
	c.dropPending()
	for _, m := range [][]byte{c.txMem, c.rxMem, c.peerBellMem} {
		unmapClose(-1, m)
	}
	c.txMem, c.rxMem, c.peerBellMem = nil, nil, nil
	c.txMu.Unlock()
}

// dialUnix connects to dst's abstract socket. errNoSuchName: nobody holds it.
func (n *Net) dialUnix(dst PhysID) (conn, error) {
	sock, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: unixName(dst), Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, errNoSuchName
		}
		return nil, fmt.Errorf("%w: %v: %v", ErrUnreachable, dst, err)
	}
	fail := func(e error) (conn, error) {
		sock.Close()
		return nil, fmt.Errorf("%w: %v: %v", ErrUnreachable, dst, e)
	}
	cred, err := peerCred(sock)
	if err != nil {
		return fail(err)
	}
	if !n.uidOK(cred.Uid) {
		return fail(fmt.Errorf("peer runs as uid %d, this process as %d (set %s=1 to allow)", cred.Uid, n.uid, EnvAnyUID))
	}
	c, fd, err := n.newShmConn(sock, Peer{ID: dst, UID: cred.Uid})
	if err != nil {
		return fail(err)
	}
	err = sendHello(sock, hello{kind: helloConnect, id: n.id, uid: n.uid}, n.bellFD, fd)
	unix.Close(fd)
	if err != nil {
		c.release()
		return fail(err)
	}
	h, fds, err := readHello(sock, 2)
	if err == nil && (h.kind != helloConnect || h.id != dst) {
		err = fmt.Errorf("peer answered as %v, want %v", h.id, dst)
		for _, f := range fds {
			unix.Close(f)
		}
	} else if err == nil {
		err = c.attachPeer(fds[0], fds[1])
	}
	if err != nil {
		c.release()
		return fail(err)
	}
	if route := n.startShm(c); route != nil {
		return route, nil
	}
	return nil, ErrClosed
}

// startShm registers c, starts its watcher and returns the path to c's peer.
// It returns nil (and releases c) if the Net is closing.
func (n *Net) startShm(c *shmConn) conn {
	route := n.addConn(c.peer.ID, c, c, nil, 1)
	if route == nil {
		c.sock.Close()
		c.release()
		return nil
	}
	n.st.shmConns.Add(1)
	go c.watch()
	// The progress goroutine may be asleep after checking the rings it knew:
	// the peer may commit into this one at once.
	n.bell.Ring()
	return route
}

// acceptLoop accepts connections until the listener closes, serving each in
// a goroutine of its own (the unix and the TCP listener).
func acceptLoop[C any](n *Net, accept func() (C, error), serve func(C)) {
	defer n.wg.Done()
	for {
		c, err := accept()
		if err != nil {
			if n.closed.Load() {
				return
			}
			time.Sleep(time.Millisecond) // e.g. out of descriptors: try again
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			serve(c)
		}()
	}
}

// serveUnix runs the acceptor's side of the set-up for one connection: the
// peer's credentials, its hello, a check that the pid it claims is really
// held by the same process (a probe of that pid's name), then our regions.
func (n *Net) serveUnix(sock *net.UnixConn) {
	refuse := func(fds []int) {
		for _, f := range fds {
			unix.Close(f)
		}
		n.st.refused.Add(1)
		sock.Close()
	}
	cred, err := peerCred(sock)
	if err != nil || !n.uidOK(cred.Uid) {
		refuse(nil)
		return
	}
	h, fds, err := readHello(sock, -1)
	if err != nil {
		refuse(nil)
		return
	}
	if h.kind == helloProbe {
		if len(fds) != 0 {
			refuse(fds)
			return
		}
		sendHello(sock, hello{kind: helloProbe, id: n.id, uid: n.uid})
		sock.Close()
		return
	}
	if len(fds) != 2 || !n.holds(h.id, cred.Pid) {
		refuse(fds)
		return
	}
	c, fd, err := n.newShmConn(sock, Peer{ID: h.id, UID: cred.Uid})
	if err != nil {
		refuse(fds)
		return
	}
	if err := c.attachPeer(fds[0], fds[1]); err != nil {
		unix.Close(fd)
		c.release()
		refuse(nil)
		return
	}
	err = sendHello(sock, hello{kind: helloConnect, id: n.id, uid: n.uid}, n.bellFD, fd)
	unix.Close(fd)
	if err != nil {
		c.release()
		sock.Close()
		return
	}
	n.startShm(c)
}

// holds reports whether the OS process ospid holds the name of id: a probe
// connection to that name must find the same process at the other end.
func (n *Net) holds(id PhysID, ospid int32) bool {
	if id.PID == PIDAny {
		return false
	}
	sock, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: unixName(id), Net: "unix"})
	if err != nil {
		return false
	}
	defer sock.Close()
	cred, err := peerCred(sock)
	if err != nil || cred.Pid != ospid {
		return false
	}
	if sendHello(sock, hello{kind: helloProbe, id: n.id, uid: n.uid}) != nil {
		return false
	}
	h, fds, err := readHello(sock, 0)
	return err == nil && len(fds) == 0 && h.kind == helloProbe && h.id == id
}

// watch waits for the socket to end (the peer closed or died); bytes on it
// after the set-up are a protocol violation and end it too.
func (c *shmConn) watch() {
	defer c.n.wg.Done()
	var b [1]byte
	_, err := c.sock.Read(b[:])
	if err == nil {
		c.n.st.malformed.Add(1)
	}
	c.gone.Store(true)
	c.n.anyGone.Store(true)
	c.n.bell.Ring()
}
