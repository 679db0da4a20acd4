package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The mistakes that used to hang a job silently each end it, naming what
// happened (issue "No silent hangs"; docs/core.md, "Ending a job"). The
// programs are testdata/mistakes and the README's example.

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// mistakes returns the built testdata/mistakes program.
func mistakes(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "gexrun-test-")
		if buildErr == nil {
			buildErr = goBuild(filepath.Join(buildDir, "mistakes"), "./testdata/mistakes")
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "mistakes")
}

func goBuild(out string, args ...string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", out}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", args, err, b)
	}
	return nil
}

// leaveTime is when the leaving rank said it left.
func leaveTime(t *testing.T, out string) time.Time {
	t.Helper()
	m := regexp.MustCompile(`rank \d+ leaves at (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the leaving rank did not say when it left:\n%s", out)
	}
	ns, _ := strconv.ParseInt(m[1], 10, 64)
	return time.Unix(0, ns)
}

// checkLeft checks a job in which rank 1 of 4 left with status: the
// launcher's one line naming it and the ranks still running, each survivor's
// wait failing with an error naming it, the job's code, and its end within
// 2 s of the leave.
func checkLeft(t *testing.T, status, code int, out, errOut string, ended time.Time) {
	t.Helper()
	if code != status {
		t.Errorf("code %d, want %d (the leaving rank's status, as gasnet_exit(%d))", code, status, status)
	}
	how := fmt.Sprintf("exited with status %d", status)
	if status == 0 {
		how += " without calling Close"
	}
	re := regexp.MustCompile(`(?m)^gexrun: rank 1 \(pid \d+\) ` + how + `; it left while ranks 0, 2, 3 were still running; terminating the job$`)
	if !re.MatchString(errOut) || strings.Count(errOut, "gexrun: ") != 1 {
		t.Errorf("stderr lacks exactly one line matching %v:\n%s", re, errOut)
	}
	for _, r := range []int{0, 2, 3} {
		want := regexp.MustCompile(fmt.Sprintf(`(?m)^\[%d\] rank %d: barrier: gex: Event.Wait: rank 1 \(pid \d+\) %s; .*\(pending: Event.Wait for Barrier \(peer: rank \d\)\)`, r, r, how))
		if !want.MatchString(out) {
			t.Errorf("rank %d's wait did not fail naming rank 1 (want %v):\n%s", r, want, out)
		}
	}
	if d := ended.Sub(leaveTime(t, out)); d > 2*time.Second {
		t.Errorf("the job ended %v after rank 1 left, want within 2s", d)
	}
}

func TestRankLeavesEarly(t *testing.T) {
	prog := mistakes(t)
	for _, status := range []int{0, 3} {
		t.Run("status"+strconv.Itoa(status), func(t *testing.T) {
			code, out, errOut := gexrun("-n", "4", "--label", "--timeout", "60s", prog, "-mode", "leave", "-rank", "1", "-status", strconv.Itoa(status))
			checkLeft(t, status, code, out, errOut, time.Now())
		})
	}
}

// TestRankLeavesBeforeInit: a rank that exits 0 before ClientInit, while the
// others wait for it in ClientInit, ends the job once they have joined.
func TestRankLeavesBeforeInit(t *testing.T) {
	code, out, errOut := gexrun("-n", "3", "--label", "--timeout", "60s", mistakes(t), "-mode", "leave", "-rank", "1", "-before")
	ended := time.Now()
	if code != 0 {
		t.Errorf("code %d, want 0 (the leaving rank's status)", code)
	}
	re := regexp.MustCompile(`(?m)^gexrun: rank 1 \(pid \d+\) exited with status 0 without calling Close; it left while ranks? [0-9, ]+ (was|were) still running; terminating the job$`)
	if !re.MatchString(errOut) || strings.Count(errOut, "gexrun: ") != 1 {
		t.Errorf("stderr lacks exactly one line matching %v:\n%s\nstdout:\n%s", re, errOut, out)
	}
	if d := ended.Sub(leaveTime(t, out)); d > 2*time.Second {
		t.Errorf("the job ended %v after rank 1 left, want within 2s", d)
	}
}

// TestRankLeavesEarlySSH: the same through the ssh spawner (a local stand-in
// for ssh, two hosts, the tcp conduit between them).
func TestRankLeavesEarlySSH(t *testing.T) {
	fake, err := filepath.Abs("../../internal/launch/testdata/fakessh")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := gexrun("-n", "4", "--label", "--hosts", "hostA,hostB", "--ssh", fake, "--boot-addr", "127.0.0.1",
		"--timeout", "60s", mistakes(t), "-mode", "leave", "-rank", "1")
	checkLeft(t, 0, code, out, errOut, time.Now())
}

// A rank that calls Close and then ends is the normal end, whenever the
// others end.
func TestCloseThenEndIsNormal(t *testing.T) {
	code, out, errOut := gexrun("-n", "3", "--label", "--timeout", "60s", mistakes(t), "-mode", "busy", "-for", "100ms")
	if code != 0 || errOut != "" {
		t.Fatalf("code %d, stderr %q; want 0 and nothing\n%s", code, errOut, out)
	}
}

func TestUnregisteredAMEndsJob(t *testing.T) {
	code, out, errOut := gexrun("-n", "2", "--label", "--timeout", "60s", mistakes(t), "-mode", "am", "-handler", "200")
	if code != 1 {
		t.Errorf("code %d, want 1", code)
	}
	re := regexp.MustCompile(`(?m)^gexrun: rank 1 aborted: refused an AM Short Request from rank 0 to rank 1 for handler 200: handler index 200 is not registered`)
	if !re.MatchString(errOut) || strings.Count(errOut, "gexrun: ") != 1 {
		t.Errorf("stderr lacks exactly one line matching %v:\nstderr:\n%s\nstdout:\n%s", re, errOut, out)
	}
}

// stackLines checks that every rank of n printed its goroutine stacks and
// what it waits on.
func stackLines(t *testing.T, n int, out string) {
	t.Helper()
	for r := 0; r < n; r++ {
		for _, want := range []string{
			fmt.Sprintf("[rank %d] goroutine ", r),
			fmt.Sprintf("[rank %d] github.com/gexgo/gexgo/gex.(*Client).BlockUntil", r),
			fmt.Sprintf("[rank %d] waits in: BlockUntil", r),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("rank %d's dump lacks %q", r, want)
			}
		}
	}
}

func TestHangTimeout(t *testing.T) {
	prog := mistakes(t)
	t.Run("deadlock", func(t *testing.T) {
		code, out, errOut := gexrun("-n", "3", "--label", "--hang-timeout", "1s", "--timeout", "60s", prog, "-mode", "hang")
		if code != 124 {
			t.Errorf("code %d, want 124", code)
		}
		if !strings.Contains(errOut, "gexrun: no rank made communication progress for 1s; dumping the goroutine stacks of 3 ranks and ending the job\n") {
			t.Errorf("stderr lacks the hang line:\n%s", errOut)
		}
		for r := 0; r < 3; r++ {
			if !strings.Contains(errOut, fmt.Sprintf("gexrun: rank %d waits in BlockUntil\n", r)) {
				t.Errorf("the launcher did not say what rank %d waits on:\n%s", r, errOut)
			}
		}
		stackLines(t, 3, errOut)
		if t.Failed() {
			t.Logf("stdout:\n%s", out)
		}
	})
	t.Run("barrier", func(t *testing.T) {
		// Rank 0 waits for an AM; ranks 1 and 2 wait for rank 0 in a
		// barrier: each says so, naming the peer its barrier waits on.
		code, out, errOut := gexrun("-n", "3", "--label", "--hang-timeout", "1s", "--timeout", "60s", prog, "-mode", "hang", "-barrier")
		if code != 124 {
			t.Errorf("code %d, want 124", code)
		}
		for _, want := range []string{
			"gexrun: rank 0 waits in BlockUntil\n",
			"gexrun: rank 1 waits in Event.Wait for Barrier (peer: rank 0)\n",
			"gexrun: rank 2 waits in Event.Wait for Barrier (peer: rank 0)\n",
			"[rank 1] waits in: Event.Wait for Barrier (peer: rank 0)\n",
		} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q:\n%s\nstdout:\n%s", want, errOut, out)
			}
		}
	})
	t.Run("busy", func(t *testing.T) {
		// AMs around the ring for 4 s, much longer than the hang timeout.
		code, out, errOut := gexrun("-n", "3", "--label", "--hang-timeout", "1s", "--timeout", "60s", prog, "-mode", "busy", "-for", "4s")
		if code != 0 || errOut != "" {
			t.Errorf("busy job: code %d, stderr %q; want 0 and nothing\n%s", code, errOut, out)
		}
	})
}

// TestSIGQUITDumpsStacks sends SIGQUIT to a gexrun process whose ranks wait
// for ever: every rank prints its stacks, then gexrun exits 128+SIGQUIT.
func TestSIGQUITDumpsStacks(t *testing.T) {
	prog := mistakes(t)
	cmd := exec.Command(testExe(t), "-n", "3", "--label", "--timeout", "60s", prog, "-mode", "hang")
	cmd.Env = append(os.Environ(), roleEnv+"=gexrun")
	// The output goes to a file, which the test reads while gexrun runs.
	outPath := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	output := func() string { b, _ := os.ReadFile(outPath); return string(b) }
	for deadline := time.Now().Add(30 * time.Second); strings.Count(output(), ": waiting\n") < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the ranks did not start waiting:\n%s", output())
		}
	}
	cmd.Process.Signal(syscall.SIGQUIT)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGQUIT) {
		t.Errorf("gexrun ended with %v, want exit status %d", err, 128+int(syscall.SIGQUIT))
	}
	s := output()
	if !strings.Contains(s, "gexrun: received SIGQUIT; asking 3 ranks for their goroutine stacks\n") {
		t.Errorf("gexrun did not say it forwarded SIGQUIT:\n%s", s)
	}
	stackLines(t, 3, s)
}

// TestREADMEExample builds the README's example as it is written there and
// runs it with the receive goroutine on (GEX_RCVTHREAD=1), 100 times in a
// row (10 with -short): an AM that reaches a rank before its
// RegisterHandlers is held and delivered, so every run passes.
func TestREADMEExample(t *testing.T) {
	src, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Example\n.*?```go\n(.*?)```\n").FindSubmatch(src)
	if m == nil {
		t.Fatal("README.md has no Go example under ## Example")
	}
	dir := t.TempDir()
	mainGo := filepath.Join(dir, "main.go")
	if err := os.WriteFile(mainGo, m[1], 0o600); err != nil {
		t.Fatal(err)
	}
	// Build it inside the module without writing to the source tree.
	modDir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay.json")
	virt := filepath.Join(modDir, "internal", "readmeexample", "main.go")
	if err := os.WriteFile(overlay, []byte(fmt.Sprintf(`{"Replace":{%q:%q}}`, virt, mainGo)), 0o600); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "hello")
	if err := goBuild(exe, "-overlay", overlay, "github.com/gexgo/gexgo/internal/readmeexample"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GEX_RCVTHREAD", "1")
	runs := 100
	if testing.Short() {
		runs = 10
	}
	for i := 0; i < runs; i++ {
		code, out, errOut := gexrun("-n", "3", "--timeout", "60s", exe)
		if code != 0 || errOut != "" {
			t.Fatalf("run %d: code %d, stderr %q; want 0 and nothing\n%s", i, code, errOut, out)
		}
		for r := 0; r < 3; r++ {
			want := fmt.Sprintf("rank %d got \"hello\" from rank %d\n", r, (r+2)%3)
			if !strings.Contains(out, want) {
				t.Fatalf("run %d: output lacks %q:\n%s", i, want, out)
			}
		}
	}
}

// TestHydraRankLeavesEarly: the same mistake in a job started by MPICH's
// mpiexec.hydra (PMI-1 and PMI-2): hydra kills every rank the moment a rank's
// PMI connection closes without finalize, so each rank's holder keeps it open
// a moment (internal/boot, pmihold.go) while the ranks of the host, which
// watch each other's processes, fail their waits naming the rank; the lowest
// one still running prints the one line, and the job ends non-zero.
func TestHydraRankLeavesEarly(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		t.Skip("mpiexec.hydra is not on PATH (Debian: apt-get install mpich)")
	}
	prog := mistakes(t)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GEX_") && !strings.HasPrefix(e, "PMI_") && !strings.HasPrefix(e, roleEnv+"=") {
			env = append(env, e)
		}
	}
	for _, pmi := range []string{"1", "2"} {
		t.Run("PMI-"+pmi, func(t *testing.T) {
			cmd := exec.Command("timeout", "60", hydra, "-n", "4", prog, "-mode", "leave", "-rank", "1")
			cmd.Env = append(env, "GEX_PMI="+pmi)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			ended := time.Now()
			out, errOut := stdout.String(), stderr.String()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 124 {
				t.Errorf("mpiexec.hydra ended with %v, want a non-zero status other than timeout's 124", err)
			}
			line := regexp.MustCompile(`(?m)^gexgo: rank 1 \(pid \d+\) ended without calling Close; it left while ranks 0, 2, 3 were still running; ending the job$`)
			if n := len(line.FindAllString(errOut, -1)); n != 1 {
				t.Errorf("stderr has %d lines matching %v, want 1:\n%s", n, line, errOut)
			}
			for _, r := range []int{0, 2, 3} {
				want := regexp.MustCompile(fmt.Sprintf(`(?m)^rank %d: barrier: gex: Event.Wait: rank 1 \(pid \d+\) ended without calling Close; .*\(pending: Event.Wait for Barrier \(peer: rank \d\)\)`, r))
				if !want.MatchString(out) {
					t.Errorf("rank %d's wait did not fail naming rank 1:\n%s", r, out)
				}
			}
			if d := ended.Sub(leaveTime(t, out)); d > 2*time.Second {
				t.Errorf("the job ended %v after rank 1 left, want within 2s", d)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
			}
		})
	}
}
