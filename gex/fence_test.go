package gex_test

import (
	"testing"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/shm"
)

// TestAMFloodSeqCstCommit runs the AM flood (4 ranks on the smp conduit,
// blocking waits with the receive goroutine, so consumers keep going to
// sleep while producers send) with membarrier refused by
// GEXGO_NO_MEMBARRIER: every rank must take the fallback (sequentially
// consistent commits, sleeps without the barrier) and lose nothing. The
// default runs of TestAMFlood cover the release-commit path where
// membarrier is available.
func TestAMFloodSeqCstCommit(t *testing.T) {
	t.Setenv(shm.EnvNoMembarrier, "1")
	conformance(t, 4, jobOpts{waitMode: gex.WaitBlock, rcv: true}, func(e *rankEnv) {
		if !e.loop && shm.EnableHeavyFence() {
			e.Fatalf("membarrier in use with %s set", shm.EnvNoMembarrier)
		}
		amFlood(e, false)
	})
}
