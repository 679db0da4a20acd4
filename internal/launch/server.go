package launch

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/gexgo/gexgo/internal/auth"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gexgo/gexgo/internal/boot/bootwire"
	"golang.org/x/sys/unix"
)

// HelloTimeout bounds how long a new connection may take to send HELLO.
const HelloTimeout = 10 * time.Second

// EventKind says what an Event reports.
type EventKind int

// Event kinds.
const (
	// EventExit: rank Rank asked to end the job with Code (the first EXIT of
	// the job; later ones are answered and not reported).
	EventExit EventKind = iota + 1
	// EventAbort: rank Rank aborted with Msg.
	EventAbort
	// EventDropped: the server dropped a connection; Msg says why (bad
	// HELLO, protocol error). Rank is -1 when the peer's rank is unknown.
	EventDropped
)

// String returns "exit", "abort" or "dropped".
func (k EventKind) String() string {
	switch k {
	case EventExit:
		return "exit"
	case EventAbort:
		return "abort"
	case EventDropped:
		return "dropped"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is something a Server reports to its owner.
type Event struct {
	Kind EventKind
	Rank int    // reporting rank, or -1
	Code int    // EventExit: the exit code
	Msg  string // EventAbort: the rank's message; EventDropped: the reason
}

// Server is the launcher's end of the bootstrap protocol (see package
// bootwire): it admits ranks, runs their all-gathers and reports EXIT, ABORT
// and dropped connections on Events.
//
// An event is delivered before the server acts on it: the EXITNOW that
// answers an EXIT or ABORT is sent only after the owner has received the
// Event, so the owner learns why a rank is about to exit before it sees the
// rank's exit status. The owner must therefore keep receiving from Events
// until it calls Close.
type Server struct {
	ln     net.Listener
	addr   string
	secret []byte // TCP: the job secret every connection proves (internal/auth)
	jobID  string
	size   int
	events chan Event
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
	uid    int

	exitMu sync.Mutex // serializes EXIT and ABORT handling (event, then state, then EXITNOW)

	mu      sync.Mutex
	closed  bool                     // guarded by mu
	conns   map[*serverConn]struct{} // every open connection; guarded by mu
	ranks   []*serverConn            // admitted connection of each rank, or nil; guarded by mu
	ending  bool                     // an EXIT was accepted; guarded by mu
	endCode int32                    // the code of that EXIT; guarded by mu
	gseq    uint32                   // sequence number of the all-gather being collected; guarded by mu
	gparts  [][]byte                 // contributions to all-gather gseq; guarded by mu
	gin     []bool                   // which ranks contributed to all-gather gseq; guarded by mu
	ghave   int                      // number of true entries in gin; guarded by mu
	st      []rankState              // what each rank told the server; guarded by mu
}

// serverConn is one accepted connection. rank is -1 until HELLO is accepted.
type serverConn struct {
	c    net.Conn
	wmu  sync.Mutex // serializes writes
	rank int
	pid  uint32
}

func (sc *serverConn) send(m bootwire.Msg) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	return bootwire.WriteMsg(sc.c, m)
}

func (sc *serverConn) sendRaw(b []byte) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	_, err := sc.c.Write(b)
	return err
}

// SocketName returns the bootstrap address of job jobID: "@gexgo-<jobID>",
// an abstract Unix socket.
func SocketName(jobID string) string { return "@gexgo-" + jobID }

// Listen starts the bootstrap server of a job of size ranks on
// SocketName(jobID).
func Listen(jobID string, size int) (*Server, error) { return ListenAt(SocketName(jobID), size) }

// ListenAt starts the bootstrap server on the Unix socket addr ("@name":
// abstract, else a path).
func ListenAt(addr string, size int) (*Server, error) {
	if size < 1 || size > MaxRanks {
		return nil, fmt.Errorf("launch: Listen: size %d is out of range [1, %d]", size, MaxRanks)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("launch: bootstrap socket: %w", err)
	}
	return newServer(ln, addr, size, nil, ""), nil
}

// ListenTCP starts the bootstrap server on TCP address hostport (host:0 for
// a port the kernel picks), for ranks on other hosts: every connection
// proves secret for jobID (internal/auth) before its HELLO. Addr is then
// "tcp:HOST:PORT".
func ListenTCP(hostport string, size int, secret []byte, jobID string) (*Server, error) {
	if size < 1 || size > MaxRanks {
		return nil, fmt.Errorf("launch: Listen: size %d is out of range [1, %d]", size, MaxRanks)
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("launch: bootstrap address %q: %w", hostport, err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return nil, fmt.Errorf("launch: bootstrap address %q: want this host's IP address on the job's network (not every interface)", hostport)
	}
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("launch: bootstrap socket: %w", err)
	}
	return newServer(ln, "tcp:"+ln.Addr().String(), size, secret, jobID), nil
}

func newServer(ln net.Listener, addr string, size int, secret []byte, jobID string) *Server {
	s := &Server{
		ln: ln, addr: addr, size: size, secret: secret, jobID: jobID,
		events: make(chan Event),
		done:   make(chan struct{}),
		uid:    os.Getuid(),
		conns:  make(map[*serverConn]struct{}),
		ranks:  make([]*serverConn, size),
		gseq:   1,
		gparts: make([][]byte, size),
		gin:    make([]bool, size),
		st:     make([]rankState, size),
	}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Addr is the address ranks connect to (the value of GEX_BOOT).
func (s *Server) Addr() string { return s.addr }

// Events delivers what the server reports. It is never closed; after Close
// nothing more is sent.
func (s *Server) Events() <-chan Event { return s.events }

// Close stops accepting, closes every connection and waits for the server's
// goroutines. Ranks still connected see their connection end.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for sc := range s.conns {
		sc.c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// emit delivers ev to the owner, or drops it once the server is closed.
func (s *Server) emit(ev Event) {
	select {
	case s.events <- ev:
	case <-s.done:
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			// Resource exhaustion (EMFILE) and the like: back off, keep serving.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		sc := &serverConn{c: c, rank: -1}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[sc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(sc)
	}
}

// peerUID returns the user id of the process at the other end of c.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

// serve runs one connection: the HELLO handshake, then the rank's frames.
func (s *Server) serve(sc *serverConn) {
	defer s.wg.Done()
	defer s.closeConn(sc)
	br := bufio.NewReader(sc.c)
	if !s.handshake(sc, br) {
		return
	}
	for {
		m, err := bootwire.ReadMsg(br)
		if err != nil {
			if errors.Is(err, bootwire.ErrMalformed) {
				s.drop(sc, err.Error())
			}
			return // EOF: the rank closed or exited
		}
		switch m := m.(type) {
		case *bootwire.Gather:
			if reason := s.gather(sc.rank, m); reason != "" {
				s.drop(sc, reason)
				return
			}
		case *bootwire.Exit:
			s.exit(sc, m.Code)
		case *bootwire.Abort:
			s.abort(sc, m.Msg)
		case *bootwire.Finalize:
			s.finalize(sc)
		case *bootwire.Progress:
			s.progress(sc.rank, m)
		default:
			s.drop(sc, fmt.Sprintf("unexpected %v frame", m.Type()))
			return
		}
	}
}

// closeConn closes sc and forgets it; a rank's slot is free again once its
// connection is closed. It may be called more than once.
func (s *Server) closeConn(sc *serverConn) {
	sc.c.Close()
	s.mu.Lock()
	delete(s.conns, sc)
	if sc.rank >= 0 && s.ranks[sc.rank] == sc {
		s.ranks[sc.rank] = nil
	}
	s.mu.Unlock()
}

// drop closes sc and reports why.
func (s *Server) drop(sc *serverConn, reason string) {
	s.closeConn(sc)
	who := fmt.Sprintf("pid %d", sc.pid)
	if sc.rank >= 0 {
		who = fmt.Sprintf("rank %d (pid %d)", sc.rank, sc.pid)
	} else if sc.pid == 0 {
		who = "a process"
	}
	s.emit(Event{Kind: EventDropped, Rank: sc.rank, Msg: fmt.Sprintf("dropped the bootstrap connection of %s: %s", who, reason)})
}

func (s *Server) reject(sc *serverConn, reason string) {
	sc.send(&bootwire.Reject{Msg: reason})
	s.drop(sc, reason)
}

// handshake reads and checks HELLO; it reports whether sc was admitted.
func (s *Server) handshake(sc *serverConn, br *bufio.Reader) bool {
	if uc, ok := sc.c.(*net.UnixConn); ok {
		if uid, err := peerUID(uc); err != nil || uid != s.uid {
			s.drop(sc, fmt.Sprintf("peer user id %d is not the launcher's %d (%v)", uid, s.uid, err))
			return false
		}
	} else {
		// A TCP connection (a rank on another host) proves the job secret
		// first; the launcher is "rank" size of size+1 in the handshake.
		if _, err := auth.Handshake(sc.c, &auth.Params{Secret: s.secret, JobID: s.jobID, Rank: s.size, Size: s.size + 1}, false, -1); err != nil {
			s.drop(sc, err.Error())
			return false
		}
	}
	sc.c.SetReadDeadline(time.Now().Add(HelloTimeout))
	m, err := bootwire.ReadMsg(br)
	sc.c.SetReadDeadline(time.Time{})
	if err != nil {
		select {
		case <-s.done:
		default:
			s.drop(sc, fmt.Sprintf("no HELLO: %v", err))
		}
		return false
	}
	h, ok := m.(*bootwire.Hello)
	if !ok {
		s.reject(sc, fmt.Sprintf("first frame is %v, want HELLO", m.Type()))
		return false
	}
	sc.pid = h.PID
	if h.Size != uint32(s.size) {
		s.reject(sc, fmt.Sprintf("HELLO says the job has %d ranks, the launcher started %d", h.Size, s.size))
		return false
	}
	if h.Rank >= uint32(s.size) {
		s.reject(sc, fmt.Sprintf("rank %d is out of range [0, %d)", h.Rank, s.size))
		return false
	}
	rank := int(h.Rank)
	s.mu.Lock()
	if old := s.ranks[rank]; old != nil {
		s.mu.Unlock()
		s.reject(sc, fmt.Sprintf("rank %d is already connected (pid %d)", rank, old.pid))
		return false
	}
	ending, code := s.ending, s.endCode
	if !ending {
		sc.rank = rank
		s.ranks[rank] = sc
		s.joined(rank)
	}
	s.mu.Unlock()
	if ending {
		sc.send(&bootwire.ExitNow{Code: code})
		return false
	}
	return sc.send(&bootwire.Welcome{}) == nil
}

// gather records rank's contribution and completes the round when every rank
// has contributed. It returns a reason to drop the connection, or "".
func (s *Server) gather(rank int, m *bootwire.Gather) string {
	s.mu.Lock()
	if m.Seq != s.gseq || s.gin[rank] {
		want := s.gseq
		s.mu.Unlock()
		return fmt.Sprintf("GATHER seq %d out of order (the launcher is collecting all-gather %d)", m.Seq, want)
	}
	s.gin[rank] = true
	s.gparts[rank] = m.Data
	s.ghave++
	if s.ghave < s.size {
		s.mu.Unlock()
		return ""
	}
	// Round complete: encode once, reset, send outside the lock. The next
	// round cannot complete before every rank has received this one.
	seq, parts := s.gseq, s.gparts
	s.gseq++
	s.gparts = make([][]byte, s.size)
	clear(s.gin)
	s.ghave = 0
	targets := s.connected()
	s.mu.Unlock()

	frame, err := bootwire.Append(nil, &bootwire.Gathered{Seq: seq, Parts: parts})
	if err != nil {
		total := 0
		for _, p := range parts {
			total += len(p)
		}
		fail := &bootwire.GatherFail{Seq: seq, Msg: fmt.Sprintf("the all-gather result of %d bytes from %d ranks exceeds the bootstrap frame limit of %d bytes", total, s.size, bootwire.MaxFrame)}
		for _, sc := range targets {
			sc.send(fail)
		}
		return ""
	}
	for _, sc := range targets {
		sc.sendRaw(frame) // a rank that is gone is noticed by its own goroutine
	}
	return ""
}

// connected returns the admitted connections; s.mu must be held.
func (s *Server) connected() []*serverConn {
	var out []*serverConn
	for _, sc := range s.ranks {
		if sc != nil {
			out = append(out, sc)
		}
	}
	return out
}

// exit handles EXIT{code} from sc: the first one ends the job.
func (s *Server) exit(sc *serverConn, code int32) {
	s.exitMu.Lock()
	defer s.exitMu.Unlock()
	s.mu.Lock()
	first := !s.ending
	s.mu.Unlock()
	if first {
		// The owner hears of it before any rank can exit because of it.
		s.emit(Event{Kind: EventExit, Rank: sc.rank, Code: int(code)})
	}
	s.mu.Lock()
	if first {
		s.ending, s.endCode = true, code
	}
	code = s.endCode
	targets := s.connected()
	s.mu.Unlock()
	if !first {
		sc.send(&bootwire.ExitNow{Code: code})
		return
	}
	for _, t := range targets {
		t.send(&bootwire.ExitNow{Code: code})
	}
}

// abort handles ABORT{msg} from sc: report, then acknowledge.
func (s *Server) abort(sc *serverConn, msg string) {
	s.exitMu.Lock()
	defer s.exitMu.Unlock()
	s.emit(Event{Kind: EventAbort, Rank: sc.rank, Msg: msg})
	sc.send(&bootwire.ExitNow{Code: 1})
}
