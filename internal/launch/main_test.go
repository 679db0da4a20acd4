package launch_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/launch"
)

// roleEnv switches the test binary into a helper role: "rank" runs one of the
// rank scenarios below (chosen by the first argument), "launcher" runs a job
// (for the tests that kill the launcher).
const roleEnv = "LAUNCH_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "rank":
		os.Exit(rankMain(os.Args[1:]))
	case "launcher":
		os.Exit(launcherMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func envInt(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank: %s: %v\n", name, err)
		os.Exit(97)
	}
	return n
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank: bad number %q\n", s)
		os.Exit(97)
	}
	return n
}

func mustBoot(rank int) boot.Bootstrap {
	b, err := boot.FromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
		os.Exit(98)
	}
	return b
}

// rankMain is a rank of a test job. It returns the process exit code.
func rankMain(args []string) int {
	rank := envInt(boot.EnvRank)
	size := envInt(boot.EnvSize)
	switch args[0] {
	case "codes": // codes C0 C1 ...: rank r exits with Cr at once
		return atoi(args[1+rank])
	case "failone": // failone R C: rank R exits with C after a moment, the others sleep
		if rank == atoi(args[1]) {
			time.Sleep(100 * time.Millisecond)
			return atoi(args[2])
		}
		time.Sleep(time.Minute)
		return 0
	case "sleep":
		time.Sleep(time.Minute)
		return 0
	case "sigkill": // sigkill R: after a barrier, rank R SIGKILLs itself; the others ignore SIGTERM and start a child
		b := mustBoot(rank)
		if rank != atoi(args[1]) {
			signal.Ignore(syscall.SIGTERM)
			child := exec.Command(os.Args[0], "sleep")
			child.Env = os.Environ()
			if err := child.Start(); err != nil {
				fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
				return 96
			}
			fmt.Printf("rank %d started child %d\n", rank, child.Process.Pid)
		}
		if err := b.Barrier(); err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
			return 95
		}
		if rank == atoi(args[1]) {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(time.Minute)
		return 0
	case "sigint": // all ranks wait for SIGINT; rank 0 sends it to the launcher after a barrier
		c := make(chan os.Signal, 4)
		signal.Notify(c, syscall.SIGINT)
		b := mustBoot(rank)
		if err := b.Barrier(); err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
			return 95
		}
		if rank == 0 {
			syscall.Kill(os.Getppid(), syscall.SIGINT)
		}
		select {
		case <-c:
			fmt.Printf("rank %d got interrupt\n", rank)
			select { // exactly one
			case <-c:
				fmt.Printf("rank %d got a second interrupt\n", rank)
			case <-time.After(100 * time.Millisecond):
			}
			if len(args) > 1 && args[1] == "fail" && rank == 1 {
				return 7
			}
			return 0
		case <-time.After(20 * time.Second):
			fmt.Printf("rank %d: no interrupt\n", rank)
			return 9
		}
	case "print": // print N: N lines, then an unterminated tail
		n := atoi(args[1])
		long := strings.Repeat(strconv.Itoa(rank), 3000)
		for i := 0; i < n; i++ {
			fmt.Printf("rank %d line %d %s\n", rank, i, long)
		}
		fmt.Fprintf(os.Stderr, "rank %d to stderr\n", rank)
		fmt.Printf("tail %d", rank)
		return 0
	case "bootexit": // bootexit R C: rank R calls Exit(C) after a barrier; the others wait in a second barrier
		b := mustBoot(rank)
		b.OnExit(func() { fmt.Printf("rank %d hook ran\n", rank) })
		if err := b.Barrier(); err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
			return 95
		}
		if rank == atoi(args[1]) {
			b.Exit(atoi(args[2]))
		}
		b.Barrier()
		fmt.Printf("rank %d: second barrier returned\n", rank)
		return 94
	case "abort": // abort R MSG: rank R aborts with MSG; the others sleep
		b := mustBoot(rank)
		b.OnExit(func() { fmt.Printf("rank %d hook ran\n", rank) })
		if rank == atoi(args[1]) {
			b.Abort(args[2])
		}
		time.Sleep(time.Minute)
		return 0
	case "sshlost": // sshlost R: after a barrier, rank R kills its parent (the ssh session) and every rank waits
		b := mustBoot(rank)
		if err := b.Barrier(); err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
			return 95
		}
		if rank == atoi(args[1]) {
			syscall.Kill(os.Getppid(), syscall.SIGKILL)
		}
		time.Sleep(time.Minute)
		return 0
	case "env":
		for _, k := range []string{boot.EnvRank, boot.EnvSize, boot.EnvLocalRank, boot.EnvBoot, boot.EnvJobID, boot.EnvHost, "EXTRA"} {
			fmt.Printf("rank %d: %s=%s\n", rank, k, os.Getenv(k))
		}
		b := mustBoot(rank)
		fmt.Printf("rank %d: Host()=%s\n", rank, b.Host())
		b.Close() // the normal end: a rank that ends without it while others run ends the job
		return 0
	case "gather": // all-gather of unequal sizes, then a barrier
		b := mustBoot(rank)
		mine := bytes.Repeat([]byte{byte('a' + rank)}, rank*1000)
		all, err := b.AllGather(mine)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
			return 95
		}
		for r := 0; r < size; r++ {
			if !bytes.Equal(all[r], bytes.Repeat([]byte{byte('a' + r)}, r*1000)) {
				fmt.Fprintf(os.Stderr, "rank %d: part %d wrong (%d bytes)\n", rank, r, len(all[r]))
				return 93
			}
		}
		if err := b.Barrier(); err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
			return 95
		}
		fmt.Printf("rank %d gathered ok\n", rank)
		b.Close()
		return 0
	}
	fmt.Fprintf(os.Stderr, "rank: unknown scenario %q\n", args[0])
	return 99
}

// launcherMain runs a job of N ranks of this binary in scenario "sleep" with
// the job id given: launcher JOBID N.
func launcherMain(args []string) int {
	exe, _ := os.Executable()
	code, _ := launch.Run(context.Background(), launch.Config{
		N: atoi(args[1]), Program: exe, Args: []string{"sleep"}, JobID: args[0],
		Env: []string{roleEnv + "=rank", raceEnv()},
	})
	return code
}

// raceEnv returns GORACE with atexit_sleep_ms=0 added: a rank built with
// -race otherwise sleeps 1 s in exit, which is as long as the default grace
// period between SIGTERM and SIGKILL.
func raceEnv() string {
	v := os.Getenv("GORACE")
	if strings.Contains(v, "atexit_sleep_ms") {
		return "GORACE=" + v
	}
	return "GORACE=" + strings.TrimSpace(v+" atexit_sleep_ms=0")
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testExe(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// result is a finished test job.
type result struct {
	code int
	err  error
	out  string
	took time.Duration
}

// runJob runs a job of the test binary in rank role with scenario args and
// checks that it left no process and no /dev/shm file behind.
func runJob(t *testing.T, cfg launch.Config, args ...string) result {
	t.Helper()
	if cfg.Program == "" {
		cfg.Program = testExe(t)
	}
	cfg.Args = args
	cfg.Env = append(cfg.Env, roleEnv+"=rank", raceEnv())
	if cfg.JobID == "" {
		cfg.JobID = launch.NewJobID()
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	out := &syncBuffer{}
	cfg.Stdout, cfg.Stderr = out, out
	start := time.Now()
	code, err := launch.Run(context.Background(), cfg)
	res := result{code: code, err: err, out: out.String(), took: time.Since(start)}
	t.Logf("job %s: code %d, err %v, %v\n%s", cfg.JobID, code, err, res.took, res.out)
	assertNoLeftovers(t, cfg.JobID)
	return res
}

// assertNoLeftovers fails t if a process of job jobID is still alive after a
// short settling time (SIGKILLed processes take a moment to vanish).
func assertNoLeftovers(t *testing.T, jobID string) {
	t.Helper()
	var pids []int
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		pids, err = launch.JobProcesses(jobID)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(pids) != 0 {
		t.Errorf("processes of job %s left behind: %v", jobID, pids)
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// launcherLines returns the lines of out that start with "gexrun: ".
func launcherLines(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "gexrun: ") {
			ls = append(ls, l)
		}
	}
	return ls
}
