package gex_test

import (
	"encoding/binary"
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

// Four ranks split into even and odd teams; each team sums its members' ranks
// with ReduceToAllNB, and the whole job ends with a barrier.
func ExampleTM_ReduceToAllNB() {
	job, err := gex.NewLoopJob(gex.LoopConfig{Size: 4})
	if err != nil {
		panic(err)
	}
	var lines [4]string
	job.Run(func(rank int) {
		c, _, tm, err := job.ClientInit(rank, "EXAMPLE", 0)
		if err != nil {
			panic(err)
		}
		seg, err := gex.SegmentAttach(tm, 1<<16)
		if err != nil {
			panic(err)
		}
		// The team's scratch space comes from the bound segment.
		team, _, err := tm.Split(rank%2, 0, seg.Bytes()[:gex.ScratchSize], 0)
		if err != nil {
			panic(err)
		}
		src, dst := make([]byte, 8), make([]byte, 8)
		binary.LittleEndian.PutUint64(src, uint64(rank))
		ev, err := team.ReduceToAllNB(dst, src, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
		if err != nil {
			panic(err)
		}
		if err := ev.Wait(); err != nil {
			panic(err)
		}
		lines[rank] = fmt.Sprintf("rank %d: team rank %d of %d, sum %d", rank, team.QueryRank(), team.QuerySize(), binary.LittleEndian.Uint64(dst))
		if _, err := team.Destroy(0); err != nil {
			panic(err)
		}
		ev, _ = tm.BarrierNB(0)
		ev.Wait()
		c.Close()
	})
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// rank 0: team rank 0 of 2, sum 2
	// rank 1: team rank 0 of 2, sum 4
	// rank 2: team rank 1 of 2, sum 2
	// rank 3: team rank 1 of 2, sum 4
}
