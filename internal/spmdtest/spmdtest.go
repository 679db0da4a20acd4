// Package spmdtest runs multi-rank tests inside "go test": the test binary
// re-executes itself as the ranks of a real job started by package launch.
//
// A test calls Run with the rank count and a body:
//
//	func TestPutGet(t *testing.T) {
//		spmdtest.Run(t, 4, func(t *testing.T) {
//			b, err := boot.FromEnv() // or gex.ClientInit(...)
//			...
//		})
//	}
//
// In the "go test" process (the parent), Run starts n processes of the test
// binary with -test.run anchored to exactly this test (subtest names
// included) and waits for the job. In each of those processes (a rank), the
// same test function runs again and its Run call runs body(t) instead; a
// failed body fails the rank's test, so the rank exits non-zero, so the
// parent's test fails with every rank's output, labelled "[R] ".
//
// Code in the test function outside body runs in the parent and in every rank;
// use InRank to tell them apart. Several Run calls in one test function are
// told apart by their order, so a test must make the same sequence of Run
// calls in the parent and in the ranks (do not make Run conditional on
// InRank).
//
// After the job the parent checks that no process of the job is left (any
// process whose environment holds the job's GEX_JOBID, where readable) and
// that no /dev/shm/gexgo-<jobid>* file exists; leftovers fail the test and are
// killed or removed.
package spmdtest

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/launch"
)

// Environment variables that make a test binary process a rank of Run.
const (
	// EnvTest holds the full name (t.Name()) of the test a rank runs.
	EnvTest = "GEX_SPMDTEST"
	// EnvCall holds which Run call of that test (0, 1, ...) the job is for.
	EnvCall = "GEX_SPMDTEST_CALL"
	// EnvMark holds a directory in which each rank creates a file named by
	// its rank when it starts the body, so the parent can tell a rank that ran
	// the body from one whose -test.run selected nothing.
	EnvMark = "GEX_SPMDTEST_MARK"
)

// DefaultTimeout is the job time limit unless Timeout says otherwise.
const DefaultTimeout = 60 * time.Second

// MaxRanks bounds n: the tests run on small machines.
const MaxRanks = 16

// options are the settings of one Run.
type options struct {
	env          []string
	timeout      time.Duration
	pretendHosts int
	code         int
	output       *string
	launch       []func(*launch.Config)
	endsEarly    bool
}

// Option changes how Run starts and judges a job.
type Option func(*options)

// Env adds "K=V" entries to the ranks' environment.
func Env(kv ...string) Option {
	return func(o *options) { o.env = append(o.env, kv...) }
}

// Timeout sets the job's time limit (default DefaultTimeout).
func Timeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// PretendHosts splits the ranks into k pretend hosts (launch.Config.PretendHosts).
func PretendHosts(k int) Option {
	return func(o *options) { o.pretendHosts = k }
}

// ExpectExit makes code the job's expected exit code (default 0), for tests
// of failure paths. With a non-zero code the parent does not check that every
// rank ran the body.
func ExpectExit(code int) Option {
	return func(o *options) { o.code = code }
}

// EndsEarly says the job is meant to end before every rank has finished the
// body (a test of a rank leaving the job, whose exit code may still be 0):
// the parent then checks only that every rank started it.
func EndsEarly() Option {
	return func(o *options) { o.endsEarly = true }
}

// Output stores the job's combined output (ranks' lines labelled "[R] ",
// launcher lines "gexrun: ...") in *dst once the job has ended.
func Output(dst *string) Option {
	return func(o *options) { o.output = dst }
}

// Launch lets f adjust the job's launch.Config before it starts (for
// example Wrap and SocketDir, to start ranks in network namespaces).
func Launch(f func(*launch.Config)) Option {
	return func(o *options) { o.launch = append(o.launch, f) }
}

// InRank reports whether this process is a rank started by Run.
func InRank() bool { return os.Getenv(EnvTest) != "" }

// calls counts the Run calls of each running test, so that the k-th call in a
// rank matches the k-th call in the parent. It is package-level because
// testing.T has no per-test storage; entries are removed by t.Cleanup.
var calls = struct {
	sync.Mutex
	m map[*testing.T]int
}{m: make(map[*testing.T]int)}

func nextCall(t *testing.T) int {
	calls.Lock()
	defer calls.Unlock()
	k, seen := calls.m[t]
	calls.m[t] = k + 1
	if !seen {
		t.Cleanup(func() {
			calls.Lock()
			delete(calls.m, t)
			calls.Unlock()
		})
	}
	return k
}

// Run runs body as an n-rank job of real processes (see the package
// documentation). In the parent it fails t, with the ranks' combined output,
// if the job's exit code is not the expected one (0 unless ExpectExit), if a
// rank did not run body, or if the job left a process or /dev/shm file behind.
// In a rank it calls body(t) if this is the Run call the job was started for,
// and returns at once otherwise.
func Run(t *testing.T, n int, body func(t *testing.T), opts ...Option) {
	t.Helper()
	call := nextCall(t)
	if InRank() {
		if os.Getenv(EnvTest) != t.Name() || os.Getenv(EnvCall) != strconv.Itoa(call) {
			return // another Run call of the selected test
		}
		if dir := os.Getenv(EnvMark); dir != "" {
			if err := os.WriteFile(filepath.Join(dir, os.Getenv(boot.EnvRank)), nil, 0o600); err != nil {
				t.Fatalf("spmdtest: marking the start of the body: %v", err)
			}
		}
		body(t)
		if dir := os.Getenv(EnvMark); dir != "" && !t.Failed() {
			// The parent checks every rank got here: a job that ends early
			// (a rank leaving it ends the others) must not pass unseen.
			if err := os.WriteFile(filepath.Join(dir, "done-"+os.Getenv(boot.EnvRank)), nil, 0o600); err != nil {
				t.Fatalf("spmdtest: marking the end of the body: %v", err)
			}
		}
		return
	}

	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if n < 1 || n > MaxRanks {
		t.Fatalf("spmdtest: Run: n = %d is out of range [1, %d]", n, MaxRanks)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("spmdtest: cannot find the test binary: %v", err)
	}
	mark := t.TempDir()
	args := []string{"-test.run=" + RunPattern(t.Name())}
	if testing.Verbose() {
		args = append(args, "-test.v=true")
	}
	if testing.Short() {
		args = append(args, "-test.short=true") // the ranks take the parent's branches
	}
	if f := flag.Lookup("test.gocoverdir"); f != nil && f.Value.String() != "" {
		args = append(args, "-test.gocoverdir="+f.Value.String())
	}
	env := append(append([]string{raceEnv()}, o.env...),
		EnvTest+"="+t.Name(),
		EnvCall+"="+strconv.Itoa(call),
		EnvMark+"="+mark,
	)
	jobID := launch.NewJobID()
	var out lockedBuffer
	lcfg := launch.Config{
		N:            n,
		Program:      exe,
		Args:         args,
		Env:          env,
		Label:        true,
		Timeout:      o.timeout,
		PretendHosts: o.pretendHosts,
		JobID:        jobID,
		Stdout:       &out,
		Stderr:       &out,
	}
	for _, f := range o.launch {
		f(&lcfg)
	}
	code, _ := launch.Run(context.Background(), lcfg)
	output := out.String()
	if o.output != nil {
		*o.output = output
	}
	if pids := leftovers(jobID); len(pids) != 0 {
		t.Errorf("spmdtest: job %s left processes behind: %v (killed now)", jobID, pids)
	}
	if files := shmFiles(jobID); len(files) != 0 {
		t.Errorf("spmdtest: job %s left shared-memory files behind: %v (removed now)", jobID, files)
	}
	if code != o.code {
		t.Fatalf("spmdtest: the %d-rank job of %s exited with code %d, want %d; output of the job:\n%s",
			n, t.Name(), code, o.code, output)
	}
	if o.code == 0 {
		for r := 0; r < n; r++ {
			if _, err := os.Stat(filepath.Join(mark, strconv.Itoa(r))); err != nil {
				t.Fatalf("spmdtest: rank %d never ran the body of %s (did -test.run=%s select it?); output of the job:\n%s",
					r, t.Name(), RunPattern(t.Name()), output)
			}
			if _, err := os.Stat(filepath.Join(mark, "done-"+strconv.Itoa(r))); err != nil && !o.endsEarly {
				t.Fatalf("spmdtest: rank %d did not finish the body of %s although the job exited with code 0 (ended early by another rank?); output of the job:\n%s",
					r, t.Name(), output)
			}
		}
	}
	t.Logf("spmdtest: the %d-rank job %s of %s exited with code %d; output of the job:\n%s", n, jobID, t.Name(), code, output)
}

// RunPattern returns the -test.run pattern that selects exactly the test (or
// subtest) named name, as t.Name() spells it.
func RunPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// raceEnv returns GORACE with atexit_sleep_ms=0 added unless the user set it:
// a rank built with -race otherwise sleeps 1 s in exit.
func raceEnv() string {
	v := os.Getenv("GORACE")
	if strings.Contains(v, "atexit_sleep_ms") {
		return "GORACE=" + v
	}
	return "GORACE=" + strings.TrimSpace(v+" atexit_sleep_ms=0")
}

// leftovers returns the processes of the job still alive after a short
// settling time (SIGKILLed processes take a moment to vanish) and kills them.
func leftovers(jobID string) []int {
	var pids []int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		pids, _ = launch.JobProcesses(jobID)
		if len(pids) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, pid := range pids {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
	return pids
}

// shmFiles returns the /dev/shm files of the job and removes them.
func shmFiles(jobID string) []string {
	ents, _ := os.ReadDir("/dev/shm")
	prefix := "gexgo-" + jobID
	var files []string
	for _, e := range ents {
		if n := e.Name(); n == prefix || strings.HasPrefix(n, prefix+"-") || strings.HasPrefix(n, prefix+".") {
			f := filepath.Join("/dev/shm", n)
			files = append(files, f)
			os.Remove(f)
		}
	}
	return files
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
