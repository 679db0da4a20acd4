package gex_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// Job-level behaviour on real processes: a rank dying, and gasnet_exit.

// gexgoShmFiles lists /dev/shm entries gexgo could have made.
func gexgoShmFiles(t *testing.T) []string {
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "gexgo") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestRankKilledEndsJob: rank 2 of 4 SIGKILLs itself mid-job while the others
// wait for AMs that never come. The job must end non-zero within 5 s of the
// kill, with one line naming rank 2 and the signal, and leave no process and
// no /dev/shm file (spmdtest checks processes and the job's files; we also
// check /dev/shm as a whole).
func TestRankKilledEndsJob(t *testing.T) {
	before := gexgoShmFiles(t)
	var out string
	start := time.Now()
	spmdtest.Run(t, 4, func(t *testing.T) {
		c, _, tm, err := gex.ClientInit("KILLTEST", 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gex.SegmentAttach(tm, 1<<20); err != nil {
			t.Fatal(err)
		}
		if tm.QueryRank() == 2 {
			fmt.Printf("KILL-AT %d\n", time.Now().UnixNano())
			os.Stdout.Sync()
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		c.BlockUntil(func() bool { return false }) // wait (polling) until the launcher ends us
	}, spmdtest.ExpectExit(1), spmdtest.Output(&out))
	if spmdtest.InRank() {
		return
	}
	end := time.Now()
	m := regexp.MustCompile(`KILL-AT (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rank 2 never reached the kill; output:\n%s", out)
	}
	ns, _ := strconv.ParseInt(m[1], 10, 64)
	if d := end.Sub(time.Unix(0, ns)); d > 5*time.Second {
		t.Errorf("the job ended %v after rank 2 was killed, want < 5s", d)
	}
	if !regexp.MustCompile(`gexrun: rank 2 \(pid \d+\) was killed by signal SIGKILL`).MatchString(out) {
		t.Errorf("no message naming rank 2 and SIGKILL; output:\n%s", out)
	}
	if after := gexgoShmFiles(t); len(after) > len(before) {
		t.Errorf("/dev/shm gained gexgo files: before %v, after %v", before, after)
	}
	t.Logf("job of 4 ranks with a SIGKILLed rank ended %v after start", end.Sub(start).Round(time.Millisecond))
}

// TestExit: gasnet_exit from one rank ends every rank with that code, whether
// called from the main goroutine or from inside an AM handler.
func TestExit(t *testing.T) {
	t.Run("main", func(t *testing.T) {
		spmdtest.Run(t, 3, func(t *testing.T) {
			c, _, tm, err := gex.ClientInit("EXITTEST", 0)
			if err != nil {
				t.Fatal(err)
			}
			if tm.QueryRank() == 1 {
				c.Exit(7)
				t.Fatal("Exit returned")
			}
			c.BlockUntil(func() bool { return false })
		}, spmdtest.ExpectExit(7))
	})
	t.Run("handler", func(t *testing.T) {
		spmdtest.Run(t, 3, func(t *testing.T) {
			c, ep, tm, err := gex.ClientInit("EXITTEST", 0)
			if err != nil {
				t.Fatal(err)
			}
			err = ep.RegisterHandlers([]gex.AMEntry{{Index: 250, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1,
				Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { c.Exit(int(a[0])) }}})
			if err != nil {
				t.Fatal(err)
			}
			// SegmentAttach ends with a barrier: every rank has registered after it.
			if _, err := gex.SegmentAttach(tm, 1<<16); err != nil {
				t.Fatal(err)
			}
			if tm.QueryRank() == 0 {
				if err := tm.RequestShort(2, 250, 0, 5); err != nil {
					t.Fatal(err)
				}
			}
			c.BlockUntil(func() bool { return false })
		}, spmdtest.ExpectExit(5))
	})
}
