package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/conduit/smp"

	"github.com/gexgo/gexgo/internal/auth"
)

// Transport carries AMs between ranks on different hosts over TCP; it is the
// smp conduit's Remote (ranks on one host keep using shared memory). Every
// pair of ranks on different hosts has one connection, set up at Start: the
// lower rank dials, the higher accepts, and both prove the job secret before
// any frame (internal/auth). A reader goroutine per connection moves arriving frames
// into an inbound queue (requests and replies apart) and rings the rank's
// doorbell; Poll delivers them on the polling goroutine, so handlers run
// where gex expects. Sends write the frame header and the payload with one
// writev, without copying the payload.
type Transport struct {
	cfg       Config
	b         boot.Bootstrap
	rank      int
	size      int
	wake      func()
	place     func(dest uint64, n int) []byte // this rank's segment bytes for a Long, or nil
	ln        *net.TCPListener
	peers     []*link
	in        [2]inbound // 0 requests, 1 replies
	queued    atomic.Int64
	closed    atomic.Bool
	unflushed atomic.Bool // some link may hold batched frames
	wg        sync.WaitGroup
}

// link is the connection to one remote rank.
type link struct {
	rank int
	c    net.Conn
	wmu  sync.Mutex // one writer at a time; guards b
	b    *batcher   // frames not yet written (batching of small AMs)
	gone atomic.Bool
}

// frame is an AM that arrived and waits for Poll.
type frame struct {
	src     int
	h       conduit.Header
	payload []byte
	placed  bool // a Long read straight into this rank's segment
}

type inbound struct {
	mu      sync.Mutex
	q       []frame
	spare   []frame
	consume sync.Mutex // one consumer at a time
}

// Config configures a Transport.
type Config struct {
	Secret  []byte        // the job secret every connection proves
	JobID   string        // the job id, bound into the proofs
	Addr    string        // IP address to listen on (this host's address on the job's network)
	Timeout time.Duration // connecting to a peer and the handshake give up after this
	// MaxPayload is the largest Medium or Long payload between hosts.
	MaxPayload int
}

// Environment variables of the tcp conduit.
const (
	EnvAddr    = "GEX_TCP_ADDR"    // address to listen on (default: this host's address)
	EnvTimeout = "GEX_TCP_TIMEOUT" // connection setup timeout, a Go duration (default 30s)
)

// DefaultTimeout is how long connecting to a peer may take.
const DefaultTimeout = 30 * time.Second

// maxRemotePayload is the largest Medium and Long payload between hosts.
const maxRemotePayload = smp.MaxMedium

// ConfigFromEnv reads the secret (GEX_SECRET, set by the launcher), the
// listening address and the timeout.
func ConfigFromEnv(jobID string) (Config, error) {
	cfg := Config{JobID: jobID, Timeout: DefaultTimeout, MaxPayload: maxRemotePayload}
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
	return cfg, nil
}

// New returns a Transport for cfg; Start connects it.
func New(cfg Config) *Transport { return &Transport{cfg: cfg} }

var _ smp.Remote = (*Transport)(nil)

// Limits implements smp.Remote.
func (t *Transport) Limits() conduit.Limits {
	return conduit.Limits{MaxMedium: t.cfg.MaxPayload, MaxLong: t.cfg.MaxPayload, MaxAlloc: t.cfg.MaxPayload}
}

// Start implements smp.Remote: listen, exchange addresses through the
// bootstrap, dial the higher remote ranks and accept the lower ones.
func (t *Transport) Start(b boot.Bootstrap, remote []bool, wake func(), place func(dest uint64, n int) []byte) error {
	t.b, t.rank, t.size, t.wake, t.place = b, b.Rank(), b.Size(), wake, place
	t.peers = make([]*link, t.size)
	ln, err := listen(net.JoinHostPort(t.cfg.Addr, "0"), false)
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
		c, err := dialAuth(string(addrs[r]), deadline, t.auth(), r)
		if err != nil {
			ln.Close()
			return fmt.Errorf("tcp: cannot connect to rank %d at %s within %v: %w", r, addrs[r], t.cfg.Timeout, err)
		}
		t.add(r, c)
	}
	if err := <-accepted; err != nil {
		ln.Close()
		return err
	}
	ln.Close() // every connection is up; nobody else may connect
	return nil
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
		t.add(peer, c)
	}
	return nil
}

// auth is this rank's side of every handshake.
func (t *Transport) auth() *auth.Params {
	return &auth.Params{Secret: t.cfg.Secret, JobID: t.cfg.JobID, Rank: t.rank, Size: t.size, Timeout: min(t.cfg.Timeout, auth.DefaultHandshakeTimeout)}
}

// add installs the connection to rank r and starts its reader.
func (t *Transport) add(r int, c net.Conn) {
	l := &link{rank: r, c: c, b: newBatcher(0, 0)}
	t.peers[r] = l
	t.wg.Add(1)
	go t.read(l)
}

// LostGrace is how long a rank whose connection to a peer broke waits
// before it ends the job itself (Abort naming the peer): the launcher, which
// sees a peer process end, usually ends the job first, naming the rank and
// how it ended (docs/core.md, "Ending a job").
var LostGrace = time.Second

// read moves l's frames into the inbound queues until the connection ends.
// A clean end (the peer closed between frames) ends the reader quietly: the
// peer process exited, and if it died the launcher ends the job. A broken
// stream while this rank still runs ends the job with a message naming the
// peer, so nobody waits forever for a reply that cannot come.
func (t *Transport) read(l *link) {
	defer t.wg.Done()
	fr := newFrameReader(bufio.NewReaderSize(l.c, 64<<10), t.cfg.MaxPayload)
	var fh frameHeader
	for {
		err := fr.Next(&fh)
		if err == nil && fh.Control() {
			continue // no control messages are needed yet; skipped
		}
		var payload []byte
		placed := false
		if err == nil && fh.NBytes > 0 {
			// A Long whose bytes lie in this rank's segment is read
			// straight into it (no staging copy); anything else into a
			// buffer, and a Long outside the segment arrives unplaced for
			// the receiver to refuse.
			if fh.Cat == conduit.Long && fh.EP == 0 && t.place != nil { // only the primordial endpoint's segment is placed here
				if dst := t.place(fh.Dest, fh.NBytes); dst != nil {
					payload, placed = dst, true
				}
			}
			if payload == nil {
				payload = make([]byte, fh.NBytes)
			}
			err = fr.ReadPayload(payload)
		}
		if err != nil {
			l.gone.Store(true)
			if t.closed.Load() || err == io.EOF {
				return
			}
			// The peer's process may have ended: give the launcher, which
			// sees that, LostGrace to end the job naming it (its words
			// are better than "connection reset"); then end it here.
			msg := fmt.Sprintf("lost the connection to rank %d: %v", l.rank, err)
			time.AfterFunc(LostGrace, func() {
				if !t.closed.Load() {
					t.b.Abort(msg)
				}
			})
			return
		}
		qi := 1
		if fh.IsReq {
			qi = 0
		}
		q := &t.in[qi]
		q.mu.Lock()
		q.q = append(q.q, frame{src: l.rank, h: fh.Header, payload: payload, placed: placed})
		q.mu.Unlock()
		t.queued.Add(1)
		t.wake()
	}
}

// Send implements smp.Remote.
func (t *Transport) Send(dst int, h conduit.Header, payload []byte, flags conduit.SendFlags) error {
	l := t.peers[dst]
	if l == nil {
		return fmt.Errorf("tcp: no connection to rank %d", dst)
	}
	if h.Cat == conduit.Short {
		payload = nil
	}
	if len(payload) > t.cfg.MaxPayload {
		return fmt.Errorf("tcp: payload of %d bytes exceeds the %d-byte limit between hosts", len(payload), t.cfg.MaxPayload)
	}
	if l.gone.Load() {
		return fmt.Errorf("tcp: the connection to rank %d is closed", dst)
	}
	n := headLen(int(h.NArgs)) + len(payload)
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if flags&conduit.Immediate != 0 && (l.b.wouldBlock(n) || sendBufferFull(l.c, l.b.pending()+n)) {
		return conduit.ErrWouldBlock
	}
	// Small AMs are batched: while the socket still has bytes queued in the
	// kernel, a frame waits in the link's batcher and goes out with the
	// next ones in one writev (when the batch reaches batchFlush bytes, or
	// at the next Poll, which every wait of the library runs). An AM to an
	// idle socket, or one whose payload is referenced rather than copied
	// (larger than the batcher's copy limit: it must be out before Send
	// returns), goes at once.
	l.b.add(&h, payload)
	if len(payload) > l.b.copyMax || l.b.pending() >= batchFlush || !sendQueued(l.c) {
		if err := l.b.flush(l.c); err != nil {
			return fmt.Errorf("tcp: sending to rank %d: %w", dst, err)
		}
		return nil
	}
	t.unflushed.Store(true)
	return nil
}

// batchFlush is the batch size that is written without waiting for Poll.
const batchFlush = 16 << 10

// flushAll writes the batched frames of every link that no other goroutine
// is writing to (Poll and Close).
func (t *Transport) flushAll() {
	if !t.unflushed.Swap(false) {
		return
	}
	for _, l := range t.peers {
		if l == nil || l.gone.Load() {
			continue
		}
		if !l.wmu.TryLock() {
			t.unflushed.Store(true) // its writer may leave frames behind: look again next time
			continue
		}
		if !l.b.empty() {
			if err := l.b.flush(l.c); err != nil && !t.closed.Load() {
				fmt.Fprintf(os.Stderr, "gexgo: rank %d: sending to rank %d: %v\n", t.rank, l.rank, err)
			}
		}
		l.wmu.Unlock()
	}
}

// Pending implements smp.Remote.
func (t *Transport) Pending() bool { return t.queued.Load() > 0 }

// Poll implements smp.Remote.
func (t *Transport) Poll(repliesOnly bool, d conduit.Delivery) int {
	n := t.PollClass(false, d)
	if !repliesOnly {
		n += t.PollClass(true, d)
	}
	return n
}

// PollClass implements smp.Remote: Poll for one class of AMs. It flushes
// the batched sends first, as every Poll does.
func (t *Transport) PollClass(requests bool, d conduit.Delivery) int {
	t.flushAll()
	qi := 0
	if !requests {
		qi = 1
	}
	if t.queued.Load() == 0 {
		return 0
	}
	return t.drain(qi, d)
}

func (t *Transport) drain(qi int, d conduit.Delivery) int {
	q := &t.in[qi]
	if !q.consume.TryLock() {
		return 0
	}
	defer q.consume.Unlock()
	q.mu.Lock()
	batch := q.q
	q.q, q.spare = q.spare[:0], nil
	q.mu.Unlock()
	var in conduit.Incoming
	for i := range batch {
		f := &batch[i]
		in.Src, in.Header, in.Payload, in.Placed = f.src, f.h, f.payload, f.placed
		d(&in)
		*f = frame{}
	}
	t.queued.Add(-int64(len(batch)))
	q.mu.Lock()
	q.spare = batch[:0]
	q.mu.Unlock()
	return len(batch)
}

// Close implements smp.Remote.
func (t *Transport) Close() error {
	t.unflushed.Store(true)
	t.flushAll()
	if !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	for _, l := range t.peers {
		if l != nil {
			errs = append(errs, l.c.Close())
		}
	}
	t.wg.Wait()
	return errors.Join(errs...)
}
