package launch_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/launch"
)

// patientGrace is the grace period of tests in which ranks are expected to
// exit by themselves: a SIGKILL after grace there would be a false failure on
// a loaded machine.
const patientGrace = 20 * time.Second

func TestAllZero(t *testing.T) {
	res := runJob(t, launch.Config{N: 4}, "codes", "0", "0", "0", "0")
	if res.code != 0 || res.err != nil {
		t.Errorf("code %d, err %v; want 0, nil", res.code, res.err)
	}
	if ls := launcherLines(res.out); len(ls) != 0 {
		t.Errorf("launcher printed %q for a clean job", ls)
	}
}

func TestOneRankFails(t *testing.T) {
	res := runJob(t, launch.Config{N: 4}, "failone", "3", "3")
	if res.code != 3 {
		t.Errorf("code %d, want 3 (the failing rank's status)", res.code)
	}
	re := regexp.MustCompile(`^gexrun: rank 3 \(pid \d+\) exited with status 3; terminating the job$`)
	ls := launcherLines(res.out)
	if len(ls) != 1 || !re.MatchString(ls[0]) {
		t.Fatalf("launcher lines %q, want one matching %v", ls, re)
	}
	if res.err == nil || "gexrun: "+res.err.Error() != ls[0] {
		t.Errorf("err = %v, want the printed line %q without the prefix", res.err, ls[0])
	}
}

// TestStatusOfFirstFailure: ranks exiting 0 are normal; the job's code is the
// first failure's status even if all ranks fail at once.
func TestExitCodes(t *testing.T) {
	res := runJob(t, launch.Config{N: 3}, "codes", "0", "5", "0")
	if res.code != 5 || !strings.Contains(res.out, "gexrun: rank 1 (pid ") {
		t.Errorf("code %d, want 5 naming rank 1", res.code)
	}
}

func TestKilledRank(t *testing.T) {
	// Rank 1 SIGKILLs itself; ranks 0 and 2 ignore SIGTERM and have a child
	// each in their process group: everything must be gone in < 5 s.
	res := runJob(t, launch.Config{N: 3}, "sigkill", "1")
	if res.took > 5*time.Second {
		t.Errorf("job took %v after a rank was killed, want < 5s", res.took)
	}
	if res.code != 1 {
		t.Errorf("code %d, want 1", res.code)
	}
	re := regexp.MustCompile(`^gexrun: rank 1 \(pid \d+\) was killed by signal SIGKILL; it left while ranks 0, 2 were still running; terminating the job$`)
	ls := launcherLines(res.out)
	if len(ls) != 1 || !re.MatchString(ls[0]) {
		t.Errorf("launcher lines %q, want one matching %v", ls, re)
	}
	if n := strings.Count(res.out, "started child"); n != 2 {
		t.Errorf("%d ranks started a child, want 2", n)
	}
}

func TestSignalForwarded(t *testing.T) {
	res := runJob(t, launch.Config{N: 3, Grace: patientGrace}, "sigint")
	if res.code != 0 || res.err != nil {
		t.Errorf("code %d, err %v; want 0 (every rank handled SIGINT and exited 0)", res.code, res.err)
	}
	for r := 0; r < 3; r++ {
		if !strings.Contains(res.out, fmt.Sprintf("rank %d got interrupt\n", r)) {
			t.Errorf("rank %d did not report the interrupt", r)
		}
	}
	if strings.Contains(res.out, "second interrupt") {
		t.Errorf("a rank got SIGINT twice")
	}
	ls := launcherLines(res.out)
	if len(ls) != 1 || ls[0] != "gexrun: received SIGINT; forwarding it to 3 ranks" {
		t.Errorf("launcher lines %q", ls)
	}
}

func TestSignalThenFailure(t *testing.T) {
	res := runJob(t, launch.Config{N: 2, Grace: patientGrace}, "sigint", "fail")
	if want := 128 + int(syscall.SIGINT); res.code != want {
		t.Errorf("code %d, want %d", res.code, want)
	}
	if res.err == nil || res.err.Error() != "received SIGINT; forwarded it to 2 ranks" {
		t.Errorf("err = %v", res.err)
	}
	if ls := launcherLines(res.out); len(ls) != 1 {
		t.Errorf("launcher lines %q, want only the signal line", ls)
	}
}

func TestLabel(t *testing.T) {
	const lines = 50
	res := runJob(t, launch.Config{N: 3, Label: true}, "print", fmt.Sprint(lines))
	if res.code != 0 {
		t.Fatalf("code %d", res.code)
	}
	re := regexp.MustCompile(`^\[(\d)\] (?:rank (\d) line \d+ (\d+)|rank (\d) to stderr|tail (\d))$`)
	got := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(res.out, "\n"), "\n") {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("malformed or interleaved line: %.120q", l)
		}
		who := m[2] + m[4] + m[5]
		if m[1] != who {
			t.Errorf("line labelled [%s] comes from rank %s", m[1], who)
		}
		if m[3] != "" && m[3] != strings.Repeat(who, len(m[3])) {
			t.Errorf("line of rank %s holds another rank's bytes", who)
		}
		got[m[1]]++
	}
	for r := 0; r < 3; r++ {
		if n := got[fmt.Sprint(r)]; n != lines+2 {
			t.Errorf("rank %d: %d lines, want %d", r, n, lines+2)
		}
		if !strings.Contains(res.out, fmt.Sprintf("[%d] tail %d\n", r, r)) {
			t.Errorf("rank %d: final unterminated line not flushed with a newline", r)
		}
	}
}

func TestNoLabel(t *testing.T) {
	res := runJob(t, launch.Config{N: 2}, "print", "1")
	if !strings.Contains(res.out, "\ntail 1\n") && !strings.HasPrefix(res.out, "tail 1\n") {
		t.Errorf("unlabelled output lacks the tail line:\n%s", res.out)
	}
	if strings.Contains(res.out, "[0]") {
		t.Errorf("output labelled without Label")
	}
}

func TestTimeout(t *testing.T) {
	res := runJob(t, launch.Config{N: 2, Timeout: 300 * time.Millisecond}, "sleep")
	if res.code != launch.CodeTimeout {
		t.Errorf("code %d, want %d", res.code, launch.CodeTimeout)
	}
	ls := launcherLines(res.out)
	if want := "gexrun: job timed out after 300ms; killing 2 ranks"; len(ls) != 1 || ls[0] != want {
		t.Errorf("launcher lines %q, want [%q]", ls, want)
	}
	if res.took > 5*time.Second {
		t.Errorf("timed-out job took %v to end", res.took)
	}
}

func TestBootExit(t *testing.T) {
	res := runJob(t, launch.Config{N: 4, Grace: patientGrace}, "bootexit", "2", "5")
	if res.code != 5 {
		t.Errorf("code %d, want 5", res.code)
	}
	for r := 0; r < 4; r++ {
		if !strings.Contains(res.out, fmt.Sprintf("rank %d hook ran\n", r)) {
			t.Errorf("rank %d did not run its exit hook", r)
		}
	}
	if strings.Contains(res.out, "second barrier returned") {
		t.Errorf("a barrier returned after Exit")
	}
	ls := launcherLines(res.out)
	if want := "gexrun: rank 2 ended the job with exit code 5"; len(ls) != 1 || ls[0] != want {
		t.Errorf("launcher lines %q, want [%q]", ls, want)
	}
}

func TestBootExitZero(t *testing.T) {
	res := runJob(t, launch.Config{N: 3, Grace: patientGrace}, "bootexit", "0", "0")
	if res.code != 0 || res.err != nil {
		t.Errorf("code %d, err %v; want 0", res.code, res.err)
	}
	if ls := launcherLines(res.out); len(ls) != 0 {
		t.Errorf("launcher lines %q, want none", ls)
	}
}

func TestAbort(t *testing.T) {
	res := runJob(t, launch.Config{N: 3, Grace: patientGrace}, "abort", "1", "disk on fire\nsecond line")
	if res.code != 1 {
		t.Errorf("code %d, want 1", res.code)
	}
	ls := launcherLines(res.out)
	if want := "gexrun: rank 1 aborted: disk on fire second line"; len(ls) != 1 || ls[0] != want {
		t.Errorf("launcher lines %q, want [%q]", ls, want)
	}
	if !strings.Contains(res.out, "rank 1 hook ran") {
		t.Errorf("the aborting rank did not run its exit hook")
	}
	if strings.Contains(res.out, "gexgo: rank 1 aborted") {
		t.Errorf("the aborting rank printed the message itself although the launcher acknowledged it")
	}
}

func envLines(out string) map[string]string {
	m := map[string]string{}
	re := regexp.MustCompile(`(?m)^rank (\d): (\w+|Host\(\))=(.*)$`)
	for _, g := range re.FindAllStringSubmatch(out, -1) {
		m[g[1]+" "+g[2]] = g[3]
	}
	return m
}

func TestEnv(t *testing.T) {
	id := launch.NewJobID()
	res := runJob(t, launch.Config{N: 3, JobID: id, Env: []string{"EXTRA=yes", "GEX_HOST="}}, "env")
	if res.code != 0 {
		t.Fatalf("code %d", res.code)
	}
	env := envLines(res.out)
	host, _ := os.Hostname()
	for r := 0; r < 3; r++ {
		want := map[string]string{
			"GEX_RANK": fmt.Sprint(r), "GEX_SIZE": "3", "GEX_LOCAL_RANK": fmt.Sprint(r),
			"GEX_BOOT": "@gexgo-" + id, "GEX_JOBID": id, "EXTRA": "yes", "GEX_HOST": "",
			"Host()": host,
		}
		for k, v := range want {
			if got, ok := env[fmt.Sprint(r, " ", k)]; !ok || got != v {
				t.Errorf("rank %d: %s = %q, want %q", r, k, got, v)
			}
		}
	}
}

func TestPretendHosts(t *testing.T) {
	res := runJob(t, launch.Config{N: 4, PretendHosts: 2, Env: []string{"EXTRA=x"}}, "env")
	if res.code != 0 {
		t.Fatalf("code %d", res.code)
	}
	env := envLines(res.out)
	host, _ := os.Hostname()
	for r, w := range []struct{ host, local string }{{"-h0", "0"}, {"-h0", "1"}, {"-h1", "0"}, {"-h1", "1"}} {
		if got := env[fmt.Sprint(r, " GEX_HOST")]; got != host+w.host {
			t.Errorf("rank %d: GEX_HOST = %q, want %q", r, got, host+w.host)
		}
		if got := env[fmt.Sprint(r, " Host()")]; got != host+w.host {
			t.Errorf("rank %d: Host() = %q, want %q", r, got, host+w.host)
		}
		if got := env[fmt.Sprint(r, " GEX_LOCAL_RANK")]; got != w.local {
			t.Errorf("rank %d: GEX_LOCAL_RANK = %q, want %q", r, got, w.local)
		}
	}
}

func TestGatherAcrossProcesses(t *testing.T) {
	res := runJob(t, launch.Config{N: 4}, "gather")
	if res.code != 0 || strings.Count(res.out, "gathered ok") != 4 {
		t.Errorf("code %d; want 0 and 4 ranks reporting success", res.code)
	}
}

func TestShmRemoved(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm")
	}
	id := launch.NewJobID()
	mine := filepath.Join("/dev/shm", "gexgo-"+id+"-seg0")
	other := filepath.Join("/dev/shm", "gexgo-"+id+"0-seg0") // another job's id that extends ours
	for _, f := range []string{mine, other} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(other)
	runJob(t, launch.Config{N: 1, JobID: id}, "codes", "0")
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("%s survived the job (%v)", mine, err)
		os.Remove(mine)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another job's file %s was removed", other)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		cfg  launch.Config
		want string
	}{
		{launch.Config{N: 0, Program: "x"}, "Config.N = 0 is out of range [1, 4096]"},
		{launch.Config{N: 5000, Program: "x"}, "Config.N = 5000 is out of range [1, 4096]"},
		{launch.Config{N: 1}, "Config.Program is empty"},
		{launch.Config{N: 1, Program: "x", Timeout: -1}, "Config.Timeout = -1ns is negative"},
		{launch.Config{N: 1, Program: "x", Grace: -1}, "Config.Grace = -1ns is negative"},
		{launch.Config{N: 1, Program: "x", HangTimeout: -1}, "Config.HangTimeout = -1ns is negative"},
		{launch.Config{N: 2, Program: "x", PretendHosts: 3}, "Config.PretendHosts = 3 is out of range [0, N = 2]"},
		{launch.Config{N: 1, Program: "x", JobID: "a/b"}, `Config.JobID = "a/b" must be`},
		{launch.Config{N: 1, Program: "x", Env: []string{"NOEQUALS"}}, `Config.Env[0] = "NOEQUALS" is not of the form K=V`},
	}
	for _, c := range cases {
		var out syncBuffer
		c.cfg.Stderr = &out
		code, err := launch.Run(context.Background(), c.cfg)
		if code != launch.CodeUsage || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%+v) = %d, %v; want %d and an error containing %q", c.cfg, code, err, launch.CodeUsage, c.want)
		}
		if got := out.String(); got != "gexrun: "+err.Error()+"\n" {
			t.Errorf("printed %q", got)
		}
	}
}

func TestStartFailure(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "prog")
	if err := os.WriteFile(notExec, []byte("not a program"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := runJob(t, launch.Config{N: 2, Program: notExec})
	if res.code != 1 || len(launcherLines(res.out)) != 1 || !strings.Contains(res.out, "gexrun: cannot start rank 0:") {
		t.Errorf("code %d, output %q; want 1 and one line naming rank 0", res.code, res.out)
	}
}

func TestContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	id := launch.NewJobID()
	time.AfterFunc(200*time.Millisecond, cancel)
	code, err := launch.Run(ctx, launch.Config{
		N: 2, Program: testExe(t), Args: []string{"sleep"}, JobID: id,
		Env: []string{roleEnv + "=rank", raceEnv()}, Stdout: out, Stderr: out,
	})
	if code != 1 || err == nil || !strings.HasPrefix(err.Error(), "job cancelled (context canceled); killing 2 ranks") {
		t.Errorf("code %d, err %v", code, err)
	}
	assertNoLeftovers(t, id)
}

func TestBuildAndRunPackage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	exe, cleanup, err := launch.Build(context.Background(), "./testdata/hello")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(exe); err != nil || st.Mode()&0o100 == 0 {
		t.Errorf("Build gave %s: %v", exe, err)
	}
	cleanup()
	if _, err := os.Stat(filepath.Dir(exe)); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s", filepath.Dir(exe))
	}
	// Run builds a package path by itself.
	res := runJob(t, launch.Config{N: 2, Program: "./testdata/hello", Label: true})
	if res.code != 0 || !strings.Contains(res.out, "[0] hello from rank 0 of 2\n") || !strings.Contains(res.out, "[1] hello from rank 1 of 2\n") {
		t.Errorf("code %d, output %q", res.code, res.out)
	}
	if _, _, err := launch.Build(context.Background(), "./testdata/nosuchpkg"); err == nil || !strings.Contains(err.Error(), "go build ./testdata/nosuchpkg") {
		t.Errorf("Build of a missing package: %v", err)
	}
}

// TestLauncherKilled: when the launcher dies (SIGKILL, no chance to clean
// up), its ranks die with it (PR_SET_PDEATHSIG).
func TestLauncherKilled(t *testing.T) {
	id := launch.NewJobID()
	cmd := exec.Command(testExe(t), id, "3")
	cmd.Env = append(os.Environ(), roleEnv+"=launcher")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		pids, _ := launch.JobProcesses(id)
		if len(pids) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launcher did not start 3 ranks: %v", pids)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	assertNoLeftovers(t, id)
}
