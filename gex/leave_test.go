package gex_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// TestRankLeavesEarly: rank 2 of 4 returns from its work with status 0
// without Close while the others wait for it in a barrier. The job ends
// within 2 s of its leaving, with one launcher line naming it and the ranks
// still running, and every survivor's wait fails with an error naming it
// (docs/core.md, "Ending a job"). On one host (smp), and across two hosts
// made of network namespaces (tcp conduit between them).
func TestRankLeavesEarly(t *testing.T) {
	if os.Getenv(envConduit) == "loop" {
		t.Skipf("%s=loop: leaving is a process ending", envConduit)
	}
	for _, where := range []string{"smp", "netns"} {
		t.Run(where, func(t *testing.T) {
			var out string
			opts := []spmdtest.Option{spmdtest.Output(&out), spmdtest.Timeout(30 * time.Second), spmdtest.EndsEarly()}
			if where == "netns" {
				adjust := inNetns(t, 2)
				if adjust != nil {
					opts = append(opts, spmdtest.Env("GEX_CONDUIT=tcp"), spmdtest.Launch(adjust))
				}
			}
			spmdtest.Run(t, 4, func(t *testing.T) {
				_, _, tm, err := gex.ClientInit("LEAVE", 0)
				if err != nil {
					t.Fatal(err)
				}
				ev, _ := tm.BarrierNB(0)
				ev.Wait()
				me := tm.QueryRank()
				if me == 2 {
					fmt.Printf("rank 2 leaves at %d\n", time.Now().UnixNano())
					os.Exit(0) // a return from main without Close
				}
				ev, _ = tm.BarrierNB(0)
				fmt.Printf("rank %d: barrier: %v\n", me, ev.Wait())
				time.Sleep(time.Minute) // the job ends under this rank
				t.Fatal("the job did not end")
			}, opts...)
			if spmdtest.InRank() {
				return
			}
			ended := time.Now()
			line := regexp.MustCompile(`(?m)^gexrun: rank 2 \(pid \d+\) exited with status 0 without calling Close; it left while ranks 0, 1, 3 were still running; terminating the job$`)
			if !line.MatchString(out) {
				t.Errorf("the job's output lacks the launcher line %v:\n%s", line, out)
			}
			for _, r := range []int{0, 1, 3} {
				re := regexp.MustCompile(fmt.Sprintf(`(?m)^\[%d\] rank %d: barrier: gex: Event.Wait: rank 2 \(pid \d+\) exited with status 0 without calling Close; .*\(pending: Event.Wait for Barrier \(peer: rank \d\)\) \(GASNET_ERR_RESOURCE\)$`, r, r))
				if !re.MatchString(out) {
					t.Errorf("rank %d's wait did not fail naming rank 2:\n%s", r, out)
				}
			}
			m := regexp.MustCompile(`rank 2 leaves at (\d+)`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("rank 2 did not say when it left:\n%s", out)
			}
			ns, _ := strconv.ParseInt(m[1], 10, 64)
			if d := ended.Sub(time.Unix(0, ns)); d > 2*time.Second {
				t.Errorf("the job ended %v after rank 2 left, want within 2s", d)
			}
		})
	}
}
