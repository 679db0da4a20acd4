package gex_test

import (
	"strconv"
	"testing"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

func inRank() bool { return spmdtest.InRank() }

// runSMP runs body as an n-rank job of real processes on the smp conduit: the
// test binary re-executed as the ranks (see package spmdtest).
func runSMP(t *testing.T, n int, o jobOpts, body func(e *rankEnv)) {
	t.Helper()
	opts := []spmdtest.Option{spmdtest.Env(o.env...)}
	if o.supernode > 0 {
		opts = append(opts, spmdtest.Env("GASNET_SUPERNODE_MAXSIZE="+strconv.Itoa(o.supernode)))
	}
	if o.launch != nil {
		opts = append(opts, spmdtest.Launch(o.launch))
	}
	if o.hosts != nil {
		k := 1
		for i := 1; i < len(o.hosts); i++ {
			if o.hosts[i] != o.hosts[i-1] {
				k++
			}
		}
		opts = append(opts, spmdtest.PretendHosts(k))
	}
	spmdtest.Run(t, n, func(t *testing.T) {
		c, ep, tm, err := gex.ClientInit("CONFORMANCE", gex.FlagDeferThreads, gex.WithReceiveGoroutine(o.rcv), gex.WithWaitMode(o.waitMode))
		if err != nil {
			t.Fatalf("ClientInit: %v", err)
		}
		e := &rankEnv{t: t, c: c, ep: ep, tm: tm}
		e.fatal = func(msg string) { t.Fatal(msg) } // the rank exits non-zero; the launcher ends the job
		setup(e, o)
		c.StartProgressThreads() // after the barrier handler is registered
		body(e)
		e.Barrier()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}, opts...)
}
