package gasnet_test

import (
	"testing"

	"github.com/gexgo/gexgo/gasnet"
	"github.com/gexgo/gexgo/gex"
)

// BenchmarkBarrierLayer1 times the barrier calls of a one-node job, where
// the barrier completes at once: what is left is the cost of the calls
// themselves, EX (BarrierNB + Wait) beside GASNet-1 (notify + wait).
func BenchmarkBarrierLayer1(b *testing.B) {
	lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 1})
	if err != nil {
		b.Fatal(err)
	}
	c, ep, tm, err := lj.ClientInit(0, "GASNET1_BENCH", gex.FlagUsesGASNet1)
	if err != nil {
		b.Fatal(err)
	}
	j, err := gasnet.New(c, ep, tm)
	if err != nil {
		b.Fatal(err)
	}
	if err := j.Attach(nil, 1<<16, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	sideBySide(b, func() error {
		ev, err := tm.BarrierNB(0)
		if err == nil {
			err = ev.Wait()
		}
		return err
	}, func() error {
		if err := j.BarrierNotify(0, gasnet.BarrierFlagAnonymous); err != nil {
			return err
		}
		return j.BarrierWait(0, gasnet.BarrierFlagAnonymous)
	})
}
