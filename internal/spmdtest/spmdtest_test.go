package spmdtest_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// helperEnv enables the Helper tests, which must fail: they are run in a
// child "go test" process by the tests that check that failures are reported.
const helperEnv = "SPMDTEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "sleep" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRunGather(t *testing.T) {
	spmdtest.Run(t, 4, func(t *testing.T) {
		if !spmdtest.InRank() {
			t.Fatal("InRank is false in a rank")
		}
		b, err := boot.FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.Size() != 4 {
			t.Fatalf("Size() = %d, want 4", b.Size())
		}
		all, err := b.AllGather(bytes.Repeat([]byte{byte(b.Rank())}, 10*b.Rank()))
		if err != nil {
			t.Fatal(err)
		}
		for r, p := range all {
			if !bytes.Equal(p, bytes.Repeat([]byte{byte(r)}, 10*r)) {
				t.Errorf("part %d = %v", r, p)
			}
		}
		if err := b.Barrier(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSubtests(t *testing.T) {
	for _, name := range []string{"with space", "with space", "regexp.*[chars]"} {
		t.Run(name, func(t *testing.T) {
			var out string
			spmdtest.Run(t, 2, func(t *testing.T) {
				fmt.Printf("body of %s\n", t.Name())
			}, spmdtest.Output(&out))
			if spmdtest.InRank() {
				return
			}
			for r := 0; r < 2; r++ {
				if want := fmt.Sprintf("[%d] body of %s\n", r, t.Name()); !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestTwoCallsOneTest(t *testing.T) {
	var out1, out2 string
	spmdtest.Run(t, 2, func(t *testing.T) { fmt.Println("first body") }, spmdtest.Output(&out1))
	spmdtest.Run(t, 3, func(t *testing.T) { fmt.Println("second body") }, spmdtest.Output(&out2))
	if spmdtest.InRank() {
		return
	}
	if strings.Count(out1, "first body") != 2 || strings.Contains(out1, "second") {
		t.Errorf("first job's output:\n%s", out1)
	}
	if strings.Count(out2, "second body") != 3 || strings.Contains(out2, "first") {
		t.Errorf("second job's output:\n%s", out2)
	}
}

func TestOptions(t *testing.T) {
	var out string
	spmdtest.Run(t, 4, func(t *testing.T) {
		fmt.Printf("host=%s local=%s extra=%s\n", boot.HostIdentity(), os.Getenv(boot.EnvLocalRank), os.Getenv("EXTRA"))
	}, spmdtest.PretendHosts(2), spmdtest.Env("EXTRA=42"), spmdtest.Timeout(30*time.Second), spmdtest.Output(&out))
	if spmdtest.InRank() {
		return
	}
	host, _ := os.Hostname()
	for r := 0; r < 4; r++ {
		want := fmt.Sprintf("[%d] host=%s-h%d local=%d extra=42\n", r, host, r/2, r%2)
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestExpectExit(t *testing.T) {
	var out string
	spmdtest.Run(t, 3, func(t *testing.T) {
		if os.Getenv(boot.EnvRank) == "2" {
			os.Exit(3)
		}
		time.Sleep(time.Minute)
	}, spmdtest.ExpectExit(3), spmdtest.Output(&out))
	if spmdtest.InRank() {
		return
	}
	if !regexp.MustCompile(`(?m)^gexrun: rank 2 \(pid \d+\) exited with status 3; terminating the job$`).MatchString(out) {
		t.Errorf("output lacks the failure line:\n%s", out)
	}
}

func TestRunPattern(t *testing.T) {
	cases := map[string]string{
		"TestX":               "^TestX$",
		"TestX/sub":           "^TestX$/^sub$",
		"TestX/a_b#01":        "^TestX$/^a_b#01$",
		"TestX/x.*[y]/deeper": `^TestX$/^x\.\*\[y\]$/^deeper$`,
	}
	for name, want := range cases {
		if got := spmdtest.RunPattern(name); got != want {
			t.Errorf("RunPattern(%q) = %q, want %q", name, got, want)
		}
	}
}

// The Helper tests fail on purpose; they run only in a child process.

func TestHelperBodyFails(t *testing.T) {
	if os.Getenv(helperEnv) != "fail" {
		t.Skip("helper")
	}
	spmdtest.Run(t, 2, func(t *testing.T) {
		if os.Getenv(boot.EnvRank) == "1" {
			t.Errorf("rank 1 reports a wrong value")
		}
	})
}

// TestEscapeeKilled: a rank's child that left the rank's process group is
// killed by the launcher when the job ends, and reported.
func TestEscapeeKilled(t *testing.T) {
	var out string
	spmdtest.Run(t, 1, func(t *testing.T) {
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), helperEnv+"=sleep")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("escapee %d\n", c.Process.Pid)
	}, spmdtest.Output(&out))
	if spmdtest.InRank() {
		return
	}
	m := regexp.MustCompile(`escapee (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the rank did not start its escapee")
	}
	want := fmt.Sprintf("gexrun: killed 1 process that the job left behind outside its ranks' process groups: [%s]\n", m[1])
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q", want)
	}
	// spmdtest.Run has checked that it is gone.
}

// helper runs the Helper test name in a child test process and returns its
// exit error and output.
func helper(t *testing.T, name, mode string) (error, string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run="+spmdtest.RunPattern(name), "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	t.Logf("helper %s:\n%s", name, out)
	return err, string(out)
}

func TestFailingBodyFailsTheTest(t *testing.T) {
	if spmdtest.InRank() {
		return
	}
	err, out := helper(t, "TestHelperBodyFails", "fail")
	if err == nil {
		t.Fatal("a job with a failing rank passed")
	}
	for _, want := range []string{
		"--- FAIL: TestHelperBodyFails",
		"spmdtest: the 2-rank job of TestHelperBodyFails exited with code 1, want 0",
		"[1] ",                         // the rank's own output, labelled
		"rank 1 reports a wrong value", // the rank's t.Errorf
		"gexrun: rank 1 (pid ",         // the launcher's line
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestHelperBodyCutShort: rank 1 ends its process with status 0 in the middle
// of the body, without finishing it; rank 0 waits. The launcher ends the job
// with rank 1's status 0 (a rank leaving the job), so only the end-of-body
// marks can tell that the body did not run to its end.
func TestHelperBodyCutShort(t *testing.T) {
	if os.Getenv(helperEnv) != "cut" {
		t.Skip("helper")
	}
	spmdtest.Run(t, 2, func(t *testing.T) {
		b, err := boot.FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.AllGather([]byte{1}); err != nil { // both ranks joined
			t.Fatal(err)
		}
		if os.Getenv(boot.EnvRank) == "1" {
			os.Exit(0)
		}
		time.Sleep(20 * time.Second) // ended by the launcher long before
	})
}

func TestBodyCutShortFailsTheTest(t *testing.T) {
	if spmdtest.InRank() {
		return
	}
	err, out := helper(t, "TestHelperBodyCutShort", "cut")
	if err == nil {
		t.Fatal("a job whose rank 0 never finished the body passed")
	}
	if want := "spmdtest: rank 0 did not finish the body of TestHelperBodyCutShort"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q", want)
	}
}
