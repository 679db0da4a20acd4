// Package ptlnet is the transport under the Portals 4.3 engine (package portals): it owns a
// process's physical identity (Portals 4.3 §3.9 "Process Identification": nid, pid) and moves
// opaque (hdr, payload) messages between authenticated processes, reliably, exactly once and in
// order per (source, destination) pair, with a progress goroutine of its own so that delivery
// needs no call from the application (Portals 4.3 §1.6 "application bypass").
//
// # Physical IDs and how they are found (no launcher needed)
//
//   - nid: the host's primary IPv4 address as a big-endian uint32 (the first IPv4 address of the
//     first interface, in index order, that is up and not loopback; 127.0.0.1 when there is
//     none). PTL_NID overrides it (a dotted IPv4 address or a decimal uint32).
//   - pid: Config.PID, or PIDAny for the first free pid at or above a start derived from the OS
//     process id. A pid is held by binding the abstract unix socket "@gexgo-ptl-<nid hex>-<pid>"
//     (abstract names live per network namespace, i.e. per node, and vanish with the process);
//     a bind that fails because a live process holds the name is ErrPIDInUse.
//   - Same node: a sender connects to that abstract socket, found from (nid, pid) alone.
//   - Across nodes: TCP to <nid as IPv4>:<PTL_PORT_BASE + pid> (default base 20000, so pids
//     are below PIDMax() = 65536-base, the PTL_PID_MAX; others are ErrBadPID). The listener binds the nid's address only (PTL_LISTEN_ADDR overrides it;
//     "0.0.0.0" listens on every interface), and only when connections can be authenticated:
//     a job secret is present (Config.Secret or GEX_SECRET, hex, as gexrun passes it) or
//     PTL_TCP_INSECURE=1 allows unauthenticated connections.
//
// # Transports
//
// Same node: shared memory. The connection's unix socket authenticates the peer by its kernel
// credentials (SO_PEERCRED: its uid is Peer.UID; other uids are refused unless PTL_SHM_ANY_UID=1)
// and carries, by SCM_RIGHTS, two sealed memfds per side: the side's doorbell page and its
// transmit region (an internal/shm ring of 256-byte slots and an internal/shm pool of 256 KiB
// buffers). Small messages are copied into one ring slot (eager); larger ones go through pool
// buffers referenced from ring slots (bulk; the receiver's Handler reads a one-buffer payload
// where it lies, and a longer one is assembled). Receivers that find nothing sleep on a futex
// doorbell that senders ring. When the ring or the pool is full, an application's Send waits
// for the receiver's progress goroutine (never for its application), while a Send from a
// Handler queues a copy and returns, so Handlers that send to each other never deadlock.
//
// Across nodes: TCP, after the mutual HMAC handshake of internal/auth; frames are a 16-byte
// length-checked header, the hdr and the payload, written with writev straight from the
// caller's buffers while the socket takes them and queued (batched) behind them otherwise.
//
// docs/ptlnet.md has the wire layouts, the security model and measured figures.
package ptlnet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/auth"
	"github.com/gexgo/gexgo/internal/shm"
)

// PhysID is a Portals physical process identifier (Portals 4.3 §3.9: nid, pid).
type PhysID struct{ NID, PID uint32 }

// String formats the ID as "nid:pid" with the nid as an IPv4 address.
func (p PhysID) String() string {
	return NIDAddr(p.NID).String() + ":" + strconv.FormatUint(uint64(p.PID), 10)
}

// PIDAny is PTL_PID_ANY (Portals 4.3 §3.6.2): let the transport choose a free pid.
const PIDAny = ^uint32(0)

// Peer is the authenticated sender of a message, as the transport established it (never taken
// from the message bytes): the sender's PhysID and its uid (the "protected header" of §2.5/§3.8).
type Peer struct {
	ID  PhysID
	UID uint32
}

// Config selects how the physical NI is opened. The zero value (with PID set) works for
// processes of one node and, given GEX_SECRET or PTL_TCP_INSECURE, across nodes.
type Config struct {
	PID uint32 // requested pid, or PIDAny

	// NID overrides the nid (and PTL_NID) when non-zero.
	NID uint32
	// Secret overrides GEX_SECRET as the job secret TCP connections prove (>= 16 bytes).
	Secret []byte
	// NoTCP: do not listen on TCP (same-node peers only).
	NoTCP bool
	// ForceTCP: reach every other process over TCP, even on this node (tests and
	// benchmarks of the TCP path; needs a secret or PTL_TCP_INSECURE).
	ForceTCP bool
	// Batch, when set, brackets each run of messages that the progress goroutine or a Poll
	// takes from shared memory (and from oneself): Batch.Begin before the first message,
	// Batch.Handle instead of the Handler for each, Batch.End after the last, all in one
	// goroutine (Begin and End may bracket no message at all). TCP messages still go to the Handler one
	// at a time. The engine takes its NI lock once per run rather than once per message.
	Batch *Batch
}

// Batch is Config.Batch: Handle is a Handler (the same rules) called between Begin and End,
// except that its own Sends must be SendNoWait (a run is not marked as a Handler, so a
// plain Send from it could wait for room).
type Batch struct {
	Begin, End func()
	Handle     Handler
}

var (
	// ErrPIDInUse: the requested pid is held by another live process on this node (PTL_PID_IN_USE).
	ErrPIDInUse = errors.New("ptlnet: pid in use")
	// ErrUnreachable: a destination cannot be reached (no such process, connection refused,
	// refused authentication, timed out, or the peer died).
	ErrUnreachable = errors.New("ptlnet: destination unreachable")
	// ErrClosed: the Net has been closed.
	ErrClosed = errors.New("ptlnet: closed")
	// ErrBadPID: a requested pid not below PIDMax() (PTL_PID_MAX; the engine's PTL_ARG_INVALID).
	ErrBadPID = errors.New("ptlnet: pid out of range")
	// ErrTooLarge: hdr longer than MaxHeader or payload longer than MaxPayload.
	ErrTooLarge = errors.New("ptlnet: message too large")
)

// Handler is called for every message that arrives, with hdr and payload valid only during the
// call. Calls are serialized (never two at once for one Net). The handler may call Send (for
// acks, replies) and must not block waiting for remote progress. hdr is a private copy; payload
// may lie in memory the (authenticated) sender can still write, so read it once.
type Handler func(src Peer, hdr, payload []byte)

// Stats are a Net's counters.
type Stats struct {
	Sent, Received uint64 // messages
	Queued         uint64 // Sends that found the path full and were queued
	Malformed      uint64 // frames dropped as malformed
	Refused        uint64 // incoming connections refused (stranger, wrong uid, failed authentication)
	PeersLost      uint64 // connections that ended with the peer gone
	DroppedSends   uint64 // queued messages dropped because their peer went away
	ShmConns       uint64 // shared-memory connections made (dialed or accepted)
	TCPConns       uint64 // TCP connections made (dialed or accepted)
}

// conn is one established path to a peer.
type conn interface {
	send(hdr, payload []byte, noWait bool) error
	peerOf() Peer
}

// Net is one process's physical network interface: it owns the process's PhysID.
type Net struct {
	id       PhysID
	uid      uint32
	h        Handler
	hb       Handler // for shared-memory and self messages: h, or Batch.Handle
	batch    *Batch
	secret   []byte
	insecure bool
	anyUID   bool
	portBase int
	forceTCP bool

	ulis *net.UnixListener
	tlis *net.TCPListener

	bellFD  int    // memfd of the doorbell page (passed to every new peer)
	bellMem []byte // its mapping
	bell    shm.Bell
	fenced  bool // this process uses the asymmetric fence (makeBell)

	mu      sync.Mutex // guards routes (writes), rxConns (writes), tcps, dialMu use
	routes  atomic.Pointer[map[PhysID]conn]
	rxConns atomic.Pointer[[]*shmConn]
	tcps    map[*tcpConn]struct{}
	tcpList atomic.Pointer[[]*tcpConn] // tcps, for the pollers (written under mu)
	dialMu  sync.Mutex                 // one dial at a time
	pending atomic.Int32
	// bellUsers counts application goroutines touching the doorbell page
	// (self sends, Sends waiting for room): Close unmaps it only at zero.
	bellUsers atomic.Int32
	anyGone   atomic.Bool // some shmConn's peer is gone: reap
	// polls counts Polls (an application waiting inline); while it moves the
	// progress goroutine leaves the rings to the poller (progressLoop).
	_     [64]byte
	polls atomic.Uint64
	_     [56]byte
	// stops counts PollStop calls (and Close): the futex word the progress
	// goroutine parks on while an application goroutine polls inline; parked
	// says that it does (PollStop then wakes it). Written rarely.
	stops  atomic.Uint32
	parked atomic.Bool
	// readersParked counts TCP readers parked on stops (tcpConn.reader).
	readersParked atomic.Int32
	_             [52]byte

	// rxMu serializes Handler calls (progress goroutine, Poll, TCP readers).
	rxMu    sync.Mutex
	stopped bool // under rxMu: no more Handler calls
	// inHandler is set while a Handler may be running: a Send then queues
	// rather than waits (it may be the Handler's own).
	inHandler atomic.Bool
	hdrBuf    [MaxHeaderSize]byte // under rxMu: private copy of a shared-memory hdr

	self selfQueue

	closed atomic.Bool
	done   chan struct{}
	wg     sync.WaitGroup

	st struct {
		// sent is written by sending goroutines, recv by the receiving one:
		// each on a cache line of its own.
		_    [64]byte
		sent atomic.Uint64
		_    [56]byte
		recv atomic.Uint64
		_    [56]byte

		queued, malformed, refused, lost, dropped, shmConns, tcpConns atomic.Uint64
	}

	// lastRoute is one entry of routes (the route added last), or nil: written under mu
	// with routes, so it never disagrees with it; send tries it before the map (a
	// conversation with one peer then makes no map lookup per message).
	lastRoute atomic.Pointer[routeEntry]
}

// Open opens the physical NI: the transport half of PtlNIInit (Portals 4.3 §3.6.2), whose
// "PTL_PID_IN_USE Indicates that pid is currently in use" is ErrPIDInUse here: a pid held by a
// live process of this node. A pid must be below PIDMax() (PTL_PID_MAX), else ErrBadPID.
func Open(cfg Config, h Handler) (*Net, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: Open: nil handler", errBadConfig)
	}
	if cfg.Batch != nil && (cfg.Batch.Begin == nil || cfg.Batch.End == nil || cfg.Batch.Handle == nil) {
		return nil, fmt.Errorf("%w: Open: Batch needs Begin, End and Handle", errBadConfig)
	}
	n := &Net{h: h, hb: h, batch: cfg.Batch, uid: uint32(os.Getuid()), bellFD: -1, done: make(chan struct{}), tcps: map[*tcpConn]struct{}{}}
	if cfg.Batch != nil {
		n.hb = cfg.Batch.Handle
	}
	n.routes.Store(&map[PhysID]conn{})
	n.rxConns.Store(&[]*shmConn{})
	n.tcpList.Store(&[]*tcpConn{})
	n.anyUID = envFlag(EnvAnyUID)
	n.forceTCP = cfg.ForceTCP
	n.insecure = envFlag(EnvTCPInsecure)
	var err error
	if n.portBase, err = portBase(); err != nil {
		return nil, err
	}
	switch {
	case cfg.NID != 0:
		n.id.NID = cfg.NID
	case os.Getenv(EnvNID) != "":
		v, err := parseNID(os.Getenv(EnvNID))
		if err != nil {
			return nil, err
		}
		n.id.NID = v
	default:
		n.id.NID = NIDOf(primaryIPv4())
	}
	switch {
	case cfg.Secret != nil:
		if len(cfg.Secret) < 16 {
			return nil, fmt.Errorf("%w: Config.Secret of %d bytes, want >= 16", errBadConfig, len(cfg.Secret))
		}
		n.secret = append([]byte(nil), cfg.Secret...)
	case os.Getenv(auth.EnvSecret) != "":
		s, err := auth.SecretFromEnv()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errBadConfig, err)
		}
		n.secret = s
	}
	useTCP := !cfg.NoTCP && (n.secret != nil || n.insecure)
	if cfg.PID != PIDAny && int64(cfg.PID) > n.maxPID() {
		return nil, fmt.Errorf("%w: pid %d, want < %d (65536 - %s %d)", ErrBadPID, cfg.PID, n.maxPID()+1, EnvPortBase, n.portBase)
	}
	if err := n.bindPID(cfg.PID, useTCP); err != nil {
		return nil, err
	}
	if err := n.makeBell(); err != nil {
		n.ulis.Close()
		if n.tlis != nil {
			n.tlis.Close()
		}
		return nil, err
	}
	n.wg.Add(1)
	go acceptLoop(n, n.ulis.AcceptUnix, n.serveUnix)
	if n.tlis != nil {
		n.wg.Add(1)
		go acceptLoop(n, n.tlis.AcceptTCP, n.serveTCP)
	}
	n.wg.Add(1)
	go n.progressLoop()
	return n, nil
}

// portBase reads PTL_PORT_BASE.
func portBase() (int, error) {
	s := os.Getenv(EnvPortBase)
	if s == "" {
		return DefaultPortBase, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > 65535 {
		return 0, fmt.Errorf("%w: %s=%q: want a port in [1, 65535]", errBadConfig, EnvPortBase, s)
	}
	return v, nil
}

// PIDMax is PTL_PID_MAX (Portals 4.3 §3.6.2: a pid "must either be non-negative and less
// than the value PTL_PID_MAX or be PTL_PID_ANY"): 65536 - PTL_PORT_BASE, so that every
// pid has a TCP port (45536 by default).
func PIDMax() uint32 {
	b, err := portBase()
	if err != nil {
		b = DefaultPortBase
	}
	return uint32(65536 - b)
}

// maxPID is the largest pid whose TCP port fits.
func (n *Net) maxPID() int64 { return int64(65535 - n.portBase) }

// bindPID holds the pid: the abstract unix name, and the TCP port when useTCP.
func (n *Net) bindPID(want uint32, useTCP bool) error {
	try := func(pid uint32) error {
		id := PhysID{NID: n.id.NID, PID: pid}
		ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: unixName(id), Net: "unix"})
		if err != nil {
			if isAddrInUse(err) {
				return fmt.Errorf("%w: pid %d on this node (%v)", ErrPIDInUse, pid, err)
			}
			return fmt.Errorf("ptlnet: Open: %w", err)
		}
		ul.SetUnlinkOnClose(false)
		if useTCP {
			host := NIDAddr(n.id.NID).String()
			if a := os.Getenv(EnvListen); a != "" {
				host = a
			}
			tl, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.ParseIP(host), Port: n.portBase + int(pid)})
			if err != nil {
				ul.Close()
				if isAddrInUse(err) {
					return fmt.Errorf("%w: pid %d: TCP port %d (%v)", ErrPIDInUse, pid, n.portBase+int(pid), err)
				}
				return fmt.Errorf("ptlnet: Open: TCP listener on %s (set %s or %s): %w", host, EnvNID, EnvListen, err)
			}
			n.tlis = tl
		}
		n.ulis = ul
		n.id.PID = pid
		return nil
	}
	if want != PIDAny {
		return try(want)
	}
	max := n.maxPID()
	start := int64(1024 + os.Getpid()%4096)
	if start > max {
		start = 0
	}
	for i := int64(0); i <= max; i++ {
		pid := uint32((start + i) % (max + 1))
		err := try(pid)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrPIDInUse) {
			return err
		}
	}
	return fmt.Errorf("%w: no free pid in [0, %d]", ErrPIDInUse, max)
}

// makeBell creates the doorbell page every peer maps.
func (n *Net) makeBell() error {
	fd, mem, err := createSealed("gexgo-ptl-bell", bellRegionSize)
	if err != nil {
		return err
	}
	n.bellFD, n.bellMem = fd, mem
	n.bell = shm.BellAt(mem, bellOff)
	// The asymmetric fence (shm.EnableHeavyFence): our Bell.Sleep issues the
	// membarrier, so peers that registered too may commit to us with a
	// release store; we say so in the page before any peer maps it.
	if n.fenced = shm.EnableHeavyFence(); n.fenced {
		shm.Uint32At(mem, bellOffFenced).Store(bellFencedYes)
		n.bell = n.bell.WithHeavyFence()
	}
	putRegionHeader(mem, bellMagic)
	return nil
}

// ID returns the physical ID (the transport half of PtlGetPhysId, Portals 4.3 §3.9.3).
func (n *Net) ID() PhysID { return n.id }

// UID returns the process's user id (the transport half of PtlGetUid, Portals 4.3 §3.8.1).
func (n *Net) UID() uint32 { return n.uid }

// MaxHeader is the largest hdr Send accepts (at least 128 bytes).
func (n *Net) MaxHeader() int { return MaxHeaderSize }

// Stats returns the Net's counters (the transport's share of PtlNIStatus, Portals 4.3 §3.6.4).
func (n *Net) Stats() Stats {
	sent := n.st.sent.Load()
	n.mu.Lock()
	for _, c := range *n.rxConns.Load() {
		c.txMu.Lock()
		sent += c.sentN
		c.txMu.Unlock()
	}
	n.mu.Unlock()
	return Stats{
		Sent: sent, Received: n.st.recv.Load(), Queued: n.st.queued.Load(),
		Malformed: n.st.malformed.Load(), Refused: n.st.refused.Load(),
		PeersLost: n.st.lost.Load(), DroppedSends: n.st.dropped.Load(),
		ShmConns: n.st.shmConns.Load(), TCPConns: n.st.tcpConns.Load(),
	}
}

// Send delivers one message (the transport under PtlPut, PtlGet, PtlAtomic and their replies
// and acknowledgments, Portals 4.3 §3.15) to dst: reliable, exactly once, in order per
// (source, destination) pair. hdr and payload have been copied or written out when it returns.
// When the path is full it waits for the destination's progress goroutine (never for the
// destination's application) — unless a Handler of this Net may be running (it may be the
// caller), in which case it queues a copy and returns, so it never deadlocks when called from
// the Handler. The first Send to a destination connects (blocking for the handshake). Messages
// to oneself go through the same Handler. Errors: ErrTooLarge, ErrClosed, ErrUnreachable.
func (n *Net) Send(dst PhysID, hdr, payload []byte) error {
	return n.send(dst, hdr, payload, false)
}

// SendNoWait is Send that never waits for room: when the path is full it queues a copy and
// returns, as a Send from a Handler does. A Batch.Handle sends with it (the NIC's acks and
// replies, Portals 4.3 §3.15): a Batch run does not mark itself as a Handler for Send.
func (n *Net) SendNoWait(dst PhysID, hdr, payload []byte) error {
	return n.send(dst, hdr, payload, true)
}

func (n *Net) send(dst PhysID, hdr, payload []byte, noWait bool) error {
	if len(hdr) > MaxHeaderSize || len(payload) > MaxPayload {
		return ErrTooLarge
	}
	if n.closed.Load() {
		return ErrClosed
	}
	if dst == n.id {
		if !n.enterBell() {
			return ErrClosed
		}
		n.self.push(hdr, payload)
		n.st.sent.Add(1)
		n.bell.Ring()
		n.bellUsers.Add(-1)
		return nil
	}
	var c conn
	if r := n.lastRoute.Load(); r != nil && r.id.NID == dst.NID && r.id.PID == dst.PID {
		c = r.c
	} else {
		c = (*n.routes.Load())[dst]
	}
	if c == nil {
		var err error
		if c, err = n.dial(dst); err != nil {
			return err
		}
	}
	if err := c.send(hdr, payload, noWait); err != nil {
		return err
	}
	if _, ok := c.(*shmConn); !ok { // a shmConn counts its own
		n.st.sent.Add(1)
	}
	return nil
}

// UsesTCP reports whether this Net has ever had a TCP connection. (Poll reads the TCP
// sockets itself, so a caller that spins on Poll needs no netpoller wake-up: the engine's
// waits no longer block because of TCP peers, docs/ptlnet.md.)
func (n *Net) UsesTCP() bool { return n.st.tcpConns.Load() != 0 }

// Poll runs the Handler for messages already arrived (shared memory, oneself, and the TCP
// connections no other goroutine is reading), in the caller's goroutine (inline
// progress from the engine's waits, PtlEQWait/PtlCTWait, Portals 4.3 §3.13.8, §3.14.6); it
// returns how many were handled. It returns 0 at once if another goroutine is handling.
func (n *Net) Poll() int {
	// The progress goroutine parks while Polls come (progressLoop); while it is
	// parked, the Polls need not count (a locked instruction each).
	if !n.parked.Load() {
		n.polls.Add(1)
	}
	if !n.rxMu.TryLock() {
		return 0
	}
	k := n.progressLocked()
	if !n.stopped {
		k += n.pollTCP()
	}
	n.rxMu.Unlock()
	if k > 0 {
		n.bell.Withdraw() // awake: peers need not ring (shm.Bell.Sleep)
	}
	n.flushPending()
	return k
}

// PollStop tells the Net that the goroutine which has been calling Poll stops polling (it is
// about to block): the progress goroutine, which parks while Polls keep coming, resumes at
// once. The engine's waits call it before they block (PtlEQWait/PtlCTWait, Portals 4.3
// §3.13.8, §3.14.6); not calling it only delays delivery by up to parkFor.
func (n *Net) PollStop() {
	n.stops.Add(1)
	if n.parked.Load() || n.readersParked.Load() != 0 {
		shm.FutexWake(&n.stops, 1<<30)
	}
}

// progressLocked handles what has arrived through shared memory and from oneself. rxMu held.
func (n *Net) progressLocked() int {
	if n.stopped {
		return 0
	}
	// Idle polls write nothing (inHandler's line is read by Sends).
	if n.idle() {
		return 0
	}
	conns := *n.rxConns.Load()
	if n.batch != nil {
		// A Batch.Handle sends with SendNoWait, so the run need not mark itself
		// (two locked instructions per run).
		n.batch.Begin()
	} else {
		n.inHandler.Store(true)
	}
	k := n.self.drain(n)
	for _, c := range conns {
		k += c.drain(n, 256)
	}
	if n.batch != nil {
		n.batch.End()
	} else {
		n.inHandler.Store(false)
	}
	return k
}

// idle reports whether nothing has arrived through shared memory or from oneself; it
// only reads. rxMu held (reapGone unmaps a retired ring under it), or from the progress
// goroutine.
func (n *Net) idle() bool {
	if !n.self.empty() {
		return false
	}
	for _, c := range *n.rxConns.Load() {
		if c.rx != nil && !c.rx.Empty() {
			return false
		}
	}
	return true
}

// flushPending pushes queued sends whose path has room again.
func (n *Net) flushPending() {
	if n.pending.Load() == 0 {
		return
	}
	for _, c := range *n.rxConns.Load() {
		if c.hasPend.Load() {
			c.flush()
		}
	}
}

// hasWork reports whether the progress goroutine has something to do (Bell.Sleep's check).
func (n *Net) hasWork() bool {
	if n.closed.Load() || !n.self.empty() {
		return true
	}
	for _, c := range *n.rxConns.Load() {
		if c.rxWaiting() || c.gone.Load() || (c.hasPend.Load() && c.txBlocked.Load() == 0) {
			return true
		}
	}
	return false
}

// spinFor is how long the progress goroutine keeps polling after the last
// message before it sleeps on its doorbell: a round trip that completes within
// it costs no futex wake-up on either side.
const spinFor = 50 * time.Microsecond

// yield gives the processor away while polling: every 8th time to other
// processes (sched_yield), so that a peer process on a loaded machine gets a
// core to answer on, and every 32nd time to this process's other goroutines.
// The other polls go straight on: a runtime.Gosched on every poll cost more
// than the polls (the global run queue's lock, and a futex wake-up of an idle
// P's thread each time), and the runtime preempts a goroutine that runs long.
func yield(i int) {
	switch i % 32 {
	case 7, 15, 23, 31:
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	case 3:
		runtime.Gosched()
	}
}

// parkFor is how long the progress goroutine parks, at most, while an application goroutine
// polls inline; parkMin is how many Polls since its last look make it park (fewer, and it
// only gives its core away once: an occasional poller does not keep it parked).
const (
	parkFor = 200 * time.Microsecond
	parkMin = 4
)

// progressLoop is the Net's progress goroutine ("application bypass"): it
// polls (yielding the processor between polls) for spinFor after the last
// message, then sleeps on the doorbell. While an application goroutine polls
// inline (a Portals wait spinning), it parks on a futex of its own instead:
// the poller handles what arrives on its own core, senders ring no doorbell
// (the progress goroutine has not announced itself on the Bell), and the two
// cores are left to the two processes' pollers. The poller's PollStop (it is
// about to block) or parkFor ends the park.
func (n *Net) progressLoop() {
	defer n.wg.Done()
	last := time.Now()
	var polls uint64
	var stops uint32
	for i := 0; !n.closed.Load(); i++ {
		// stops before polls: a PollStop after the Polls seen here changes the
		// word the park compares, so the park cannot outlast it.
		st := n.stops.Load()
		if p := n.polls.Load(); p != polls {
			d := p - polls
			polls, last = p, time.Time{}
			if n.anyGone.Load() {
				n.reapGone()
			}
			if st == stops && d >= parkMin {
				n.parked.Store(true)
				shm.FutexWait(&n.stops, st, parkFor)
				n.parked.Store(false)
			} else {
				unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			}
			stops = st
			continue
		}
		stops = st
		n.rxMu.Lock()
		k := n.progressLocked()
		if !n.stopped {
			k += n.pollTCP()
		}
		n.rxMu.Unlock()
		n.flushPending()
		if n.anyGone.Load() {
			n.reapGone()
		}
		if k > 0 {
			n.bell.Withdraw() // awake: peers need not ring (shm.Bell.Sleep)
			last = time.Time{}
			continue
		}
		if last.IsZero() {
			last = time.Now()
		}
		if i%16 != 0 || time.Since(last) < spinFor {
			yield(i)
			continue
		}
		n.bell.Sleep(n.hasWork, 100*time.Millisecond)
		last = time.Time{}
	}
}

// addConn records c as the path to id unless there is one already (both
// sides may have dialed at once), adds its inbound ring (sc) or its TCP
// connection (tc), counts its goroutines (which the caller starts next) and
// returns the path to use: the first one, so that every message to id goes
// through one connection, in order. It returns nil, registering nothing, once
// Close has begun (whose snapshot of the connections would miss c).
func (n *Net) addConn(id PhysID, c conn, sc *shmConn, tc *tcpConn, goroutines int) conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		return nil
	}
	n.wg.Add(goroutines)
	old := *n.routes.Load()
	route := old[id]
	if route == nil {
		route = c
		m := make(map[PhysID]conn, len(old)+1)
		for k, v := range old {
			m[k] = v
		}
		m[id] = c
		n.routes.Store(&m)
		n.lastRoute.Store(&routeEntry{id, c})
	}
	if sc != nil {
		l := append(append([]*shmConn(nil), *n.rxConns.Load()...), sc)
		n.rxConns.Store(&l)
	}
	if tc != nil {
		n.tcps[tc] = struct{}{}
		l := append(append([]*tcpConn(nil), *n.tcpList.Load()...), tc)
		n.tcpList.Store(&l)
	}
	return route
}

// routeEntry is one route, for Net.lastRoute.
type routeEntry struct {
	id PhysID
	c  conn
}

// dropConn forgets c (its route and its inbound ring).
func (n *Net) dropConn(id PhysID, c conn, sc *shmConn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := *n.routes.Load()
	if old[id] == c {
		m := make(map[PhysID]conn, len(old))
		for k, v := range old {
			if k != id {
				m[k] = v
			}
		}
		n.routes.Store(&m)
		if r := n.lastRoute.Load(); r != nil && r.id == id {
			n.lastRoute.Store(nil)
		}
	}
	if sc != nil {
		sc.txMu.Lock() // its count moves to the Net's
		n.st.sent.Add(sc.sentN)
		sc.sentN = 0
		sc.txMu.Unlock()
		var l []*shmConn
		for _, x := range *n.rxConns.Load() {
			if x != sc {
				l = append(l, x)
			}
		}
		n.rxConns.Store(&l)
	}
}

// dial makes a path to dst: the abstract unix socket on this node, else TCP.
func (n *Net) dial(dst PhysID) (conn, error) {
	if dst.PID == PIDAny {
		return nil, fmt.Errorf("%w: %v: pid PIDAny", ErrUnreachable, dst)
	}
	n.dialMu.Lock()
	defer n.dialMu.Unlock()
	if c := (*n.routes.Load())[dst]; c != nil {
		return c, nil
	}
	if n.closed.Load() {
		return nil, ErrClosed
	}
	if n.forceTCP {
		return n.dialTCP(dst)
	}
	c, err := n.dialUnix(dst)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, errNoSuchName) {
		return nil, err
	}
	if dst.NID == n.id.NID {
		return nil, fmt.Errorf("%w: %v: no such process on this node", ErrUnreachable, dst)
	}
	return n.dialTCP(dst)
}

// Close tears the NI down (the transport half of PtlNIFini, Portals 4.3 §3.6.3): queued sends
// are given up to two seconds to drain, then every goroutine, socket, descriptor and mapping of
// the Net goes. No Handler call starts after Close returns.
func (n *Net) Close() error {
	if n.closed.Swap(true) {
		return ErrClosed
	}
	n.ulis.Close()
	if n.tlis != nil {
		n.tlis.Close()
	}
	// Give queued sends a chance: peers drain without our help.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		n.flushPending()
		if n.pending.Load() == 0 && n.tcpIdle() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	n.rxMu.Lock()
	n.stopped = true
	n.rxMu.Unlock()
	close(n.done)
	n.bell.Ring()
	n.bellWake()
	n.PollStop()
	n.mu.Lock()
	var shms []*shmConn
	shms = append(shms, *n.rxConns.Load()...)
	var tcps []*tcpConn
	for c := range n.tcps {
		tcps = append(tcps, c)
	}
	n.mu.Unlock()
	for _, c := range shms {
		c.sock.Close()
	}
	for _, c := range tcps {
		c.shut()
	}
	n.wg.Wait()
	for _, c := range shms {
		c.release()
	}
	for n.bellUsers.Load() != 0 { // they see closed and leave at once
		time.Sleep(time.Millisecond)
	}
	unmapClose(n.bellFD, n.bellMem)
	n.bellMem = nil
	return nil
}

// enterBell registers an application goroutine about to touch the doorbell
// page; false (nothing registered) once Close has begun. A true result must be
// matched by bellUsers.Add(-1).
func (n *Net) enterBell() bool {
	n.bellUsers.Add(1)
	if n.closed.Load() {
		n.bellUsers.Add(-1)
		return false
	}
	return true
}

// bellWake forces the progress goroutine out of its futex wait.
func (n *Net) bellWake() {
	shm.FutexWake(shm.Uint32At(n.bellMem, bellOff), 1<<30)
}
