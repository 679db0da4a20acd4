package gex_test

import (
	"fmt"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
)

// Two ranks, as goroutines of this process (the loop conduit), exchange a
// Medium request and a Short reply. With gexrun the same code runs as
// processes: call gex.ClientInit instead of LoopJob.ClientInit.
func Example() {
	job, err := gex.NewLoopJob(gex.LoopConfig{Size: 2})
	if err != nil {
		panic(err)
	}
	var lines [2]string
	job.Run(func(rank int) {
		c, ep, tm, err := job.ClientInit(rank, "EXAMPLE", 0)
		if err != nil {
			panic(err)
		}
		var answered, asked atomic.Bool
		err = ep.RegisterHandlers([]gex.AMEntry{
			{Index: 200, Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 1, Name: "ask",
				Fn: func(t *gex.Token, msg []byte, args []gex.AMArg) {
					info, _ := t.Info(gex.TISrcRank)
					lines[rank] = fmt.Sprintf("rank %d: %q (arg %d) from rank %d", rank, msg, args[0], info.SrcRank)
					asked.Store(true)
					if err := t.ReplyShort(201, 0); err != nil {
						panic(err)
					}
				}},
			{Index: 201, Flags: gex.FlagAMShort | gex.FlagAMReply, Name: "answer",
				Fn: func(*gex.Token, []byte, []gex.AMArg) { answered.Store(true) }},
		})
		if err != nil {
			panic(err)
		}
		// SegmentAttach is collective and ends with a barrier: after it, every
		// rank has registered its handlers.
		if _, err := gex.SegmentAttach(tm, 1<<16); err != nil {
			panic(err)
		}
		peer := gex.Rank(1 - rank)
		if err := tm.RequestMedium(peer, 200, []byte("hello"), gex.EventNow, 0, int32(10+rank)); err != nil {
			panic(err)
		}
		// Poll until our request was answered and the peer's request arrived.
		c.BlockUntil(func() bool { return answered.Load() && asked.Load() })
		c.Close()
	})
	fmt.Println(lines[0])
	fmt.Println(lines[1])
	// Output:
	// rank 0: "hello" (arg 11) from rank 1
	// rank 1: "hello" (arg 10) from rank 0
}
