// Command pmiprog is the program TestHydra starts with mpiexec.hydra: every
// rank initialises a gex client (bootstrapped through PMI), checks that all
// ranks share one neighbourhood, sends an AM ping to its right neighbour and
// waits for the reply, runs a barrier, and ends as -end says.
package main

import (
	"flag"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
)

const (
	hPing gex.AMIndex = 128 + iota
	hPong
)

func main() {
	end := flag.String("end", "exit", "how to end: exit (Client.Exit(0)), close (Client.Close, return) or return")
	failRank := flag.Int("fail", -1, "this rank calls Client.Exit(3) after the first barrier")
	flag.Parse()
	c, ep, tm, err := gex.ClientInit("PMIPROG", 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pmiprog:", err)
		os.Exit(1)
	}
	me, n := tm.QueryRank(), tm.QuerySize()
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "pmiprog: rank %d: %s\n", me, fmt.Sprintf(format, args...))
		c.Exit(1)
	}
	var pongs atomic.Int32
	err = ep.RegisterHandlers([]gex.AMEntry{
		{Index: hPing, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Name: "ping",
			Fn: func(t *gex.Token, _ []byte, a []gex.AMArg) {
				if err := t.ReplyShort(hPong, 0, a[0]+1); err != nil {
					fail("reply: %v", err)
				}
			}},
		{Index: hPong, Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 1, Name: "pong",
			Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { pongs.Add(1) }},
	})
	if err != nil {
		fail("RegisterHandlers: %v", err)
	}
	nb, _ := c.QueryNbrhdInfo()
	if len(nb) != int(n) {
		fail("neighbourhood has %d ranks, want %d", len(nb), n)
	}
	ev, err := tm.BarrierNB(0)
	if err != nil {
		fail("BarrierNB: %v", err)
	}
	if err := ev.Wait(); err != nil {
		fail("barrier: %v", err)
	}
	if int(me) == *failRank {
		c.Exit(3)
	}
	if err := tm.RequestShort((me+1)%n, hPing, 0, gex.AMArg(me)); err != nil {
		fail("RequestShort: %v", err)
	}
	if err := c.BlockUntil(func() bool { return pongs.Load() == 1 }); err != nil {
		fail("BlockUntil: %v", err)
	}
	if ev, err = tm.BarrierNB(0); err == nil {
		err = ev.Wait()
	}
	if err != nil {
		fail("barrier: %v", err)
	}
	fmt.Printf("pmiprog: rank %d of %d: ping ok, nbrhd %d\n", me, n, len(nb))
	switch *end {
	case "exit":
		c.Exit(0)
	case "close":
		if err := c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pmiprog: Close:", err)
			os.Exit(1)
		}
	}
}
