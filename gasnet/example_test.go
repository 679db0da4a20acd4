package gasnet_test

import (
	"fmt"
	"sync/atomic"

	"github.com/gexgo/gexgo/gasnet"
	"github.com/gexgo/gexgo/gex"
)

// A two-node job the GASNet-1 way, on the in-process loop conduit (a program
// started by gexrun calls gasnet.Init instead of gasnet.New): each node puts
// its number into its right neighbour's segment, a named barrier separates
// the phases, and an AM to node 0 carries a checksum back.
func Example() {
	lj, _ := gex.NewLoopJob(gex.LoopConfig{Size: 2})
	var sum atomic.Int64
	lj.Run(func(rank int) {
		c, ep, tm, _ := lj.ClientInit(rank, "EXAMPLE", gex.FlagUsesGASNet1)
		j, _ := gasnet.New(c, ep, tm)
		table := []gasnet.HandlerEntry{{Fn: func(t *gasnet.Token, _ []byte, args []gasnet.HandlerArg) {
			sum.Add(int64(args[0]))
		}}}
		if err := j.Attach(table, gasnet.PageSize, 0); err != nil {
			panic(err)
		}
		me, n := j.Mynode(), j.Nodes()
		segs := make([]gasnet.SegInfo, n)
		_ = j.GetSegmentInfo(segs)
		right := (me + 1) % n
		_ = j.PutVal(right, segs[right].Addr, gasnet.RegisterValue(me+100), 8)
		_ = j.BarrierNotify(1, 0)
		_ = j.BarrierWait(1, 0)
		got, _ := j.GetVal(me, segs[me].Addr, 8)
		_ = j.AMRequestShort(0, table[0].Index, gasnet.HandlerArg(got))
		_ = j.BarrierNotify(2, 0)
		_ = j.BarrierWait(2, 0)
		if me == 0 {
			_ = j.BlockUntil(func() bool { return sum.Load() == 201 })
			fmt.Println("node 0 received", sum.Load())
		}
		_ = j.BarrierNotify(3, 0)
		_ = j.BarrierWait(3, 0)
		_ = c.Close()
	})
	// Output: node 0 received 201
}
