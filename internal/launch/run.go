package launch

import (
	"net"

	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gexgo/gexgo/internal/auth"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gexgo/gexgo/internal/boot"
	"golang.org/x/sys/unix"
)

// Bounds and defaults of a job.
const (
	// MaxRanks bounds Config.N: a local job of more ranks is a mistake.
	MaxRanks = 1 << 12
	// DefaultGrace is the time between SIGTERM and SIGKILL when Config.Grace is 0.
	DefaultGrace = time.Second
	// maxJobIDLen bounds Config.JobID (it becomes part of socket and file names).
	maxJobIDLen = 64
	// maxMsgLen bounds how much of an ABORT message is printed.
	maxMsgLen = 4096
)

// Exit codes of Run besides the ranks' own.
const (
	// CodeUsage is returned for an invalid Config.
	CodeUsage = 2
	// CodeTimeout is returned when Config.Timeout expired.
	CodeTimeout = 124
)

// Config describes a job.
type Config struct {
	// N is the number of ranks, in [1, MaxRanks].
	N int
	// Program is the executable every rank runs: a path to an existing
	// regular file, a command found in PATH (a name without '/'), or else a
	// Go package path, which is built first (see Build).
	Program string
	// Args are the program's arguments (without the program name).
	Args []string
	// Env is extra environment for every rank ("K=V"), applied over the
	// launcher's environment and under the GEX_* variables the launcher sets.
	Env []string
	// Label prefixes each line of rank output with "[R] ".
	Label bool
	// Timeout, if positive, limits the job's run time: on expiry the job is
	// stopped, Run prints "gexrun: job timed out after D; killing N ranks" and
	// returns CodeTimeout.
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL when stopping ranks, and
	// between EXITNOW and SIGKILL after a rank requested exit. 0 means
	// DefaultGrace.
	Grace time.Duration
	// PretendHosts, if K > 1, splits the ranks into K consecutive blocks
	// (rank r is on host r*K/N) and gives each rank GEX_HOST=<hostname>-h<k>,
	// so one machine looks like K hosts. 0 or 1: one host. At most N.
	PretendHosts int
	// JobID names the job (GEX_JOBID, the bootstrap socket, shared-memory
	// names): 1 to 64 characters of [A-Za-z0-9_-], unique among running
	// jobs. Empty means NewJobID().
	JobID string
	// Hosts, if set, starts the ranks on these hosts through SSH, in blocks
	// (rank r on Hosts[r*len(Hosts)/N]): the command run is SSH, the host,
	// then "env", the rank's GEX_* variables and Config.Env, the program and
	// its arguments (the program must exist at the same path there). The
	// bootstrap then listens on TCP at BootAddr and every connection proves
	// the job secret. With more than one distinct host the ranks get
	// GEX_CONDUIT=tcp unless Config.Env sets it.
	Hosts []string
	// SSH is the remote-shell command (default "ssh -o BatchMode=yes"; any
	// command taking a host and a command line, e.g. a local replacement).
	SSH []string
	// BootAddr is the IP address the TCP bootstrap listens on (default: the
	// address this host's name resolves to, else 127.0.0.1).
	BootAddr string
	// SocketDir, if set, puts the bootstrap socket in this directory
	// (gexgo-<jobid>.sock) instead of the abstract namespace, so that ranks
	// in other network namespaces (whose abstract sockets are their own)
	// reach it.
	SocketDir string
	// Wrap, if set, gives per rank a command prefix (argv[0] looked up in
	// PATH; e.g. "ip netns exec NS") run in place of the program, which
	// follows it, and extra environment ("K=V", applied last). Used to start
	// ranks in network namespaces.
	Wrap func(rank int) (prefix, env []string)
	// HangTimeout, if positive, ends a job in which no rank made
	// communication progress for this long: every rank reports its progress
	// (GEX_PROGRESS_MS), and on expiry Run prints what each rank waits on,
	// asks every rank for its goroutine stacks (SIGQUIT), and returns
	// CodeTimeout (see hang.go).
	HangTimeout time.Duration
	// Stdout and Stderr receive the ranks' standard output and error, and
	// Stderr the launcher's messages. nil means os.Stdout and os.Stderr. Writes
	// are serialized; the same writer may be given for both.
	Stdout, Stderr io.Writer

	// The mpirun habits (mpirun.go).
	// Stdin, if set, is copied to rank 0's standard input (also through
	// Hosts, after the job secret's line, which the rank consumes before
	// main runs); every other rank reads /dev/null, as under mpirun. nil:
	// every rank reads /dev/null. The copy ends at Stdin's EOF or when rank
	// 0 closes its input.
	Stdin io.Reader
	// OutputDir, if set, sends each rank's standard output and error to the
	// file OutputDir/rank.R (created, truncated) instead of Stdout and
	// Stderr; the launcher's own messages still go to Stderr. The directory
	// is created if needed.
	OutputDir string
	// BindCores places each rank on CPUs of its own, as mpirun's
	// "--bind-to core": the CPUs this launcher may run on are split into N
	// consecutive blocks (rank r gets block r; with more ranks than CPUs,
	// rank r gets CPU r mod C), and each rank's GOMAXPROCS is set to the
	// size of its block unless the environment (the launcher's or Env)
	// sets it. Ranks started through Hosts are not bound (their CPUs are
	// another machine's).
	BindCores bool
}

// NewJobID returns a fresh job identifier: the launcher's pid and 32 random
// bits, e.g. "4242-9f3a0c1d".
func NewJobID() string {
	var b [4]byte
	rand.Read(b[:])
	return strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

func validID(id string) bool {
	if id == "" || len(id) > maxJobIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !idChar(id[i]) {
			return false
		}
	}
	return true
}

func idChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// check validates cfg and fills in defaults.
func (cfg *Config) check() error {
	switch {
	case cfg.N < 1 || cfg.N > MaxRanks:
		return fmt.Errorf("Config.N = %d is out of range [1, %d]", cfg.N, MaxRanks)
	case cfg.Program == "":
		return errors.New("Config.Program is empty")
	case cfg.Timeout < 0:
		return fmt.Errorf("Config.Timeout = %v is negative", cfg.Timeout)
	case cfg.Grace < 0:
		return fmt.Errorf("Config.Grace = %v is negative", cfg.Grace)
	case cfg.HangTimeout < 0:
		return fmt.Errorf("Config.HangTimeout = %v is negative", cfg.HangTimeout)
	case cfg.PretendHosts < 0 || cfg.PretendHosts > cfg.N:
		return fmt.Errorf("Config.PretendHosts = %d is out of range [0, N = %d]", cfg.PretendHosts, cfg.N)
	case cfg.JobID != "" && !validID(cfg.JobID):
		return fmt.Errorf("Config.JobID = %q must be 1 to %d characters of [A-Za-z0-9_-]", cfg.JobID, maxJobIDLen)
	}
	for i, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("Config.Env[%d] = %q is not of the form K=V", i, kv)
		}
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.JobID == "" {
		cfg.JobID = NewJobID()
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	return nil
}

// endReason is why a job is ending.
type endReason int

const (
	running    endReason = iota
	endFailure           // a rank failed (non-zero exit, signal, or could not start)
	endAbort             // a rank sent ABORT
	endExit              // a rank sent EXIT
	endTimeout           // Config.Timeout expired
	endCancel            // the context was cancelled
	endSignal            // the launcher got SIGINT or SIGTERM
)

// Run starts the job described by cfg and waits for it. It returns the job's
// exit code and, when that is not 0, an error whose text is the one line Run
// printed to cfg.Stderr after "gexrun: ".
//
// The code is 0 if every rank exited 0; the code of the first EXIT request
// (gasnet_exit); the failing rank's exit status, or 1 if it was killed by a
// signal or aborted; CodeTimeout after Timeout; 128+signal after a forwarded
// SIGINT or SIGTERM if some rank then ended non-zero; 1 if ctx was cancelled or
// the job could not be started; CodeUsage for an invalid cfg.
//
// Every rank runs in its own process group with PR_SET_PDEATHSIG=SIGKILL and
// stdin from /dev/null (rank 0: Config.Stdin, if set). When a rank fails, Run prints exactly one line
// ("gexrun: rank R (pid P) exited with status S; terminating the job", or
// "... was killed by signal SIGNAME; ...", or "gexrun: rank R aborted: msg"),
// sends SIGTERM to the other ranks' process groups and SIGKILL after Grace.
// SIGINT and SIGTERM received by the launcher while Run is active are
// forwarded to every rank (a second one kills the job at once). Run returns
// only after every rank has been reaped and the rest of each rank's process
// group killed; then it kills any process still carrying the job's GEX_JOBID
// (a rank's descendant that left its process group; reported in one line) and
// removes any /dev/shm/gexgo-<jobid>* files.
func Run(ctx context.Context, cfg Config) (code int, err error) {
	if cerr := cfg.check(); cerr != nil {
		stderr := cfg.Stderr
		if stderr == nil {
			stderr = os.Stderr
		}
		fmt.Fprintf(stderr, "gexrun: %s\n", cerr)
		return CodeUsage, cerr
	}
	j := &job{cfg: cfg, out: &output{label: cfg.Label}}
	j.out.stdout, j.out.stderr = cfg.Stdout, cfg.Stderr
	return j.run(ctx)
}

// job is the state of one Run. All fields are used by Run's goroutine only,
// except as noted on rankProc and output.
type job struct {
	cfg Config
	out *output

	ranks []*rankProc // the started ranks, by rank
	alive int         // started ranks not yet reaped
	exits chan rankExit

	ending  endReason
	code    int
	summary string // the line printed when ending (without "gexrun: "), or ""
	sig     syscall.Signal
	sigs    int  // signals received
	sigBad  bool // endSignal: a rank ended non-zero after the signal
	graceC  <-chan time.Time
	grace   *time.Timer

	watch // ranks leaving early, hangs (leave.go, hang.go)
}

// finish records the first reason the job ends; it reports whether this was
// the first. line, if not empty, is printed.
func (j *job) finish(r endReason, code int, line string) bool {
	if j.ending != running {
		return false
	}
	j.ending, j.code, j.summary = r, code, line
	if line != "" {
		j.out.say(line)
	}
	return true
}

// fail ends a job that has not started any rank yet.
func (j *job) fail(line string) (int, error) {
	j.finish(endFailure, 1, line)
	return 1, errors.New(line)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func (j *job) run(ctx context.Context) (int, error) {
	cfg := &j.cfg
	if err := ctx.Err(); err != nil {
		return j.fail(fmt.Sprintf("job not started: %v", err))
	}
	exe, cleanup, err := resolveProgram(ctx, cfg.Program)
	if err != nil {
		return j.fail(err.Error())
	}
	defer cleanup()

	secret, err := auth.NewSecret()
	if err != nil {
		return j.fail(err.Error())
	}
	var srv *Server
	switch {
	case len(cfg.Hosts) > 0:
		srv, err = ListenTCP(net.JoinHostPort(bootAddr(cfg.BootAddr), "0"), cfg.N, secret, cfg.JobID)
	case cfg.SocketDir != "":
		addr := filepath.Join(cfg.SocketDir, "gexgo-"+cfg.JobID+".sock")
		defer os.Remove(addr)
		srv, err = ListenAt(addr, cfg.N)
	default:
		srv, err = Listen(cfg.JobID, cfg.N)
	}
	if err != nil {
		return j.fail(err.Error())
	}
	defer srv.Close()
	defer removeShm(cfg.JobID)
	j.startWatch(srv)

	envs, err := rankEnvs(cfg, srv.Addr(), secret)
	if err != nil {
		return j.fail(err.Error())
	}
	envs = j.progressEnv(envs)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return j.fail(err.Error())
	}

	sigC := make(chan os.Signal, 2)
	signal.Notify(sigC, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigC)

	sp := newSpawner()
	defer sp.stop()
	j.exits = make(chan rankExit, cfg.N)
	// Safety net: on any path out of here (a panic included), no rank is left
	// running or unreaped.
	defer func() {
		for j.alive > 0 {
			for _, r := range j.ranks {
				r.signal(syscall.SIGKILL)
			}
			<-j.exits
			j.alive--
		}
	}()

	argv := append([]string{exe}, cfg.Args...)
	for r := 0; r < cfg.N; r++ {
		rexe, rargv, renv := exe, argv, envs[r]
		stdin, err := j.localStdin(r, devnull)
		if err != nil {
			j.finish(endFailure, 1, fmt.Sprintf("cannot start rank %d: %v; terminating the job", r, err))
			break
		}
		if len(cfg.Hosts) > 0 {
			ssh := cfg.SSH
			if len(ssh) == 0 {
				ssh = []string{"ssh", "-o", "BatchMode=yes"}
			}
			p, err := exec.LookPath(ssh[0])
			if err != nil {
				j.finish(endFailure, 1, fmt.Sprintf("cannot start rank %d: %v; terminating the job", r, err))
				break
			}
			// The secret goes through the remote shell's standard input,
			// not on a command line other users of that host can read.
			remote := append([]string{"env"}, remoteEnv(cfg, envs[r])...)
			stdin, err = j.rankStdin(r, []byte(auth.EncodeSecret(secret)+"\n"), devnull)
			if err != nil {
				j.finish(endFailure, 1, fmt.Sprintf("cannot start rank %d: %v; terminating the job", r, err))
				break
			}
			rexe = p
			renv = withoutSecret(envs[r]) // the remote shell itself does not need it
			rargv = append(append(append([]string(nil), ssh...), hostOf(envs[r])), append(remote, argv...)...)
		}
		if cfg.Wrap != nil {
			prefix, extra := cfg.Wrap(r)
			if len(prefix) > 0 {
				p, err := exec.LookPath(prefix[0])
				if err != nil {
					j.finish(endFailure, 1, fmt.Sprintf("cannot start rank %d: %v; terminating the job", r, err))
					break
				}
				rexe, rargv = p, append(append([]string(nil), prefix...), argv...)
			}
			renv = dedupEnv(append(append([]string(nil), renv...), extra...))
		}
		rp, err := j.start(sp, r, rexe, rargv, renv, stdin)
		if stdin != devnull {
			stdin.Close()
		}
		if err != nil {
			j.finish(endFailure, 1, fmt.Sprintf("cannot start rank %d: %v; terminating the job", r, err))
			break
		}
		j.ranks = append(j.ranks, rp)
		j.alive++
		go rp.wait(j.exits)
	}
	devnull.Close()
	if j.ending != running {
		j.terminate(-1)
	}

	var timeoutC <-chan time.Time
	if cfg.Timeout > 0 {
		t := time.NewTimer(cfg.Timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	ctxDone := ctx.Done()
	for j.alive > 0 {
		select {
		case ex := <-j.exits:
			j.alive--
			j.rankExited(ex)
		case ev := <-srv.Events():
			j.event(ev)
		case <-timeoutC:
			timeoutC = nil
			if j.finish(endTimeout, CodeTimeout, fmt.Sprintf("job timed out after %v; killing %s", cfg.Timeout, plural(j.alive, "rank"))) {
				j.terminate(-1)
			}
		case <-ctxDone:
			ctxDone = nil
			if j.finish(endCancel, 1, fmt.Sprintf("job cancelled (%v); killing %s", ctx.Err(), plural(j.alive, "rank"))) {
				j.terminate(-1)
			} else {
				j.killAll()
			}
		case s := <-sigC:
			j.signal(s.(syscall.Signal))
		case <-j.graceC:
			j.graceC = nil
			j.killAll()
		case <-j.tickC:
			j.tick()
		}
	}
	if j.grace != nil {
		j.grace.Stop()
	}
	j.stopWatch()
	srv.Close()
	groups := make(map[int]bool, len(j.ranks))
	for _, r := range j.ranks {
		groups[r.pid] = true
	}
	if esc := killStragglers(cfg.JobID, groups); len(esc) > 0 {
		what := "1 process"
		if len(esc) > 1 {
			what = strconv.Itoa(len(esc)) + " processes"
		}
		j.out.say(fmt.Sprintf("killed %s that the job left behind outside its ranks' process groups: %v", what, esc))
	}
	j.out.wait(cfg.Grace)

	if j.ending == endSignal && j.sigBad {
		j.code = 128 + int(j.sig)
	} else if j.ending == endSignal {
		j.code = 0
	}
	if j.code == 0 {
		return 0, nil
	}
	if j.summary == "" {
		j.summary = fmt.Sprintf("job ended with exit code %d", j.code)
	}
	return j.code, errors.New(j.summary)
}

// start starts rank r with its output forwarded.
func (j *job) start(sp *spawner, r int, exe string, argv, env []string, stdin *os.File) (*rankProc, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	attr := &os.ProcAttr{
		Env:   env,
		Files: []*os.File{stdin, outW, errW},
		Sys: &syscall.SysProcAttr{
			Setpgid:   true,            // own process group: killable as a whole, no terminal signals
			Pdeathsig: syscall.SIGKILL, // die with the launcher (see spawner)
		},
	}
	var proc *os.Process
	sp.do(func() { proc, err = j.startProcess(r, exe, argv, attr) })
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	stdout, stderr := j.rankWriters(r)
	j.out.forward(outR, r, stdout)
	j.out.forward(errR, r, stderr)
	return &rankProc{rank: r, pid: proc.Pid, proc: proc}, nil
}

// rankExited handles the end of a rank.
func (j *job) rankExited(ex rankExit) {
	failed, how, code := ex.describe()
	j.exited[ex.r.rank] = true
	switch j.ending {
	case running:
		if j.leftEarly(ex, failed, how, code) {
			return
		}
		if failed {
			j.finish(endFailure, code, fmt.Sprintf("rank %d (pid %d) %s; terminating the job", ex.r.rank, ex.r.pid, how))
			j.terminate(-1)
		}
	case endSignal:
		if failed {
			j.sigBad = true
		}
	}
}

// event handles what the bootstrap server reports.
func (j *job) event(ev Event) {
	switch ev.Kind {
	case EventExit:
		line := ""
		if ev.Code != 0 {
			line = fmt.Sprintf("rank %d ended the job with exit code %d", ev.Rank, ev.Code)
		}
		if j.finish(endExit, ev.Code, line) {
			// The server now sends EXITNOW to every rank; whoever is still
			// there after Grace is killed.
			j.armGrace()
		}
	case EventAbort:
		if j.finish(endAbort, 1, fmt.Sprintf("rank %d aborted: %s", ev.Rank, oneLine(ev.Msg))) {
			j.terminate(ev.Rank) // the aborting rank exits by itself once acknowledged
		}
	case EventDropped:
		// Once the job is ending, ranks are killed wherever they are, some
		// between dialing the bootstrap socket and their HELLO: those drops
		// are expected and would only add lines after the one that says why
		// the job ended.
		if j.ending == running {
			j.out.say(oneLine(ev.Msg))
		}
	}
}

// signal handles SIGINT or SIGTERM sent to the launcher.
func (j *job) signal(s syscall.Signal) {
	if s == syscall.SIGQUIT && j.sigs == 0 {
		j.quit()
		return
	}
	j.sigs++
	if j.sigs > 1 {
		j.out.say(fmt.Sprintf("received %s again; killing %s", unix.SignalName(s), plural(j.alive, "rank")))
		j.killAll()
		return
	}
	if j.ending == running {
		j.ending, j.sig = endSignal, s
		j.summary = fmt.Sprintf("received %s; forwarded it to %s", unix.SignalName(s), plural(j.alive, "rank"))
	}
	j.out.say(fmt.Sprintf("received %s; forwarding it to %s", unix.SignalName(s), plural(j.alive, "rank")))
	for _, r := range j.ranks {
		r.signal(s)
	}
	j.armGrace()
}

// terminate sends SIGTERM to every rank but except and arms the SIGKILL timer.
func (j *job) terminate(except int) {
	for _, r := range j.ranks {
		if r.rank != except {
			r.signal(syscall.SIGTERM)
		}
	}
	j.armGrace()
}

func (j *job) armGrace() {
	if j.grace == nil {
		j.grace = time.NewTimer(j.cfg.Grace)
		j.graceC = j.grace.C
	}
}

func (j *job) killAll() {
	for _, r := range j.ranks {
		r.signal(syscall.SIGKILL)
	}
}

// oneLine makes a peer-supplied message printable on one line.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > maxMsgLen {
		cut := maxMsgLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// rankProc is a started rank. mu guards reaped and orders signals against
// reaping, so that a signal never reaches a recycled pid.
type rankProc struct {
	rank int
	pid  int
	proc *os.Process

	mu     sync.Mutex
	reaped bool
}

// signal sends sig to the rank's process group (and to the rank itself if
// it left that group), unless the rank has been reaped.
func (r *rankProc) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reaped {
		return
	}
	unix.Kill(-r.pid, sig)
	if pgid, err := unix.Getpgid(r.pid); err == nil && pgid != r.pid {
		unix.Kill(r.pid, sig)
	}
}

// rankExit is a reaped rank.
type rankExit struct {
	r     *rankProc
	state *os.ProcessState
	err   error
}

// describe says whether the rank failed, how it ended in words, and the job
// exit code that implies.
func (ex rankExit) describe() (failed bool, how string, code int) {
	if ex.err != nil {
		return true, fmt.Sprintf("could not be waited for (%v)", ex.err), 1
	}
	ws, ok := ex.state.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return !ex.state.Success(), ex.state.String(), 1
	case ws.Signaled():
		return true, "was killed by signal " + unix.SignalName(ws.Signal()), 1
	case ws.ExitStatus() != 0:
		return true, fmt.Sprintf("exited with status %d", ws.ExitStatus()), ws.ExitStatus()
	}
	return false, "exited with status 0", 0
}

// wait waits for the rank to exit, kills what is left of its process group,
// then reaps it and reports on exits.
func (r *rankProc) wait(exits chan<- rankExit) {
	var info unix.Siginfo
	for {
		// WNOWAIT: leave the zombie in place; it keeps its pid and process
		// group id from being reused while we kill the group.
		if err := unix.Waitid(unix.P_PID, r.pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			break
		}
	}
	unix.Kill(-r.pid, unix.SIGKILL) // the rank's own children, if any are left
	r.mu.Lock()
	st, err := r.proc.Wait()
	r.reaped = true
	r.mu.Unlock()
	exits <- rankExit{r: r, state: st, err: err}
}

// spawner forks every rank from one locked OS thread. PR_SET_PDEATHSIG fires
// when the thread that forked the child exits, not the process; an unlocked
// goroutine's thread may be retired by the runtime while the job runs. The
// locked thread lives until stop, and since its goroutine then returns without
// unlocking, the runtime terminates it, which kills any child still alive (by
// then every child has been reaped, so this is only a second guard).
type spawner struct {
	reqs chan func()
	done chan struct{}
}

func newSpawner() *spawner {
	sp := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		for {
			select {
			case f := <-sp.reqs:
				f()
			case <-sp.done:
				return
			}
		}
	}()
	return sp
}

// do runs f on the spawner's thread.
func (sp *spawner) do(f func()) {
	finished := make(chan struct{})
	sp.reqs <- func() { f(); close(finished) }
	<-finished
}

func (sp *spawner) stop() { close(sp.done) }

// rankEnvs returns the environment of every rank.
func rankEnvs(cfg *Config, addr string, secret []byte) ([][]string, error) {
	base := append(os.Environ(), cfg.Env...)
	hostname, err := os.Hostname()
	if err != nil || hostname == "" {
		hostname = "localhost"
	}
	hosts := make([]string, cfg.N)
	for r := range hosts {
		switch {
		case len(cfg.Hosts) > 0:
			hosts[r] = cfg.Hosts[r*len(cfg.Hosts)/cfg.N]
		case cfg.PretendHosts > 1:
			hosts[r] = fmt.Sprintf("%s-h%d", hostname, r*cfg.PretendHosts/cfg.N)
		default:
			hosts[r] = lookupEnv(base, boot.EnvHost, hostname)
		}
	}
	local := make(map[string]int)
	envs := make([][]string, cfg.N)
	for r := range envs {
		env := append(append([]string(nil), base...),
			boot.EnvRank+"="+strconv.Itoa(r),
			boot.EnvSize+"="+strconv.Itoa(cfg.N),
			boot.EnvLocalRank+"="+strconv.Itoa(local[hosts[r]]),
			boot.EnvBoot+"="+addr,
			boot.EnvJobID+"="+cfg.JobID,
			boot.EnvSecret+"="+auth.EncodeSecret(secret),
		)
		local[hosts[r]]++
		if cfg.PretendHosts > 1 || len(cfg.Hosts) > 0 {
			env = append(env, boot.EnvHost+"="+hosts[r])
		}
		if distinct(cfg.Hosts) > 1 && lookupEnv(cfg.Env, "GEX_CONDUIT", "") == "" {
			env = append(env, "GEX_CONDUIT=tcp")
		}
		envs[r] = dedupEnv(env)
	}
	return envs, nil
}

// bootAddr is the TCP bootstrap's address: addr, or this host's.
func bootAddr(addr string) string {
	if addr != "" {
		return addr
	}
	return boot.HostAddr()
}

// remoteEnv is what an SSH-started rank gets on its command line: the GEX_*
// and GASNET_* variables (forwardedToRemote) and Config.Env (the rest of the
// launcher's environment stays here), but not the secret (see rankStdin).
func remoteEnv(cfg *Config, env []string) []string {
	out := append([]string(nil), cfg.Env...)
	for _, kv := range env {
		if forwardedToRemote(kv) && !strings.HasPrefix(kv, boot.EnvSecret+"=") {
			out = append(out, kv)
		}
	}
	return dedupEnv(append(out, boot.EnvSecretStdin+"=1"))
}

// withoutSecret is env without the job secret.
func withoutSecret(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, boot.EnvSecret+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// hostOf is the GEX_HOST of a rank's environment.
func hostOf(env []string) string { return lookupEnv(env, boot.EnvHost, "") }

// distinct counts the different strings of xs.
func distinct(xs []string) int {
	seen := map[string]bool{}
	for _, x := range xs {
		seen[x] = true
	}
	return len(seen)
}

// lookupEnv returns the last value of key in env, or def.
func lookupEnv(env []string, key, def string) string {
	v := def
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key && val != "" {
			v = val
		}
	}
	return v
}

// dedupEnv keeps the last value of every key, at the position of its first
// occurrence.
func dedupEnv(env []string) []string {
	at := make(map[string]int, len(env))
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := at[k]; ok {
			out[i] = kv
			continue
		}
		at[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// resolveProgram turns Config.Program into an executable path.
func resolveProgram(ctx context.Context, prog string) (string, func(), error) {
	if st, err := os.Stat(prog); err == nil && st.Mode().IsRegular() {
		abs, err := filepath.Abs(prog)
		return abs, func() {}, err
	}
	if !strings.ContainsRune(prog, '/') {
		if p, err := exec.LookPath(prog); err == nil {
			return p, func() {}, nil
		}
	}
	exe, cleanup, err := Build(ctx, prog)
	if err != nil {
		return "", nil, fmt.Errorf("program %s is neither an executable file nor a command in PATH, and building it as a Go package failed: %w", prog, err)
	}
	return exe, cleanup, nil
}

// removeShm removes /dev/shm/gexgo-<jobID> and /dev/shm/gexgo-<jobID>-* and
// gexgo-<jobID>.*. (A user-chosen job id that extends another running job's
// id with "-..." could match that job's files; generated ids cannot.)
func removeShm(jobID string) {
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		return
	}
	prefix := "gexgo-" + jobID
	for _, e := range ents {
		name := e.Name()
		if name == prefix || strings.HasPrefix(name, prefix+"-") || strings.HasPrefix(name, prefix+".") {
			os.Remove(filepath.Join("/dev/shm", name))
		}
	}
}
