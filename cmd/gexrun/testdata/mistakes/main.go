// Command mistakes makes, on purpose, the mistakes that used to hang a job
// silently; the gexrun tests run it and check that each ends the job with a
// line that names it.
//
//	-mode leave   rank -rank returns from main (status -status) right after
//	              ClientInit (-before: before it); the others wait in a
//	              barrier and print the error their wait returned
//	-mode am      rank 0 sends an AM to handler -handler, which rank 1 never
//	              registers, then waits for a reply
//	-mode hang    every rank waits for an AM that nobody sends (deadlock);
//	              with -barrier ranks other than 0 wait in a barrier first
//	-mode busy    ranks pass AMs around a ring, one a millisecond, for at
//	              least -for, then Close
//	-mode wait    every rank waits on a barrier event with a context that is
//	              cancelled after -for (Event.WaitContext), then a full barrier
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/gex"
)

func main() {
	mode := flag.String("mode", "leave", "leave, am, hang, busy or wait")
	rank := flag.Int("rank", 1, "leave: the rank that leaves")
	status := flag.Int("status", 0, "leave: its exit status")
	handler := flag.Int("handler", 200, "am: the handler index rank 1 never registers")
	dur := flag.Duration("for", 3*time.Second, "busy: how long; wait: the context's timeout")
	before := flag.Bool("before", false, "leave: before ClientInit")
	inBarrier := flag.Bool("barrier", false, "hang: ranks other than 0 wait in a barrier")
	flag.Parse()
	if *mode == "leave" && *before && os.Getenv("GEX_RANK") == strconv.Itoa(*rank) {
		fmt.Printf("rank %d leaves at %d\n", *rank, time.Now().UnixNano())
		os.Exit(*status)
	}
	c, ep, tm, err := gex.ClientInit("MISTAKES", 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mistakes:", err)
		os.Exit(1)
	}
	me, n := tm.QueryRank(), tm.QuerySize()
	switch *mode {
	case "leave":
		if int(me) == *rank {
			fmt.Printf("rank %d leaves at %d\n", me, time.Now().UnixNano())
			os.Exit(*status)
		}
		ev, err := tm.BarrierNB(0)
		if err == nil {
			err = ev.Wait()
		}
		fmt.Printf("rank %d: barrier: %v\n", me, err)
		select {} // stopped by the job's end
	case "am":
		var got atomic.Int32
		if me == 0 {
			if err := ep.RegisterHandlers([]gex.AMEntry{{Index: 201, Flags: gex.FlagAMShort | gex.FlagAMReply, Fn: func(*gex.Token, []byte, []gex.AMArg) { got.Add(1) }}}); err != nil {
				panic(err)
			}
		}
		barrier(tm)
		if me == 0 {
			if err := tm.RequestShort(1, gex.AMIndex(*handler), 0, 7); err != nil {
				fmt.Println("RequestShort:", err)
			}
		}
		err := c.BlockUntil(func() bool { return got.Load() > 0 })
		fmt.Printf("rank %d: BlockUntil: %v\n", me, err)
		select {}
	case "hang":
		var got atomic.Int32
		ep.RegisterHandlers([]gex.AMEntry{{Index: 150, Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { got.Add(1) }}})
		barrier(tm)
		fmt.Printf("rank %d: waiting\n", me)
		if *inBarrier && me != 0 {
			barrier(tm)
		}
		c.BlockUntil(func() bool { return got.Load() > 0 })
	case "busy":
		var got atomic.Int64
		ep.RegisterHandlers([]gex.AMEntry{{Index: 150, Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { got.Add(1) }}})
		barrier(tm)
		iters := int64(*dur / time.Millisecond) // the same count on every rank
		for i := int64(1); i <= iters; i++ {
			tm.RequestShort((me+1)%n, 150, 0)
			c.BlockUntil(func() bool { return got.Load() >= i })
			time.Sleep(time.Millisecond)
		}
		barrier(tm)
		fmt.Printf("rank %d: busy done after %d AMs\n", me, got.Load())
		c.Close()
	case "wait":
		if me == 0 {
			time.Sleep(*dur * 3) // the others' barrier cannot complete before
		}
		ev, err := tm.BarrierNB(0)
		if err != nil {
			panic(err)
		}
		if me != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), *dur)
			err = ev.WaitContext(ctx)
			cancel()
			fmt.Printf("rank %d: WaitContext: %v\n", me, err)
		}
		fmt.Printf("rank %d: Wait: %v\n", me, ev.Wait())
		c.Close()
	}
}

func barrier(tm *gex.TM) {
	ev, err := tm.BarrierNB(0)
	if err == nil {
		err = ev.Wait()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: barrier: %v\n", tm.QueryRank(), err)
		os.Exit(1)
	}
}
