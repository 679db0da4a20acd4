package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/launch"
	"golang.org/x/sys/unix"
)

// mpiRoleEnv makes the test binary play a part in the mpirun-habit tests:
// "gexrun" runs main (so standard input is the real one), "stdin" is a rank
// that joins the bootstrap (consuming the secret line a remote shell's rank
// gets first) and prints what it then reads from standard input, "env"
// prints the variables named by its arguments.
const mpiRoleEnv = "GEXRUN_TEST_MPI_ROLE"

func init() {
	switch os.Getenv(mpiRoleEnv) {
	case "gexrun":
		os.Unsetenv(mpiRoleEnv)
		main()
	case "stdin":
		b, err := boot.FromEnv()
		if err != nil {
			fmt.Println("boot:", err)
			os.Exit(1)
		}
		data, err := io.ReadAll(os.Stdin)
		fmt.Printf("rank %d read %q (%v)\n", b.Rank(), data, err)
		b.Barrier()
		os.Exit(0)
	case "env":
		var vals []string
		for _, k := range os.Args[1:] {
			v, ok := os.LookupEnv(k)
			if !ok {
				v = "<unset>"
			}
			vals = append(vals, k+"="+v)
		}
		fmt.Printf("rank %s: %s\n", os.Getenv("GEX_RANK"), strings.Join(vals, " "))
		os.Exit(0)
	}
}

// gexrunProcess runs the test binary as gexrun with args and stdin, as a
// user's shell would.
func gexrunProcess(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(testExe(t), args...)
	cmd.Env = append(os.Environ(), mpiRoleEnv+"=gexrun")
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), e.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, o.String(), e.String()
}

// TestStdinToRankZero: `echo hi | gexrun -n 2 cat` prints hi once: rank 0
// reads the launcher's standard input, the others /dev/null.
func TestStdinToRankZero(t *testing.T) {
	code, out, errOut := gexrunProcess(t, "hi\n", "-n", "2", "cat")
	if code != 0 || out != "hi\n" {
		t.Fatalf("echo hi | gexrun -n 2 cat: code %d, stdout %q, stderr %q; want 0 and \"hi\\n\" once", code, out, errOut)
	}
	code, out, errOut = gexrunProcess(t, "line one\nline two\n", "-n", "3", "-x", mpiRoleEnv+"=stdin", testExe(t))
	if code != 0 {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
	for _, want := range []string{`rank 0 read "line one\nline two\n" (<nil>)`, `rank 1 read "" (<nil>)`, `rank 2 read "" (<nil>)`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestStdinToRankZeroHosts: through a remote shell, rank 0's standard input
// carries the job secret's line first (consumed by the bootstrap) and then
// the user's input; the other ranks get the secret only.
func TestStdinToRankZeroHosts(t *testing.T) {
	ssh, err := filepath.Abs("testdata/cleanssh")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := gexrunProcess(t, "to rank zero\n", "-n", "2", "--hosts", "hostA,hostB", "--ssh", ssh, "--boot-addr", "127.0.0.1",
		"-x", mpiRoleEnv+"=stdin", testExe(t))
	if code != 0 {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, want := range []string{`rank 0 read "to rank zero\n" (<nil>)`, `rank 1 read "" (<nil>)`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestEnvFlag: -x VAR=VALUE, -x VAR (this environment's value) and --env
// reach every rank, through --hosts too, where a remote shell passes nothing
// else on (testdata/cleanssh); GASNET_* travels by itself, other variables
// do not.
func TestEnvFlag(t *testing.T) {
	ssh, err := filepath.Abs("testdata/cleanssh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(mpiRoleEnv, "env")
	t.Setenv("GEXRUN_TEST_FROM_ENV", "from-env")
	t.Setenv("GEXRUN_TEST_NOT_PASSED", "secret")
	t.Setenv("GASNET_MAX_SEGSIZE", "64MB")
	vars := []string{"FOO", "GEXRUN_TEST_FROM_ENV", "BAZ", "GASNET_MAX_SEGSIZE", "GEXRUN_TEST_NOT_PASSED"}
	for _, hosts := range [][]string{nil, {"--hosts", "hostA,hostB", "--ssh", ssh, "--boot-addr", "127.0.0.1"}} {
		args := append([]string{"-np", "4", "-x", "FOO=1", "-x", "GEXRUN_TEST_FROM_ENV", "--env", "BAZ=a b", "-x", mpiRoleEnv}, hosts...)
		code, out, errOut := gexrun(append(append(args, testExe(t)), vars...)...)
		if code != 0 {
			t.Fatalf("gexrun %q: code %d, stderr %q", args, code, errOut)
		}
		notPassed := "secret" // a local rank inherits gexrun's environment
		if hosts != nil {
			notPassed = "<unset>"
		}
		for r := 0; r < 4; r++ {
			want := fmt.Sprintf("rank %d: FOO=1 GEXRUN_TEST_FROM_ENV=from-env BAZ=a b GASNET_MAX_SEGSIZE=64MB GEXRUN_TEST_NOT_PASSED=%s\n", r, notPassed)
			if !strings.Contains(out, want) {
				t.Errorf("gexrun %q: output lacks %q:\n%s", args, want, out)
			}
		}
	}
}

func TestMpirunUsageErrors(t *testing.T) {
	os.Unsetenv("GEXRUN_TEST_SURELY_UNSET")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-x", "GEXRUN_TEST_SURELY_UNSET", "prog"}, "-x GEXRUN_TEST_SURELY_UNSET: GEXRUN_TEST_SURELY_UNSET is not set in gexrun's environment"},
		{[]string{"-x", "=v", "prog"}, `-x "=v": want VAR or VAR=VALUE`},
		{[]string{"--bind-to", "socket", "prog"}, `--bind-to "socket": want core or none`},
		{[]string{"--bind-to", "core", "--hosts", "a,b", "prog"}, "--bind-to core binds ranks on this machine only"},
		{[]string{"-np", "0", "prog"}, "-n 0 is out of range"},
	} {
		code, out, errOut := gexrun(c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("gexrun %q: code %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

// TestOutputFilename: each rank's stdout and stderr land in DIR/rank.R and
// not on the terminal.
func TestOutputFilename(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errOut := gexrun("-n", "3", "--output-filename", dir, "sh", "-c", `echo "out $GEX_RANK"; echo "err $GEX_RANK" >&2`)
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("code %d, stdout %q, stderr %q; want 0 and nothing on the terminal", code, out, errOut)
	}
	for r := 0; r < 3; r++ {
		b, err := os.ReadFile(launch.RankOutputFile(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		slices.Sort(lines)
		if want := []string{fmt.Sprintf("err %d", r), fmt.Sprintf("out %d", r)}; !slices.Equal(lines, want) {
			t.Errorf("%s holds %q, want the lines %q", launch.RankOutputFile(dir, r), b, want)
		}
	}
}

// TestBindToCore: each rank runs on its block of this process's CPUs, with
// GOMAXPROCS the block's size, unless the user sets GOMAXPROCS.
func TestBindToCore(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	script := `echo "rank $GEX_RANK cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2) gomaxprocs $GOMAXPROCS"`
	for _, n := range []int{2, 3} {
		code, out, errOut := gexrun("-n", strconv.Itoa(n), "--bind-to", "core", "sh", "-c", script)
		if code != 0 {
			t.Fatalf("code %d, stderr %q", code, errOut)
		}
		for r := 0; r < n; r++ {
			mine := launch.RankCPUs(cpus, r, n)
			want := fmt.Sprintf("rank %d cpus %s gomaxprocs %d\n", r, cpuRanges(mine), len(mine))
			if !strings.Contains(out, want) {
				t.Errorf("-n %d --bind-to core: output lacks %q:\n%s", n, want, out)
			}
		}
	}
	code, out, _ := gexrun("-n", "2", "--bind-to", "core", "-x", "GOMAXPROCS=7", "sh", "-c", script)
	if code != 0 || strings.Count(out, "gomaxprocs 7\n") != 2 {
		t.Errorf("-x GOMAXPROCS=7 --bind-to core: code %d, output %q; want both ranks to keep GOMAXPROCS=7", code, out)
	}
	// Without --bind-to, the ranks keep the launcher's CPUs.
	code, out, _ = gexrun("-n", "2", "sh", "-c", script)
	if code != 0 || strings.Count(out, "cpus "+cpuRanges(cpus)+" ") != 2 {
		t.Errorf("without --bind-to: code %d, output %q; want every rank on CPUs %s", code, out, cpuRanges(cpus))
	}
}

// cpuRanges spells CPUs as the kernel's Cpus_allowed_list does ("0-3,6").
func cpuRanges(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// TestPretendHostsSelectTCP: --pretend-hosts gives the ranks the tcp
// conduit unless GEX_CONDUIT says otherwise, and then says so.
func TestPretendHostsSelectTCP(t *testing.T) {
	t.Setenv(mpiRoleEnv, "env")
	os.Unsetenv("GEX_CONDUIT")
	code, out, errOut := gexrun("-n", "2", "--pretend-hosts", "2", testExe(t), "GEX_CONDUIT", "GEX_TCP_ADDR")
	if code != 0 || strings.Count(out, "GEX_CONDUIT=tcp GEX_TCP_ADDR=127.0.0.1\n") != 2 || errOut != "" {
		t.Errorf("--pretend-hosts 2: code %d, stdout %q, stderr %q; want both ranks on tcp, nothing said", code, out, errOut)
	}
	code, out, errOut = gexrun("-n", "2", "--pretend-hosts", "2", "-x", "GEX_CONDUIT=smp", testExe(t), "GEX_CONDUIT")
	if code != 0 || strings.Count(out, "GEX_CONDUIT=smp\n") != 2 || !strings.Contains(errOut, "the ranks stay on shared memory") {
		t.Errorf("--pretend-hosts 2 -x GEX_CONDUIT=smp: code %d, stdout %q, stderr %q; want smp kept and a note saying so", code, out, errOut)
	}
	code, out, _ = gexrun("-n", "2", testExe(t), "GEX_CONDUIT")
	if code != 0 || strings.Count(out, "GEX_CONDUIT=<unset>\n") != 2 {
		t.Errorf("one host: code %d, stdout %q; want GEX_CONDUIT left unset", code, out)
	}
}

func TestVersion(t *testing.T) {
	code, out, errOut := gexrun("--version")
	if code != 0 || errOut != "" || !regexp.MustCompile(`^gexrun gexgo v\S+ .*\(go1\.\d+`).MatchString(out) {
		t.Errorf("gexrun --version: code %d, stdout %q, stderr %q; want 0 and a version line", code, out, errOut)
	}
}

func TestHelpListsMpirunFlags(t *testing.T) {
	_, out, _ := gexrun("--help")
	for _, name := range []string{"np", "x", "env", "output-filename", "bind-to", "version"} {
		if !regexp.MustCompile(`(?m)^  -{1,2}` + regexp.QuoteMeta(name) + `\b`).MatchString(out) {
			t.Errorf("flag %q is not in the flag table", name)
		}
	}
	if !strings.Contains(out, "Standard input goes to rank 0") {
		t.Error("--help does not say where standard input goes")
	}
}
