package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// roleEnv makes the test binary a rank: it prints a line and exits with the
// code given as its argument for its rank ("codes C0 C1 ...").
const roleEnv = "GEXRUN_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "rank" {
		rank, _ := strconv.Atoi(os.Getenv("GEX_RANK"))
		fmt.Printf("rank %d of %s on %s\n", rank, os.Getenv("GEX_SIZE"), os.Getenv("GEX_HOST"))
		code, _ := strconv.Atoi(os.Args[1+rank])
		os.Exit(code)
	}
	if os.Getenv("GEX_RANK") != "" {
		// Started by a launcher as a rank without the role variable: running the
		// tests here would launch jobs of this binary recursively (a fork bomb).
		fmt.Fprintf(os.Stderr, "gexrun.test: started as rank %s without %s=rank; refusing to run the tests inside a job\n", os.Getenv("GEX_RANK"), roleEnv)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func gexrun(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-help", "-h"} {
		code, out, errOut := gexrun(arg)
		if code != 0 || errOut != "" {
			t.Errorf("gexrun %s: code %d, stderr %q; want 0 and nothing", arg, code, errOut)
		}
		for _, want := range []string{
			"-n N", "--label", "--timeout D", "--grace D", "--pretend-hosts K", "--help",
			"GEX_RANK", "GEX_SIZE", "GEX_LOCAL_RANK", "GEX_BOOT", "GEX_JOBID", "GEX_HOST",
			"GASNET_MAX_SEGSIZE", "GASNET_SUPERNODE_MAXSIZE", "GEX_WAITMODE", "GEX_RCVTHREAD", "GEX_VERBOSE",
			"spin, block or spinblock", "0.5/H",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("gexrun %s does not document %q", arg, want)
			}
		}
	}
}

// TestHelpListsEveryFlag guards against a flag added without documentation.
func TestHelpListsEveryFlag(t *testing.T) {
	_, out, _ := gexrun("--help")
	for _, name := range []string{"n", "label", "timeout", "grace", "pretend-hosts"} {
		re := regexp.MustCompile(`(?m)^  -{1,2}` + regexp.QuoteMeta(name) + `\b`)
		if !re.MatchString(out) {
			t.Errorf("flag %q is not in the flag table", name)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus", "prog"}, "flag provided but not defined: -bogus"},
		{[]string{"-n", "x", "prog"}, `invalid value "x" for flag -n`},
		{[]string{"-n", "0", "prog"}, "gexrun: -n 0 is out of range [1, 4096]"},
		{[]string{"-n", "5000", "prog"}, "gexrun: -n 5000 is out of range [1, 4096]"},
		{[]string{"-n", "2"}, "gexrun: no PROGRAM given"},
		{[]string{}, "gexrun: no PROGRAM given"},
		{[]string{"--timeout", "-1s", "prog"}, "gexrun: --timeout -1s is negative"},
		{[]string{"--grace", "0", "prog"}, "gexrun: --grace 0s must be positive"},
		{[]string{"-n", "2", "--pretend-hosts", "3", "prog"}, "gexrun: --pretend-hosts 3 is out of range [0, -n = 2]"},
		{[]string{"--timeout", "soon", "prog"}, `invalid value "soon" for flag -timeout`},
	}
	for _, c := range cases {
		code, out, errOut := gexrun(c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "usage: gexrun -n N") {
			t.Errorf("gexrun %q: code %d, stdout %q, stderr %q; want 2 and an error containing %q with the synopsis", c.args, code, out, errOut, c.want)
		}
	}
}

func testExe(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestRunJob(t *testing.T) {
	t.Setenv(roleEnv, "rank")
	code, out, errOut := gexrun("-n", "4", "--label", "--pretend-hosts", "2", testExe(t), "0", "0", "0", "0")
	if code != 0 || errOut != "" {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
	host, _ := os.Hostname()
	for r := 0; r < 4; r++ {
		want := fmt.Sprintf("[%d] rank %d of 4 on %s-h%d\n", r, r, host, r/2)
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRunJobFailure(t *testing.T) {
	t.Setenv(roleEnv, "rank")
	// Double-dash flags, single-dash flags, and args that look like flags after PROGRAM.
	code, _, errOut := gexrun("--n", "3", "-grace", "500ms", testExe(t), "0", "6", "0")
	if code != 6 {
		t.Errorf("code %d, want 6", code)
	}
	re := regexp.MustCompile(`(?m)^gexrun: rank 1 \(pid \d+\) exited with status 6; terminating the job$`)
	if !re.MatchString(errOut) {
		t.Errorf("stderr %q lacks the failure line", errOut)
	}
}

// TestRunJobHosts: --hosts with a local stand-in for ssh starts 4 ranks on
// two hosts in blocks; then a real gex program (examples/amping: AM ring,
// round trips and floods) runs over them, shared memory inside each host
// and the tcp conduit between them.
func TestRunJobHosts(t *testing.T) {
	fake, err := filepath.Abs("../../internal/launch/testdata/fakessh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(roleEnv, "rank")
	code, out, errOut := gexrun("-n", "4", "--label", "--hosts", "hostA,hostB", "--ssh", fake, "--boot-addr", "127.0.0.1", testExe(t), "0", "0", "0", "0")
	if code != 0 || errOut != "" {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
	for r, h := range []string{"hostA", "hostA", "hostB", "hostB"} {
		want := fmt.Sprintf("[%d] rank %d of 4 on %s\n", r, r, h)
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Setenv(roleEnv, "")
	code, out, errOut = gexrun("-n", "4", "--label", "--hosts", "hostA,hostB", "--ssh", fake, "--boot-addr", "127.0.0.1",
		"--timeout", "60s", "../../examples/amping", "-iters", "2000", "-flood", "20000")
	if code != 0 {
		t.Fatalf("amping over two hosts: code %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "every rank visited in ring order") {
		t.Fatalf("amping's ring did not complete:\n%s", out)
	}
}
