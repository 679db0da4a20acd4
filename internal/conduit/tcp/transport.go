package tcp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/conduit/smp"

	"github.com/gexgo/gexgo/internal/auth"
)

// Transport carries AMs between ranks on different hosts over TCP; it is the
// smp conduit's Remote (ranks on one host keep using shared memory). Every
// pair of ranks on different hosts has one connection, set up at Start: the
// lower rank dials, the higher accepts, and both prove the job secret before
// any frame (internal/auth).
//
// There is no reader goroutine: the goroutine that polls (Poll, which every
// library wait and the receive goroutine run) reads the sockets itself with
// non-blocking reads into a per-connection buffer and runs the handlers on
// the frames where they lie (rx.go). A sender that finds the socket full
// reads its own receive side while it waits (write), so two ranks flooding
// each other cannot deadlock. Sleep (the block wait mode) is woken by the
// waker goroutine's epoll (waker.go) when traffic arrives.
type Transport struct {
	cfg       Config
	b         boot.Bootstrap
	rank      int
	size      int
	wake      func()
	place     func(dest uint64, n int) []byte // this rank's segment bytes for a Long, or nil
	ln        *net.TCPListener
	peers     []*link // by rank; nil for ranks on this host
	links     []*link // the connected peers, built once Start has connected all
	dmu       sync.Mutex
	inc       conduit.Incoming // the AM being delivered; guarded by dmu
	closed    atomic.Bool
	unflushed atomic.Bool      // some link may hold batched frames
	kready    atomic.Bool      // the waker saw a socket become readable since the last Poll
	d         conduit.Delivery // set by SetDelivery before any traffic
	class     *[2]sync.Mutex   // set by SetClassLocks: [0] Requests, [1] Replies (may be nil)
	w         waker
	rs        readySet // ready.go
	// sleepHook, if set (tests), runs before each of awaitLong's ppoll(2)
	// sleeps, with t.dmu and the link's rmu held.
	sleepHook func()
}

// link is the connection to one remote rank.
type link struct {
	rank int
	fd   int // the socket, non-blocking; -1 once closed (read and written under rmu and wmu)
	sock int // the socket's number, for poll and epoll sets (never changes)
	gone atomic.Bool
	// armed: the socket is armed in the waker's one-shot set (waker.go):
	// set by arm before it arms, cleared by the waker when the kernel
	// reports (and so disarms) the socket.
	armed atomic.Bool
	// inSet: the socket is in the waker's set, armed or not (changed under
	// the waker's mu); sinceArm counts the reads that found bytes on it
	// since it was last armed, while it is in the set (waker.noteRead).
	inSet    atomic.Bool
	sinceArm atomic.Uint32

	// Send side: wmu guards everything below it up to rmu.
	wmu     sync.Mutex
	b       *batcher // frames not yet written (batching of small AMs)
	spare   *batcher // the other batcher: write swaps them
	writing bool     // a write is in progress (it may have let wmu go to poll)
	iov     []unix.Iovec
	pfd     []unix.PollFd // the writer's: this socket (POLLOUT), then every socket (POLLIN)
	last    int64         // monotonic ns of the last write

	// Receive side: rmu guards everything below it (rx.go).
	rmu sync.Mutex
	rx
}

// Config configures a Transport.
type Config struct {
	Secret  []byte        // the job secret every connection proves
	JobID   string        // the job id, bound into the proofs
	Addr    string        // IP address to listen on (this host's address on the job's network)
	Timeout time.Duration // connecting to a peer and the handshake give up after this
	// MaxPayload is the largest Medium payload between hosts.
	MaxPayload int
	// MaxLong is the largest Long payload between hosts (<= MaxPayload:
	// MaxPayload). A large Long is read straight into the segment.
	MaxLong int
	// SockBuf is SO_SNDBUF and SO_RCVBUF of every connection (<= 0: the
	// kernel's autotuning).
	SockBuf int
	// NotSentLowat is TCP_NOTSENT_LOWAT of every connection: the most
	// bytes a socket holds written but not yet sent (<= 0: no limit).
	NotSentLowat int
	// Congestion is the TCP congestion control of every connection
	// (TCP_CONGESTION); "" keeps the system's default.
	Congestion string
	// congestionSet: Congestion was asked for explicitly (GEX_TCP_CONGESTION),
	// so a kernel without it is an error rather than a fallback.
	congestionSet bool
}

// Environment variables of the tcp conduit.
const (
	EnvAddr    = "GEX_TCP_ADDR"    // address to listen on (default: this host's address)
	EnvTimeout = "GEX_TCP_TIMEOUT" // connection setup timeout, a Go duration (default 30s)
	EnvSockBuf = "GEX_TCP_SOCKBUF" // SO_SNDBUF/SO_RCVBUF in bytes (0: kernel autotuning; default DefaultSockBuf)
	// EnvNotSentLowat sets TCP_NOTSENT_LOWAT in bytes (default
	// DefaultNotSentLowat; 0 turns it off).
	EnvNotSentLowat = "GEX_TCP_NOTSENT_LOWAT"
	// EnvCongestion names the TCP congestion control of the conduit's
	// connections (default DefaultCongestion; "system" keeps the system's).
	EnvCongestion = "GEX_TCP_CONGESTION"
)

// DefaultCongestion is the default TCP congestion control of the conduit's
// connections. The system default may be BBR, which paces every connection
// at its estimate of the path's bandwidth; a connection that carries AMs and
// RMA windows (bursts with pauses between them) keeps that estimate low,
// and pacing then caps a 4 MiB put or get at a fraction of what the
// sockets carry (docs/tcp.md, "Congestion control"). CUBIC does not pace.
// If the kernel lacks it, the system's default stays.
const DefaultCongestion = "cubic"

// DefaultNotSentLowat is the default TCP_NOTSENT_LOWAT: a writer may leave at
// most this many bytes in the socket unsent; a larger write returns (or waits
// in poll(2)) until TCP has sent the rest. Without the limit, a 1 MiB write
// leaves most of itself queued behind the congestion window, and the
// acknowledgements that open the window - processed in the softirq of the
// CPU the receiver runs on - transmit it from that CPU while the writer
// transmits from its own: on loopback and veth links (per-CPU backlog
// queues) the segments then arrive out of order, the sender takes the
// reordering for loss and retransmits (DSACK then shows the retransmissions
// spurious, but the window has been cut), and the 4 MiB floods fall to a
// third or a half. With the limit no reordering, retransmission or DSACK was
// counted (docs/tcp.md, fifth campaign).
const DefaultNotSentLowat = 128 << 10

// DefaultSockBuf is the default socket buffer size (docs/tcp.md has the
// measurements).
const DefaultSockBuf = 0

// DefaultTimeout is how long connecting to a peer may take.
const DefaultTimeout = 30 * time.Second

// maxRemotePayload is the largest Medium payload between hosts (the
// gex_AM_Max*Medium of every peer, on this host or another).
const maxRemotePayload = smp.MaxMedium

// maxRemoteLong is the largest Long payload between hosts: RMA puts go as
// pipelined Longs of up to this size, written from the caller's memory and
// read from the socket straight into the target's segment.
const maxRemoteLong = 4 << 20

// ConfigFromEnv reads the secret (GEX_SECRET, set by the launcher), the
// listening address and the timeout.
func ConfigFromEnv(jobID string) (Config, error) {
	cfg := Config{JobID: jobID, Timeout: DefaultTimeout, MaxPayload: maxRemotePayload, MaxLong: maxRemoteLong, SockBuf: DefaultSockBuf, NotSentLowat: DefaultNotSentLowat, Congestion: DefaultCongestion}
	sec, err := auth.SecretFromEnv()
	if err != nil {
		return cfg, err
	}
	cfg.Secret = sec
	cfg.Addr = os.Getenv(EnvAddr)
	if cfg.Addr == "" {
		cfg.Addr = boot.HostAddr()
	}
	if v := os.Getenv(EnvTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("tcp: %s=%q is not a positive duration", EnvTimeout, v)
		}
		cfg.Timeout = d
	}
	if v := os.Getenv(EnvSockBuf); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<30 {
			return cfg, fmt.Errorf("tcp: %s=%q is not a byte count in [0, 1 GiB]", EnvSockBuf, v)
		}
		cfg.SockBuf = n
	}
	if v := os.Getenv(EnvNotSentLowat); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<30 {
			return cfg, fmt.Errorf("tcp: %s=%q is not a byte count in [0, 1 GiB]", EnvNotSentLowat, v)
		}
		cfg.NotSentLowat = n
	}
	switch v := os.Getenv(EnvCongestion); v {
	case "":
	case "system":
		cfg.Congestion = ""
	default:
		if len(v) >= 16 || strings.ContainsAny(v, " \t\n/") {
			return cfg, fmt.Errorf("tcp: %s=%q is not a congestion control name (at most 15 characters, as in net.ipv4.tcp_available_congestion_control)", EnvCongestion, v)
		}
		cfg.Congestion, cfg.congestionSet = v, true
	}
	return cfg, nil
}

// New returns a Transport for cfg; Start connects it.
func New(cfg Config) *Transport { return &Transport{cfg: cfg} }

var _ smp.Remote = (*Transport)(nil)

// Limits implements smp.Remote.
func (t *Transport) Limits() conduit.Limits {
	return conduit.Limits{MaxMedium: t.cfg.MaxPayload, MaxLong: t.maxLong(), MaxAlloc: t.cfg.MaxPayload}
}

// limit is the payload limit of category cat.
func (t *Transport) limit(cat conduit.Category) int {
	if cat == conduit.Long {
		return t.maxLong()
	}
	return t.cfg.MaxPayload
}

// maxLong is the Long payload limit.
func (t *Transport) maxLong() int { return max(t.cfg.MaxLong, t.cfg.MaxPayload) }

// Start implements smp.Remote: listen, exchange addresses through the
// bootstrap, dial the higher remote ranks and accept the lower ones.
func (t *Transport) Start(b boot.Bootstrap, remote []bool, wake func(), place func(dest uint64, n int) []byte) error {
	t.b, t.rank, t.size, t.wake, t.place = b, b.Rank(), b.Size(), wake, place
	t.peers = make([]*link, t.size)
	ln, err := listen(net.JoinHostPort(t.cfg.Addr, "0"), false, t.cfg.Congestion)
	if err != nil {
		return err
	}
	t.ln = ln
	addrs, err := b.AllGather([]byte(ln.Addr().String()))
	if err != nil {
		ln.Close()
		return fmt.Errorf("tcp: exchanging addresses: %w", err)
	}
	var lower, higher []int
	for r, isRemote := range remote {
		switch {
		case !isRemote:
		case r < t.rank:
			lower = append(lower, r)
		default:
			higher = append(higher, r)
		}
	}
	deadline := time.Now().Add(t.cfg.Timeout)
	accepted := make(chan error, 1)
	go func() { accepted <- t.acceptFrom(lower, deadline) }()
	for _, r := range higher {
		c, err := dialAuth(string(addrs[r]), deadline, t.auth(), r, t.cfg.Congestion)
		if err != nil {
			ln.Close()
			return fmt.Errorf("tcp: cannot connect to rank %d at %s within %v: %w", r, addrs[r], t.cfg.Timeout, err)
		}
		if err := t.add(r, c); err != nil {
			ln.Close()
			return err
		}
	}
	if err := <-accepted; err != nil {
		ln.Close()
		return err
	}
	ln.Close() // every connection is up; nobody else may connect
	return t.ready()
}

// acceptFrom accepts authenticated connections until every rank in want has
// connected. A connection that fails the handshake is closed and logged.
func (t *Transport) acceptFrom(want []int, deadline time.Time) error {
	left := make(map[int]bool, len(want))
	for _, r := range want {
		left[r] = true
	}
	for len(left) > 0 {
		t.ln.SetDeadline(deadline)
		c, err := t.ln.Accept()
		if err != nil {
			missing := make([]int, 0, len(left))
			for r := range left {
				missing = append(missing, r)
			}
			return fmt.Errorf("tcp: rank(s) %v did not connect within %v: %w", missing, t.cfg.Timeout, err)
		}
		setNoDelay(c)
		peer, err := auth.Handshake(c, t.auth(), false, -1)
		if err == nil && !left[peer] {
			c.Close()
			err = fmt.Errorf("rank %d is not expected to connect here", peer)
		}
		if err != nil {
			// handshake closed c
			fmt.Fprintf(os.Stderr, "gexgo: rank %d: refused a connection from %v: %v\n", t.rank, c.RemoteAddr(), err)
			continue
		}
		delete(left, peer)
		if err := t.add(peer, c); err != nil {
			return err
		}
	}
	return nil
}

// auth is this rank's side of every handshake.
func (t *Transport) auth() *auth.Params {
	return &auth.Params{Secret: t.cfg.Secret, JobID: t.cfg.JobID, Rank: t.rank, Size: t.size, Timeout: min(t.cfg.Timeout, auth.DefaultHandshakeTimeout)}
}

// add installs the connection to rank r: the transport takes c's socket.
func (t *Transport) add(r int, c net.Conn) error {
	fd, err := takeFD(c)
	if err == nil {
		err = tuneSocket(fd, t.cfg.SockBuf, t.cfg.NotSentLowat, t.cfg.Congestion, t.cfg.congestionSet)
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return fmt.Errorf("tcp: connection to rank %d: %w", r, err)
	}
	l := &link{rank: r, fd: fd, sock: fd, b: newBatcher(0, 0), spare: newBatcher(0, 0), iov: make([]unix.Iovec, iovMax)}
	l.buf = make([]byte, rxBufSize)
	t.peers[r] = l
	return nil
}

// ready finishes Start once every connection is up.
func (t *Transport) ready() error {
	for _, l := range t.peers {
		if l != nil {
			t.links = append(t.links, l)
		}
	}
	for _, l := range t.links {
		l.pfd = make([]unix.PollFd, 1+len(t.links))
		l.rpfd = make([]unix.PollFd, len(t.links))
	}
	if err := t.rs.start(t); err != nil {
		return err
	}
	return t.w.start(t)
}

// Send implements smp.Remote. Small AMs are batched: a frame sent within
// batchWindow of the link's last write waits in the link's batcher and goes
// out with the next ones in one writev (when the batch reaches batchFlush
// bytes, or at the next Poll, which every wait of the library runs). An AM
// to a link that has been quiet, or one whose payload is referenced rather
// than copied (larger than the batcher's copy limit), is written at once,
// header and payload with one writev from the caller's memory; Send returns
// once the kernel has every byte (the payload may then be reused).
func (t *Transport) Send(dst int, h conduit.Header, payload []byte, flags conduit.SendFlags) error {
	if dst < 0 || dst >= len(t.peers) || t.peers[dst] == nil {
		return fmt.Errorf("tcp: no connection to rank %d", dst)
	}
	l := t.peers[dst]
	if h.Cat == conduit.Short {
		payload = nil
	}
	if lim := t.limit(h.Cat); len(payload) > lim {
		return fmt.Errorf("tcp: %v payload of %d bytes exceeds the %d-byte limit between hosts", h.Cat, len(payload), lim)
	}
	if l.gone.Load() {
		return fmt.Errorf("tcp: the connection to rank %d is closed", dst)
	}
	n := headLen(int(h.NArgs)) + len(payload)
	l.wmu.Lock()
	defer l.wmu.Unlock()
	for w := 0; l.writing; w++ {
		// Another write on this link waits for room (and polls meanwhile;
		// this Send may come from a handler it runs): queue a copy, which
		// that writer sends. A request beyond the high-water mark waits.
		switch {
		case flags&conduit.Immediate != 0:
			return conduit.ErrWouldBlock
		case !h.IsReq || l.b.pending()+n <= l.b.highWater:
			l.b.addCopy(&h, payload)
			return nil
		}
		l.wmu.Unlock()
		t.waitWritable(l, w, true, false)
		l.wmu.Lock()
	}
	if l.fd < 0 {
		return fmt.Errorf("tcp: the connection to rank %d is closed", dst)
	}
	if flags&conduit.Immediate != 0 && (l.b.wouldBlock(n) || sendBufferFull(l.fd, l.b.pending()+n, t.cfg.NotSentLowat)) {
		return conduit.ErrWouldBlock
	}
	l.b.add(&h, payload)
	if len(payload) > l.b.copyMax || l.b.pending() >= batchFlush || nanotime()-l.last > batchWindow {
		if err := t.write(l, h.IsReq); err != nil {
			return fmt.Errorf("tcp: sending to rank %d: %w", dst, err)
		}
		return nil
	}
	t.unflushed.Store(true)
	return nil
}

const (
	// batchFlush is the batch size that is written without waiting for Poll.
	batchFlush = 16 << 10
	// batchWindow: a small frame sent this soon after the link's last write
	// joins a batch (a flood); one sent later goes at once (a ping-pong).
	batchWindow = 4000 // ns
)

// nanotime is a monotonic clock in nanoseconds.
func nanotime() int64 { return int64(time.Since(epoch)) }

var epoch = time.Now()

// write writes l's batched frames to its socket and empties the batcher,
// also on error (a failed write means the connection is lost). The caller
// holds l.wmu and no write is in progress on l. When the socket's send buffer
// is full the writer lets l.wmu go and polls (waitWritable) until there is
// room: GASNet requires a blocked sender to poll, and it keeps the peers'
// writes moving too. Sends to l meanwhile queue copies in the other batcher,
// which the writer sends after its own.
func (t *Transport) write(l *link, isReq bool) error {
	l.writing = true
	var err error
	for err == nil && !l.b.empty() {
		cur := l.b
		l.b, l.spare = l.spare, nil
		err = t.writeVec(l, cur.vectors(), isReq)
		cur.reset()
		l.spare = cur
	}
	if err != nil {
		l.b.reset()
	}
	l.writing = false
	l.last = nanotime()
	return err
}

// writeVec writes vec to l's socket; see write.
func (t *Transport) writeVec(l *link, vec [][]byte, isReq bool) error {
	for w := 0; len(vec) > 0; {
		if l.fd < 0 {
			return net.ErrClosed
		}
		n, err := writev(l.fd, vec, l.iov)
		switch err {
		case nil:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			l.wmu.Unlock()
			t.waitWritable(l, w, isReq, true)
			l.wmu.Lock()
			w++
			continue
		default:
			return err
		}
		w = 0
		for n > 0 {
			if n >= len(vec[0]) {
				n -= len(vec[0])
				vec = vec[1:]
			} else {
				vec[0] = vec[0][n:]
				n = 0
			}
		}
		for len(vec) > 0 && len(vec[0]) == 0 {
			vec = vec[1:]
		}
	}
	return nil
}

// waitWritable waits a little for room on l's socket, polling: if no other
// goroutine delivers, it runs the handlers of what arrived (everything for a
// request sender, replies only for a reply sender, as the smp conduit's
// senders do); else it reads every connection into its buffer. Then it spins
// a few times, and later sleeps in poll(2) (at most 1 ms) until the socket
// is writable or some socket has bytes to read (writer: the caller is l's
// writer and may use l.pfd).
func (t *Transport) waitWritable(l *link, w int, isReq, writer bool) {
	if d := t.d; d != nil && t.dmu.TryLock() {
		t.serveAll(!isReq, false, d) // a sender (maybe the user's) never sleeps here
		t.dmu.Unlock()
	} else {
		t.fillAll()
	}
	switch {
	case w < 4:
	case !writer || len(l.pfd) == 0:
		runtime.Gosched()
	default:
		l.pfd[0] = unix.PollFd{Fd: int32(l.sock), Events: unix.POLLOUT}
		for i, k := range t.links {
			l.pfd[1+i] = unix.PollFd{Fd: int32(k.sock), Events: unix.POLLIN}
			if k.gone.Load() {
				l.pfd[1+i].Fd = -1 // ignored by poll(2)
			}
		}
		unix.Poll(l.pfd, 1)
	}
}

// flushAll writes the batched frames of every link that no other goroutine
// is writing to (Poll and Close).
func (t *Transport) flushAll() {
	if !t.unflushed.Swap(false) {
		return
	}
	for _, l := range t.links {
		if l.gone.Load() {
			continue
		}
		if !l.wmu.TryLock() {
			t.unflushed.Store(true) // its writer may leave frames behind: look again next time
			continue
		}
		if !l.writing && !l.b.empty() && l.fd >= 0 {
			if err := t.write(l, true); err != nil && !t.closed.Load() {
				fmt.Fprintf(os.Stderr, "gexgo: rank %d: sending to rank %d: %v\n", t.rank, l.rank, err)
			}
		}
		l.wmu.Unlock()
	}
}

// Pending implements smp.Remote: an AM is ready to be delivered, or the
// waker saw a socket become readable.
func (t *Transport) Pending() bool {
	if t.kready.Load() {
		return true
	}
	for _, l := range t.links {
		if l.rmu.TryLock() {
			ok := l.deliverable(t.maxLong())
			l.rmu.Unlock()
			if ok {
				return true
			}
		}
	}
	return false
}

// SetDelivery implements smp.Remote: blocked senders deliver through d.
func (t *Transport) SetDelivery(d conduit.Delivery) { t.d = d }

// SetClassLocks implements smp.Remote: a handler of a class runs only while
// this transport holds that class's lock (TryLock; when another goroutine
// holds it, the frame waits for a later Poll).
func (t *Transport) SetClassLocks(locks *[2]sync.Mutex) { t.class = locks }

// classLock takes the lock of the class of an AM (isReq), if there is one; it
// reports false when another goroutine holds it.
func (t *Transport) classLock(isReq bool) bool {
	if t.class == nil {
		return true
	}
	return t.class[classIndex(isReq)].TryLock()
}

func (t *Transport) classUnlock(isReq bool) {
	if t.class != nil {
		t.class[classIndex(isReq)].Unlock()
	}
}

func classIndex(isReq bool) int {
	if isReq {
		return 0
	}
	return 1
}

// Arm implements smp.Remote: the waker watches the sockets until one becomes
// readable, then rings the rank's doorbell (Sleep).
func (t *Transport) Arm() { t.w.arm(t) }

// Poll implements smp.Remote: it writes batched frames, then reads every
// connection and runs the handlers of the frames that arrived, in place, on
// the calling goroutine. One goroutine delivers at a time; another one
// polling meanwhile (or a handler's own nested poll) only reads, so that the
// peers' writes still progress. It never sleeps (smp.Remote's contract: a
// user's AMPoll in a compute loop, or a wait in the spin wait mode, busy-polls).
func (t *Transport) Poll(repliesOnly bool, d conduit.Delivery) int {
	return t.poll(repliesOnly, false, d)
}

// PollWait implements smp.RemoteWaiter: Poll for a library wait that may
// sleep (a wait in the block or spin-block mode, gasnet_set_waitmode, spec
// 3.6.2.1): while a large Long arrives straight into the segment and the
// sockets are empty, it sleeps in ppoll(2) for the rest (awaitLong, at most
// longWaitMax) instead of busy-polling.
func (t *Transport) PollWait(repliesOnly bool, d conduit.Delivery) int {
	return t.poll(repliesOnly, true, d)
}

func (t *Transport) poll(repliesOnly, wait bool, d conduit.Delivery) int {
	t.kready.Store(false)
	t.flushAll()
	if !t.dmu.TryLock() {
		t.fillAll()
		return 0
	}
	n := t.serveAll(repliesOnly, wait, d)
	t.dmu.Unlock()
	if n > 0 {
		// What the handlers sent (the acknowledgements of a put's Longs,
		// replies) goes out now, not at the next Poll: the waiter may not
		// poll again for a while (it yields the CPU between polls), and
		// the peer waits on these frames.
		t.flushAll()
	}
	return n
}

// Close implements smp.Remote.
func (t *Transport) Close() error {
	t.unflushed.Store(true)
	t.flushAll()
	if !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	t.w.stop()
	t.rs.close()
	var errs []error
	for _, l := range t.peers {
		if l == nil {
			continue
		}
		l.gone.Store(true)
		l.wmu.Lock()
		l.rmu.Lock()
		if l.fd >= 0 {
			errs = append(errs, unix.Close(l.fd))
			l.fd = -1
		}
		l.rmu.Unlock()
		l.wmu.Unlock()
	}
	return errors.Join(errs...)
}
