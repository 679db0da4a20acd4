package boot

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Environment variables of the PMI process managers (MPICH hydra, Slurm's
// srun --mpi=pmi2, and others speaking the MPICH "simple" PMI wire protocol).
const (
	EnvPMIFD      = "PMI_FD"      // inherited file descriptor connected to the process manager
	EnvPMIPort    = "PMI_PORT"    // host:port of the process manager (when PMI_FD is not set)
	EnvPMIID      = "PMI_ID"      // this process's id for PMI_PORT ("initack pmiid")
	EnvPMIRank    = "PMI_RANK"    // this process's rank (with PMI_FD)
	EnvPMISize    = "PMI_SIZE"    // number of ranks (with PMI_FD)
	EnvPMIVersion = "PMI_VERSION" // "2" selects the PMI-2 wire protocol; anything else PMI-1
	EnvGexPMI     = "GEX_PMI"     // "1" or "2": override PMI_VERSION
)

// PMI timeouts. A request is any PMI exchange other than a barrier or fence,
// which waits as long as the slowest rank and has no deadline by default.
var (
	PMIRequestTimeout = 2 * time.Minute
	PMIBarrierTimeout = time.Duration(0)
)

// PMIFromEnv connects to the PMI process manager named by the environment
// (PMI_FD, else PMI_PORT) and returns its Bootstrap. The protocol is PMI-2
// when GEX_PMI=2, or PMI_VERSION=2 and GEX_PMI is unset; PMI-1 otherwise
// (hydra and Slurm's pmi2 plugin serve both on the same socket).
//
// Rank and size come from the process manager (PMI_RANK/PMI_SIZE with
// PMI_FD, the initack exchange with PMI_PORT, fullinit with PMI-2); if the
// environment also carries a launcher's rank and size (LauncherEnv) they
// must agree. JobID is the PMI kvsname (PMI-2: jobid) with every byte
// outside [A-Za-z0-9_-] replaced by '_', prefixed "pmi-" and at most 64
// bytes.
//
// Exit runs the OnExit hooks, then sends finalize (code 0) or abort with the
// code (code != 0: the process manager then ends the other ranks, as
// gasnet_exit's "every rank ends" requires; PMI has no "exit the job with
// code" request), then exits. Abort prints "gexgo: rank R aborted: msg" to
// stderr, runs the hooks, sends abort and exits 1. Close sends finalize
// (best effort) and closes the connection.
func PMIFromEnv() (Bootstrap, error) {
	o := pmiOpts{
		exit:           os.Exit,
		stderr:         os.Stderr,
		host:           HostIdentity(),
		reqTimeout:     PMIRequestTimeout,
		barrierTimeout: PMIBarrierTimeout,
		version:        1,
		rank:           -1,
		size:           -1,
		id:             -1,
	}
	switch v := os.Getenv(EnvGexPMI); v {
	case "1", "2":
		o.version = int(v[0] - '0')
	case "":
		if os.Getenv(EnvPMIVersion) == "2" {
			o.version = 2
		}
	default:
		return nil, fmt.Errorf("boot: environment variable %s=%q must be 1 or 2", EnvGexPMI, v)
	}
	var conn pmiConn
	if fdStr := os.Getenv(EnvPMIFD); fdStr != "" {
		fd, err := strconv.Atoi(fdStr)
		if err != nil || fd < 0 {
			return nil, fmt.Errorf("boot: environment variable %s=%q is not a file descriptor", EnvPMIFD, fdStr)
		}
		if o.rank, err = envInt(EnvPMIRank); err != nil {
			return nil, err
		}
		if o.size, err = envInt(EnvPMISize); err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(fd), "PMI_FD")
		if f == nil {
			return nil, fmt.Errorf("boot: %s=%d is not an open file descriptor", EnvPMIFD, fd)
		}
		if c, err := net.FileConn(f); err == nil {
			f.Close() // FileConn dup'ed it
			conn = c
		} else {
			conn = f
		}
		os.Unsetenv(EnvPMIFD) // not for our children
	} else if port := os.Getenv(EnvPMIPort); port != "" {
		id, err := envInt(EnvPMIID)
		if err != nil {
			return nil, err
		}
		o.id = id
		c, err := net.DialTimeout("tcp", port, o.reqTimeout)
		if err != nil {
			return nil, fmt.Errorf("boot: cannot connect to the PMI server at %s=%q: %w", EnvPMIPort, port, err)
		}
		conn = c
	} else {
		return nil, fmt.Errorf("boot: neither %s nor %s is set: not started by a PMI process manager", EnvPMIFD, EnvPMIPort)
	}
	b, err := newPMI(conn, o)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if r, s, _, ok := LauncherEnv(); ok && (r != b.rank || s != b.size) {
		b.conn.Close()
		return nil, fmt.Errorf("boot: PMI says rank %d of %d but the launcher environment says rank %d of %d", b.rank, b.size, r, s)
	}
	b.holder = startHolder(b.conn) // pmihold.go
	return b, nil
}

// pmiConn is the connection to the process manager: a net.Conn, or an
// *os.File for a PMI_FD that is not a socket.
type pmiConn interface {
	io.ReadWriteCloser
	SetDeadline(time.Time) error
}

// pmiOpts are the inputs of newPMI; tests replace the process-level effects.
type pmiOpts struct {
	version        int // 1 or 2
	rank, size     int // from PMI_RANK/PMI_SIZE, -1 if unknown (PMI_PORT)
	id             int // PMI_ID for PMI_PORT, -1 if not used
	host           string
	exit           func(int)
	stderr         io.Writer
	reqTimeout     time.Duration // 0: none
	barrierTimeout time.Duration // 0: none
}

// pmiBoot is the Bootstrap over a PMI connection. Requests and replies are
// strictly alternating on conn; convMu serialises whole conversations
// (AllGather, Barrier, finalize). wmu serialises writes so that Abort may send
// from any goroutine while a conversation waits for its reply.
type pmiBoot struct {
	rank, size int
	jobID      string
	host       string
	kvsname    string
	vallenMax  int
	keylenMax  int
	version    int
	o          pmiOpts

	conn pmiConn
	br   *bufio.Reader

	convMu sync.Mutex
	seq    int // all-gathers done; guarded by convMu

	wmu sync.Mutex

	mu      sync.Mutex
	hooks   []func() // guarded by mu
	closed  bool     // guarded by mu
	endOnce sync.Once

	holder *pmiHolder // keeps the connection open after an early end (pmihold.go)
}

// IsPMI reports whether b is a PMI process manager's bootstrap: no launcher
// of gexgo's sees its ranks' processes, so the ranks watch each other
// (smp conduit).
func IsPMI(b Bootstrap) bool {
	_, ok := b.(*pmiBoot)
	return ok
}

func newPMI(conn pmiConn, o pmiOpts) (*pmiBoot, error) {
	b := &pmiBoot{
		rank: o.rank, size: o.size, host: o.host, version: o.version, o: o,
		conn: conn, br: bufio.NewReaderSize(conn, 4096),
	}
	if err := b.init(); err != nil {
		return nil, fmt.Errorf("boot: PMI-%d: %w", o.version, err)
	}
	switch {
	case b.size < 1 || uint64(b.size) > 1<<31:
		return nil, fmt.Errorf("boot: PMI-%d: size %d is out of range [1, %d]", o.version, b.size, 1<<31)
	case b.rank < 0 || b.rank >= b.size:
		return nil, fmt.Errorf("boot: PMI-%d: rank %d is out of range [0, %d)", o.version, b.rank, b.size)
	}
	b.jobID = pmiJobID(b.kvsname)
	return b, nil
}

// pmiJobID derives a JobID from a PMI kvsname or jobid.
func pmiJobID(kvs string) string {
	id := []byte("pmi-" + kvs)
	for i, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			id[i] = '_'
		}
	}
	if len(id) > maxJobIDLen {
		id = id[len(id)-maxJobIDLen:] // the tail is the distinguishing part (hydra: kvs_PID_N)
	}
	return string(id)
}

// init performs the PMI-1 or PMI-2 startup exchanges.
func (b *pmiBoot) init() error {
	if b.o.id >= 0 && b.version == 1 {
		// simple_pmi.c PMII_Set_from_port: "cmd=initack pmiid=ID", reply
		// "cmd=initack", then "cmd=set size=N", "cmd=set rank=R", "cmd=set debug=D".
		if _, err := b.request(b.o.reqTimeout, "initack", []pmiAttr{kv("pmiid", strconv.Itoa(b.o.id))}, "initack"); err != nil {
			return err
		}
		for _, want := range []string{"size", "rank", "debug"} {
			m, err := b.read(b.o.reqTimeout)
			if err != nil {
				return fmt.Errorf("initack: reading \"cmd=set %s=...\": %w", want, err)
			}
			v, ok := m.Get(want)
			if m.Cmd != "set" || !ok {
				return fmt.Errorf("initack: expected \"cmd=set %s=...\", got %q", want, m.String())
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("initack: %s=%q is not an integer", want, v)
			}
			switch want {
			case "size":
				b.size = n
			case "rank":
				b.rank = n
			}
		}
	}
	// INIT is in PMI-1 wire format for both versions (pmi-2.0.txt "INIT").
	ver := strconv.Itoa(b.version)
	sub := "1"
	if b.version == 2 {
		sub = "0"
	}
	m, err := b.exchange(1, b.o.reqTimeout, "init", []pmiAttr{kv("pmi_version", ver), kv("pmi_subversion", sub)}, "response_to_init")
	if err != nil {
		return err
	}
	if v, ok := m.Get("pmi_version"); ok && v != ver {
		return fmt.Errorf("init: the server answered pmi_version=%s, want %s", v, ver)
	}
	if b.version == 2 {
		return b.init2()
	}
	m, err = b.request(b.o.reqTimeout, "get_maxes", nil, "maxes")
	if err != nil {
		return err
	}
	if b.vallenMax, err = intAttr(&m, "vallen_max"); err != nil {
		return err
	}
	if b.keylenMax, err = intAttr(&m, "keylen_max"); err != nil {
		return err
	}
	if b.vallenMax < 32 || b.keylenMax < 16 {
		return fmt.Errorf("maxes: vallen_max=%d keylen_max=%d are below the minimum of 32 and 16", b.vallenMax, b.keylenMax)
	}
	if _, err := b.request(b.o.reqTimeout, "get_appnum", nil, "appnum"); err != nil {
		return err
	}
	m, err = b.request(b.o.reqTimeout, "get_my_kvsname", nil, "my_kvsname")
	if err != nil {
		return err
	}
	var ok bool
	if b.kvsname, ok = m.Get("kvsname"); !ok || b.kvsname == "" {
		return fmt.Errorf("get_my_kvsname: reply %q has no kvsname", m.String())
	}
	return nil
}

// init2 is PMI-2 FULLINIT and KVSNAME (pmi-2.0.txt).
func (b *pmiBoot) init2() error {
	pmiid := b.o.id
	if pmiid < 0 {
		pmiid = b.rank
	}
	m, err := b.request(b.o.reqTimeout, "fullinit", []pmiAttr{kv("pmirank", strconv.Itoa(pmiid))}, "fullinit-response")
	if err != nil {
		return err
	}
	if b.rank, err = intAttr(&m, "rank"); err != nil {
		return err
	}
	if b.size, err = intAttr(&m, "size"); err != nil {
		return err
	}
	// PMI2_MAX_VALLEN (pmi2.h); PMI-2 has no get_maxes.
	b.vallenMax, b.keylenMax = 1024, 64
	m, err = b.request(b.o.reqTimeout, "job-getid", nil, "job-getid-response")
	if err != nil {
		return err
	}
	var ok bool
	if b.kvsname, ok = m.Get("jobid"); !ok || b.kvsname == "" {
		return fmt.Errorf("job-getid: reply %q has no jobid", m.String())
	}
	return nil
}

func intAttr(m *pmiMsg, key string) (int, error) {
	v, ok := m.Get(key)
	if !ok {
		return 0, fmt.Errorf("%s: reply %q has no %s", m.Cmd, m.String(), key)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %s=%q is not an integer", m.Cmd, key, v)
	}
	return n, nil
}

// send writes one message in the given wire version.
func (b *pmiBoot) send(version int, cmd string, attrs []pmiAttr) error {
	var buf []byte
	if version == 1 {
		buf = appendPMI1(nil, cmd, attrs...)
	} else {
		buf = appendPMI2(nil, cmd, attrs...)
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	_, err := b.conn.Write(buf)
	return err
}

// read reads one reply in the session's wire version; PMI-2 servers may
// also answer in PMI-1 form (MPICH's PMIU_cmd_read accepts both).
func (b *pmiBoot) read(timeout time.Duration) (pmiMsg, error) {
	return b.readVersion(b.version, timeout)
}

func (b *pmiBoot) readVersion(version int, timeout time.Duration) (pmiMsg, error) {
	if timeout > 0 {
		b.conn.SetDeadline(time.Now().Add(timeout))
		defer b.conn.SetDeadline(time.Time{})
	}
	if version == 2 {
		if p, err := b.br.Peek(4); err == nil && string(p) == "cmd=" {
			return readPMI1(b.br)
		}
		return readPMI2(b.br)
	}
	return readPMI1(b.br)
}

// request sends cmd in the session's wire version and reads the reply,
// which must be named want and carry no non-zero rc.
func (b *pmiBoot) request(timeout time.Duration, cmd string, attrs []pmiAttr, want string) (pmiMsg, error) {
	return b.exchange(b.version, timeout, cmd, attrs, want)
}

func (b *pmiBoot) exchange(version int, timeout time.Duration, cmd string, attrs []pmiAttr, want string) (pmiMsg, error) {
	if err := b.send(version, cmd, attrs); err != nil {
		return pmiMsg{}, fmt.Errorf("%s: sending to the PMI server: %w", cmd, err)
	}
	m, err := b.readVersion(version, timeout)
	if err != nil {
		if b.isClosed() {
			return pmiMsg{}, ErrClosed
		}
		return pmiMsg{}, fmt.Errorf("%s: reading the reply from the PMI server: %w", cmd, err)
	}
	if m.Cmd != want {
		return pmiMsg{}, fmt.Errorf("%s: expected reply cmd=%s, got %q", cmd, want, m.String())
	}
	if rc, ok := m.Get("rc"); ok && rc != "0" {
		msg, _ := m.Get("msg")
		if msg == "" {
			msg, _ = m.Get("errmsg")
		}
		return pmiMsg{}, fmt.Errorf("%s: the PMI server answered rc=%s (%s)", cmd, rc, msg)
	}
	return m, nil
}

func (b *pmiBoot) Rank() int     { return b.rank }
func (b *pmiBoot) Size() int     { return b.size }
func (b *pmiBoot) JobID() string { return b.jobID }
func (b *pmiBoot) Host() string  { return b.host }

func (b *pmiBoot) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// gatherKey names chunk i of rank r's contribution to all-gather seq.
func gatherKey(seq, r, i int) string {
	k := "gex-" + strconv.Itoa(seq) + "-" + strconv.Itoa(r)
	if i > 0 {
		k += "-" + strconv.Itoa(i)
	}
	return k
}

// AllGather puts this rank's contribution into the PMI key-value space,
// fences (PMI-1 barrier_in/barrier_out, PMI-2 kvs-fence) and gets every
// other rank's. A contribution is base64 (RFC 4648 §5, unpadded: the value
// alphabet is [A-Za-z0-9_-]) split into chunks of at most vallen_max-1
// bytes: key gex-SEQ-RANK holds "NCHUNKS." followed by the first chunk, keys
// gex-SEQ-RANK-I (I >= 1) the others.
func (b *pmiBoot) AllGather(mine []byte) ([][]byte, error) {
	b.convMu.Lock()
	defer b.convMu.Unlock()
	if b.isClosed() {
		return nil, ErrClosed
	}
	b.seq++
	seq := b.seq
	chunks := pmiChunks(base64.RawURLEncoding.EncodeToString(mine), b.vallenMax)
	if k := gatherKey(seq, b.size-1, len(chunks)); len(k) >= b.keylenMax {
		return nil, fmt.Errorf("boot: rank %d: AllGather: key %q is longer than the PMI server's keylen_max %d", b.rank, k, b.keylenMax)
	}
	for i, c := range chunks {
		if err := b.put(gatherKey(seq, b.rank, i), c); err != nil {
			return nil, b.collErr("all-gather", seq, err)
		}
	}
	if err := b.fence(); err != nil {
		return nil, b.collErr("all-gather", seq, err)
	}
	out := make([][]byte, b.size)
	for r := range out {
		if r == b.rank {
			out[r] = append([]byte{}, mine...)
			continue
		}
		v, err := b.get(r, gatherKey(seq, r, 0))
		if err != nil {
			return nil, b.collErr("all-gather", seq, err)
		}
		nStr, first, ok := strings.Cut(v, ".")
		n, err := strconv.Atoi(nStr)
		if !ok || err != nil || n < 1 || n > pmiMaxLine {
			return nil, b.collErr("all-gather", seq, fmt.Errorf("value of key %s is %q, want NCHUNKS.DATA", gatherKey(seq, r, 0), clip(v)))
		}
		var enc strings.Builder
		enc.WriteString(first)
		for i := 1; i < n; i++ {
			v, err := b.get(r, gatherKey(seq, r, i))
			if err != nil {
				return nil, b.collErr("all-gather", seq, err)
			}
			enc.WriteString(v)
		}
		d, err := base64.RawURLEncoding.DecodeString(enc.String())
		if err != nil {
			return nil, b.collErr("all-gather", seq, fmt.Errorf("rank %d's contribution: %w", r, err))
		}
		out[r] = d
	}
	return out, nil
}

// pmiChunks splits the encoded contribution into values of at most
// vallenMax-1 bytes (MPICH's limits count the C string's NUL), the first
// prefixed with the number of chunks.
func pmiChunks(enc string, vallenMax int) []string {
	room := vallenMax - 1
	firstRoom := room - 12 // "NCHUNKS." with up to 11 digits
	n := 1
	if len(enc) > firstRoom {
		n += (len(enc) - firstRoom + room - 1) / room
	}
	chunks := make([]string, 0, n)
	f := min(firstRoom, len(enc))
	chunks = append(chunks, strconv.Itoa(n)+"."+enc[:f])
	for rest := enc[f:]; len(rest) > 0; {
		c := min(room, len(rest))
		chunks = append(chunks, rest[:c])
		rest = rest[c:]
	}
	return chunks
}

func (b *pmiBoot) collErr(what string, seq int, err error) error {
	if errors.Is(err, ErrClosed) || b.isClosed() {
		return ErrClosed
	}
	return fmt.Errorf("boot: rank %d: %s %d over PMI-%d: %w", b.rank, what, seq, b.version, err)
}

func (b *pmiBoot) put(key, value string) error {
	if b.version == 2 {
		_, err := b.request(b.o.reqTimeout, "kvs-put", []pmiAttr{kv("key", key), kv("value", value)}, "kvs-put-response")
		return err
	}
	_, err := b.request(b.o.reqTimeout, "put", []pmiAttr{kv("kvsname", b.kvsname), kv("key", key), kv("value", value)}, "put_result")
	return err
}

func (b *pmiBoot) get(src int, key string) (string, error) {
	if b.version == 2 {
		m, err := b.request(b.o.reqTimeout, "kvs-get", []pmiAttr{kv("jobid", b.kvsname), kv("srcid", strconv.Itoa(src)), kv("key", key)}, "kvs-get-response")
		if err != nil {
			return "", err
		}
		if f, _ := m.Get("found"); f != "TRUE" {
			return "", fmt.Errorf("kvs-get: key %s not found (reply %q)", key, m.String())
		}
		v, _ := m.Get("value")
		return v, nil
	}
	m, err := b.request(b.o.reqTimeout, "get", []pmiAttr{kv("kvsname", b.kvsname), kv("key", key)}, "get_result")
	if err != nil {
		return "", err
	}
	if f, ok := m.Get("found"); ok && f != "TRUE" && f != "true" {
		return "", fmt.Errorf("get: key %s not found (reply %q)", key, m.String())
	}
	v, ok := m.Get("value")
	if !ok {
		return "", fmt.Errorf("get: reply %q for key %s has no value", m.String(), key)
	}
	return v, nil
}

// fence is PMI-1 barrier_in/barrier_out (which also commits the puts) or
// PMI-2 kvs-fence.
func (b *pmiBoot) fence() error {
	if b.version == 2 {
		_, err := b.request(b.o.barrierTimeout, "kvs-fence", nil, "kvs-fence-response")
		return err
	}
	_, err := b.request(b.o.barrierTimeout, "barrier_in", nil, "barrier_out")
	return err
}

func (b *pmiBoot) Barrier() error {
	if b.version == 2 {
		// MPICH hydra 4.0 answers a PMI-2 kvs-fence of a rank that put
		// nothing since the last one at once, without waiting for the
		// other ranks: an all-gather (a put, the fence, a get per rank,
		// which waits for the key) is a barrier there.
		_, err := b.AllGather(nil)
		return err
	}
	b.convMu.Lock()
	defer b.convMu.Unlock()
	if b.isClosed() {
		return ErrClosed
	}
	b.seq++
	if err := b.fence(); err != nil {
		return b.collErr("barrier", b.seq, err)
	}
	return nil
}

func (b *pmiBoot) OnExit(fn func()) {
	b.mu.Lock()
	b.hooks = append(b.hooks, fn)
	b.mu.Unlock()
}

func (b *pmiBoot) Exit(code int) {
	b.end(code, "")
}

func (b *pmiBoot) Abort(msg string) {
	fmt.Fprintf(b.o.stderr, "gexgo: rank %d aborted: %s\n", b.rank, msg)
	b.end(1, msg)
}

// end runs the hooks once, tells the process manager (finalize for code 0,
// abort otherwise) and exits. It does not return: if the exit function
// returns (tests), the calling goroutine ends.
func (b *pmiBoot) end(code int, msg string) {
	b.finish(code, func() {
		if code == 0 {
			b.finalize()
		} else {
			b.sendAbort(code, msg)
		}
	})
}

// finish runs the hooks once, lets the holder go, runs tell (what the
// process manager is told; nil: nothing) and exits with code. It does not
// return.
func (b *pmiBoot) finish(code int, tell func()) {
	b.endOnce.Do(func() {
		b.mu.Lock()
		hooks := b.hooks
		b.hooks = nil
		b.mu.Unlock()
		runHooks(hooks, b.rank, b.o.stderr)
		b.holder.release()
		if tell != nil {
			tell()
		}
		b.exit(code)
	})
	runtime.Goexit()
}

func (b *pmiBoot) exit(code int) {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.conn.Close()
	b.o.exit(code)
}

// sendAbort sends ABORT (no reply is defined). PMI-1 omits the message (older
// hydra cannot parse an escaped one; this process printed it already).
func (b *pmiBoot) sendAbort(code int, msg string) {
	b.conn.SetDeadline(time.Now().Add(ExitAckTimeout))
	if b.version == 2 {
		msg = strings.Map(func(r rune) rune {
			if r < ' ' || r == ';' || r > '~' {
				return ' '
			}
			return r
		}, msg)
		if msg == "" {
			msg = "exit"
		}
		// pmi-2.0.txt ABORT: exitcode, message; the PMI-2 design's isworldabort, msg.
		b.send(2, "abort", []pmiAttr{kv("isworldabort", "TRUE"), kv("exitcode", strconv.Itoa(code)), kv("message", msg), kv("msg", msg)})
		return
	}
	b.send(1, "abort", []pmiAttr{kv("exitcode", strconv.Itoa(code))})
}

// finalize sends FINALIZE and waits up to ExitAckTimeout for its reply,
// unless a conversation is in progress on another goroutine.
func (b *pmiBoot) finalize() {
	if !b.convMu.TryLock() {
		return
	}
	defer b.convMu.Unlock()
	if b.isClosed() {
		return
	}
	want := "finalize_ack"
	if b.version == 2 {
		want = "finalize-response"
	}
	b.request(ExitAckTimeout, "finalize", nil, want)
}

func (b *pmiBoot) Close() error {
	if b.isClosed() {
		return nil
	}
	b.holder.release()
	b.finalize()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	return b.conn.Close()
}
