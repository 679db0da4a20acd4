package boot

import (
	"strings"

	"bufio"
	"errors"
	"fmt"
	"github.com/gexgo/gexgo/internal/auth"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/internal/boot/bootwire"
)

// Time limits of the rank side of the protocol.
const (
	// DialTimeout bounds how long Connect retries to reach the launcher.
	DialTimeout = 10 * time.Second
	// ExitAckTimeout bounds how long Exit and Abort wait for the launcher's
	// EXITNOW before exiting anyway.
	ExitAckTimeout = 2 * time.Second
)

// maxJobIDLen bounds JobID so that names derived from it stay short.
const maxJobIDLen = 64

// Connect joins the job as rank of size through the launcher's bootstrap
// socket at addr ("@name" for an abstract Unix socket, "tcp:HOST:PORT" for a
// launcher on another host, which the connection must prove the job secret
// in GEX_SECRET to, else a socket path).
// It retries the connection for up to DialTimeout, sends HELLO and waits for
// WELCOME; a REJECT from the launcher is returned as an error with the
// launcher's reason. If the job is already ending (the launcher answers
// EXITNOW), the process exits with the job's code.
//
// The returned Bootstrap owns one reader goroutine that delivers collective
// results and ends the process when the launcher says so (EXITNOW: run the
// OnExit hooks, exit with the code) or goes away (print "gexgo: rank R:
// launcher connection lost; exiting" to stderr, run the hooks, exit 1).
// After Close, neither happens.
func Connect(addr string, rank, size int, jobID, host string) (Bootstrap, error) {
	return connect(addr, rank, size, jobID, host, connectOpts{
		dialTimeout: DialTimeout,
		exit:        os.Exit,
		stderr:      os.Stderr,
	})
}

// connectOpts are the process-level effects of a connection, replaceable by
// tests that run ranks as goroutines.
type connectOpts struct {
	dialTimeout time.Duration
	exit        func(code int) // os.Exit; if it returns, the caller's goroutine ends (runtime.Goexit)
	stderr      io.Writer
}

func validJobID(id string) bool {
	if id == "" || len(id) > maxJobIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func connect(addr string, rank, size int, jobID, host string, o connectOpts) (Bootstrap, error) {
	switch {
	case size < 1 || uint64(size) > 1<<31:
		return nil, fmt.Errorf("boot: Connect: size %d is out of range [1, %d]", size, 1<<31)
	case rank < 0 || rank >= size:
		return nil, fmt.Errorf("boot: Connect: rank %d is out of range [0, %d)", rank, size)
	case !validJobID(jobID):
		return nil, fmt.Errorf("boot: Connect: jobID %q must be 1 to %d characters of [A-Za-z0-9_-]", jobID, maxJobIDLen)
	case addr == "":
		return nil, errors.New("boot: Connect: addr is empty")
	}
	conn, err := dialRetry(addr, o.dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("boot: rank %d: cannot connect to the launcher at %s within %v: %w", rank, addr, o.dialTimeout, err)
	}
	if strings.HasPrefix(addr, "tcp:") {
		// A launcher on another host: prove the job secret first (the
		// launcher is "rank" size of size+1 in the handshake).
		secret, err := auth.SecretFromEnv()
		if err == nil {
			_, err = auth.Handshake(conn, &auth.Params{Secret: secret, JobID: jobID, Rank: rank, Size: size + 1}, true, size)
		}
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("boot: rank %d: authenticating to the launcher at %s: %w", rank, addr, err)
		}
	}
	c := &client{
		rank: rank, size: size, jobID: jobID, host: host, addr: addr,
		conn:    conn,
		br:      bufio.NewReader(conn),
		exit:    o.exit,
		stderr:  o.stderr,
		replies: make(chan bootwire.Msg, 1),
		acks:    make(chan int32, 1),
		lost:    make(chan struct{}),
		fin:     make(chan struct{}, 1),
	}
	if err := c.handshake(); err != nil {
		conn.Close()
		return nil, err
	}
	go c.read()
	return c, nil
}

func dialRetry(addr string, limit time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(limit)
	delay := 5 * time.Millisecond
	for {
		network, a := "unix", addr
		if rest, ok := strings.CutPrefix(addr, "tcp:"); ok {
			network, a = "tcp", rest
		}
		conn, err := net.DialTimeout(network, a, time.Until(deadline))
		if err == nil {
			return conn, nil
		}
		if time.Now().Add(delay).After(deadline) {
			return nil, err
		}
		time.Sleep(delay)
		delay = min(2*delay, 200*time.Millisecond)
	}
}

func (c *client) handshake() error {
	hello := &bootwire.Hello{Rank: uint32(c.rank), Size: uint32(c.size), PID: uint32(os.Getpid())}
	if err := bootwire.WriteMsg(c.conn, hello); err != nil {
		return fmt.Errorf("boot: rank %d: sending HELLO to the launcher at %s: %w", c.rank, c.addr, err)
	}
	c.conn.SetReadDeadline(time.Now().Add(DialTimeout))
	m, err := bootwire.ReadMsg(c.br)
	c.conn.SetReadDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("boot: rank %d: no WELCOME from the launcher at %s: %w", c.rank, c.addr, err)
	}
	switch m := m.(type) {
	case *bootwire.Welcome:
		return nil
	case *bootwire.Reject:
		return fmt.Errorf("boot: rank %d: the launcher at %s rejected the connection: %s", c.rank, c.addr, m.Msg)
	case *bootwire.ExitNow:
		// The job ended before we joined it.
		c.end(int(m.Code))
	}
	return fmt.Errorf("boot: rank %d: the launcher at %s answered HELLO with %v, want WELCOME", c.rank, c.addr, m.Type())
}

// client is a Bootstrap connected to a launcher.
//
// Concurrency: collectives are serialized by collMu (the interface allows one
// collective at a time; the lock makes misuse safe). Frame writes are
// serialized by wmu. The reader goroutine is the only reader of conn/br
// after the handshake; it hands GATHERED/GATHERFAIL to the collective through
// replies, EXITNOW to a pending Exit/Abort through acks, and closes lost when
// it stops.
type client struct {
	rank, size int
	jobID      string
	host       string
	addr       string
	conn       net.Conn
	br         *bufio.Reader
	exit       func(int)
	stderr     io.Writer

	wmu sync.Mutex // serializes frame writes on conn

	collMu sync.Mutex // one collective at a time
	seq    uint32     // sequence number of the last collective; guarded by collMu

	replies chan bootwire.Msg // GATHERED or GATHERFAIL for the pending collective
	acks    chan int32        // EXITNOW code while exiting
	lost    chan struct{}     // closed when the reader goroutine stops
	exiting atomic.Bool       // Exit or Abort in progress: EXITNOW is an ack
	fin     chan struct{}     // FINALIZED: the launcher recorded this rank's Close
	ending  atomic.Bool       // end is running: Close does not finalize

	peerLeft peerHooks // what runs when the launcher says a rank left the job

	mu     sync.Mutex
	hooks  []func() // guarded by mu
	closed bool     // guarded by mu

	endOnce sync.Once
}

func (c *client) Rank() int     { return c.rank }
func (c *client) Size() int     { return c.size }
func (c *client) JobID() string { return c.jobID }
func (c *client) Host() string  { return c.host }

func (c *client) OnExit(fn func()) {
	c.mu.Lock()
	c.hooks = append(c.hooks, fn)
	c.mu.Unlock()
}

func (c *client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *client) send(m bootwire.Msg) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return bootwire.WriteMsg(c.conn, m)
}

// read is the reader goroutine.
func (c *client) read() {
	defer close(c.lost)
	for {
		m, err := bootwire.ReadMsg(c.br)
		if err != nil {
			if c.isClosed() || c.exiting.Load() || c.ending.Load() {
				return // Close, or Exit/Abort that notices lost
			}
			if errors.Is(err, bootwire.ErrMalformed) {
				fmt.Fprintf(c.stderr, "gexgo: rank %d: bad frame from the launcher (%v); exiting\n", c.rank, err)
			} else {
				fmt.Fprintf(c.stderr, "gexgo: rank %d: launcher connection lost; exiting\n", c.rank)
			}
			c.end(1) // does not return
			return
		}
		switch m := m.(type) {
		case *bootwire.Gathered, *bootwire.GatherFail:
			select {
			case c.replies <- m:
			default:
				fmt.Fprintf(c.stderr, "gexgo: rank %d: unexpected %v from the launcher; exiting\n", c.rank, m.Type())
				c.end(1)
			}
		case *bootwire.Finalized:
			select {
			case c.fin <- struct{}{}:
			default:
			}
		case *bootwire.PeerLeft:
			c.peerLeft.run(int(m.Rank), m.Msg)
			code, delay := int(m.Code), time.Duration(m.DelayMS)*time.Millisecond
			time.AfterFunc(delay, func() { c.end(code) })
		case *bootwire.ExitNow:
			if c.exiting.Load() {
				c.acks <- m.Code // cap 1; only one EXITNOW is ever consumed here
				return
			}
			c.end(int(m.Code))
		default:
			fmt.Fprintf(c.stderr, "gexgo: rank %d: unexpected %v from the launcher; exiting\n", c.rank, m.Type())
			c.end(1)
		}
	}
}

// end runs the exit hooks once and exits the process with code. It does not
// return: if the exit function returns (tests), the calling goroutine ends.
func (c *client) end(code int) {
	c.endOnce.Do(func() {
		c.ending.Store(true)
		c.mu.Lock()
		hooks := c.hooks
		c.hooks = nil
		c.mu.Unlock()
		runHooks(hooks, c.rank, c.stderr)
		c.exit(code)
	})
	runtime.Goexit()
}

// runHooks runs hooks in reverse order of registration; a panicking hook is
// reported and does not stop the others.
func runHooks(hooks []func(), rank int, stderr io.Writer) {
	for i := len(hooks) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if r := recover(); r != nil {
					fmt.Fprintf(stderr, "gexgo: rank %d: OnExit hook panicked: %v\n", rank, r)
				}
			}()
			hooks[i]()
		}()
	}
}

func (c *client) AllGather(mine []byte) ([][]byte, error) {
	c.collMu.Lock()
	defer c.collMu.Unlock()
	if c.isClosed() {
		return nil, ErrClosed
	}
	if max := bootwire.MaxFrame - bootwire.FrameLen(&bootwire.Gather{}); len(mine) > max {
		return nil, fmt.Errorf("boot: rank %d: AllGather: contribution of %d bytes exceeds the limit of %d bytes", c.rank, len(mine), max)
	}
	c.seq++
	seq := c.seq
	if err := c.send(&bootwire.Gather{Seq: seq, Data: mine}); err != nil {
		return nil, c.lostErr(seq, err)
	}
	select {
	case m := <-c.replies:
		switch m := m.(type) {
		case *bootwire.GatherFail:
			if m.Seq == seq {
				return nil, fmt.Errorf("boot: rank %d: all-gather %d failed: %s", c.rank, seq, m.Msg)
			}
			return nil, fmt.Errorf("boot: rank %d: all-gather %d: the launcher answered GATHERFAIL for all-gather %d", c.rank, seq, m.Seq)
		case *bootwire.Gathered:
			if m.Seq != seq || len(m.Parts) != c.size {
				return nil, fmt.Errorf("boot: rank %d: all-gather %d: the launcher answered all-gather %d with %d parts, want %d",
					c.rank, seq, m.Seq, len(m.Parts), c.size)
			}
			return m.Parts, nil
		}
		panic("unreachable: reader delivers only GATHERED and GATHERFAIL")
	case <-c.lost:
		return nil, c.lostErr(seq, io.EOF)
	}
}

func (c *client) lostErr(seq uint32, err error) error {
	if c.isClosed() {
		return ErrClosed
	}
	return fmt.Errorf("boot: rank %d: all-gather %d: launcher connection lost: %w", c.rank, seq, err)
}

func (c *client) Barrier() error {
	_, err := c.AllGather(nil)
	return err
}

func (c *client) Exit(code int) {
	c.exiting.Store(true)
	if err := c.send(&bootwire.Exit{Code: int32(code)}); err == nil {
		if got, ok := c.waitAck(); ok {
			code = int(got) // the first EXIT of the job wins
		}
	}
	c.end(code)
}

func (c *client) Abort(msg string) {
	c.exiting.Store(true)
	acked := false
	if err := c.send(&bootwire.Abort{Msg: msg}); err == nil {
		_, acked = c.waitAck()
	}
	if !acked {
		// The launcher did not confirm that it printed the message.
		fmt.Fprintf(c.stderr, "gexgo: rank %d aborted: %s\n", c.rank, msg)
	}
	c.end(1)
}

// waitAck waits up to ExitAckTimeout for the EXITNOW that acknowledges EXIT
// or ABORT.
func (c *client) waitAck() (code int32, ok bool) {
	t := time.NewTimer(ExitAckTimeout)
	defer t.Stop()
	select {
	case code = <-c.acks:
		return code, true
	case <-c.lost:
		// The reader stops after delivering the ack: look once more.
		select {
		case code = <-c.acks:
			return code, true
		default:
			return 0, false
		}
	case <-t.C:
		return 0, false
	}
}

func (c *client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	if !c.ending.Load() && !c.exiting.Load() {
		c.finalize()
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	// Not waiting for the reader: Close may be called from an OnExit hook,
	// which runs on the reader goroutine.
	return c.conn.Close()
}

// finalize tells the launcher that this rank is done (FINALIZE) and waits up
// to ExitAckTimeout for FINALIZED, so that the launcher has recorded it before
// it can see this process end: then the end of the process is the normal end
// of a rank, not a rank leaving the job early.
func (c *client) finalize() {
	if err := c.send(&bootwire.Finalize{}); err != nil {
		return
	}
	t := time.NewTimer(ExitAckTimeout)
	defer t.Stop()
	select {
	case <-c.fin:
	case <-c.lost:
	case <-t.C:
	}
}

// OnPeerLeft implements PeerWatch.
func (c *client) OnPeerLeft(fn func(rank int, msg string)) { c.peerLeft.add(fn) }

// ReportProgress implements ProgressReporter.
func (c *client) ReportProgress(count uint64, msg string) error {
	if c.isClosed() {
		return ErrClosed
	}
	return c.send(&bootwire.Progress{Count: count, Msg: msg})
}
