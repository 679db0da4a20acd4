// Command amping sends Active Messages around a ring of ranks and measures
// them. Run it with the launcher:
//
//	go run ./cmd/gexrun -n 4 ./examples/amping
//
// Each rank:
//  1. passes a token around the ring (a Medium request that every rank forwards
//     to its right neighbour, appending its rank), for -laps laps;
//  2. measures the AM Short round trip (request to the right neighbour, reply
//     back) over -iters iterations;
//  3. floods its right neighbour with -flood Short requests and reports the
//     rate at which the neighbour's handler ran them (with -oneway only rank 0
//     floods rank 1, so one core sends while another receives).
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/gex"
)

const (
	hBarrier gex.AMIndex = 128 + iota
	hToken
	hPing
	hPong
	hFlood
	hFloodDone
)

func main() {
	laps := flag.Int("laps", 10, "laps of the token around the ring")
	iters := flag.Int("iters", 20000, "round trips for the latency measurement")
	flood := flag.Int("flood", 1000000, "requests in the flood measurement")
	oneway := flag.Bool("oneway", false, "flood only from rank 0 to rank 1 (the others idle), instead of every rank to its right neighbour")
	flag.Parse()

	c, ep, tm, err := gex.ClientInit("AMPING", 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "amping:", err)
		os.Exit(1)
	}
	me, n := tm.QueryRank(), tm.QuerySize()
	right, left := (me+1)%n, (me+n-1)%n

	var (
		arrived   [2]atomic.Int32 // barrier arrivals by epoch parity
		tokens    atomic.Int32    // tokens seen by this rank
		lastToken atomic.Pointer[[]byte]
		pongs     atomic.Int64
		flooded   atomic.Int64
		floodDone atomic.Int64 // nanoseconds when the last flood AM ran (0 = not yet)
		floodT0   atomic.Int64
	)
	check := func(err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "amping: rank %d: %v\n", me, err)
			c.Exit(1)
		}
	}
	err = ep.RegisterHandlers([]gex.AMEntry{
		{Index: hBarrier, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Name: "barrier",
			Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { arrived[a[0]&1].Add(1) }},
		{Index: hToken, Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 1, Name: "token",
			Fn: func(_ *gex.Token, p []byte, a []gex.AMArg) {
				// The payload is only valid during the handler: keep a copy.
				cp := append([]byte(nil), p...)
				lastToken.Store(&cp)
				tokens.Add(1)
			}},
		{Index: hPing, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Name: "ping",
			Fn: func(t *gex.Token, _ []byte, a []gex.AMArg) { check(t.ReplyShort(hPong, 0, a[0])) }},
		{Index: hPong, Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 1, Name: "pong",
			Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { pongs.Add(1) }},
		{Index: hFlood, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 0, Name: "flood",
			Fn: func(*gex.Token, []byte, []gex.AMArg) {
				if flooded.Add(1) == 1 {
					floodT0.Store(time.Now().UnixNano())
				}
			}},
		{Index: hFloodDone, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 0, Name: "flood-done",
			Fn: func(*gex.Token, []byte, []gex.AMArg) { floodDone.Store(time.Now().UnixNano()) }},
	})
	check(err)

	epoch := int32(0)
	barrier := func() {
		for r := gex.Rank(0); r < n; r++ {
			if r != me {
				check(tm.RequestShort(r, hBarrier, 0, epoch))
			}
		}
		slot := &arrived[epoch&1]
		check(c.BlockUntil(func() bool { return slot.Load() >= int32(n-1) }))
		slot.Add(-int32(n - 1))
		epoch++
	}
	barrier()

	// 1. Token ring: rank 0 starts it; every rank appends its rank and
	// forwards it, laps times around.
	var token []byte
	for lap := 0; lap < *laps; lap++ {
		if me == 0 {
			token = binary.LittleEndian.AppendUint32(token[:0], uint32(me))
		} else {
			want := int32(lap + 1)
			check(c.BlockUntil(func() bool { return tokens.Load() >= want }))
			token = binary.LittleEndian.AppendUint32(*lastToken.Load(), uint32(me))
		}
		if me != 0 || n > 1 {
			check(tm.RequestMedium(right, hToken, token, gex.EventNow, 0, int32(lap)))
		}
		if me == 0 && n > 1 {
			want := int32(lap + 1)
			check(c.BlockUntil(func() bool { return tokens.Load() >= want }))
			token = *lastToken.Load()
		}
	}
	ringOK := true
	if me == 0 && n > 1 {
		// The token that came back lists every rank once, in ring order.
		for i := 0; i < int(n); i++ {
			if len(token) < 4*int(n) || binary.LittleEndian.Uint32(token[4*i:]) != uint32(i) {
				ringOK = false
			}
		}
	}
	barrier()

	// 2. Round-trip latency to the right neighbour.
	rts := make([]time.Duration, 0, *iters)
	for i := 0; i < *iters; i++ {
		want := pongs.Load() + 1
		t0 := time.Now()
		check(tm.RequestShort(right, hPing, 0, int32(i)))
		check(c.BlockUntil(func() bool { return pongs.Load() >= want }))
		rts = append(rts, time.Since(t0))
	}
	barrier()

	// 3. Flood: -flood requests to the right neighbour; it timestamps the first
	// and the last handler run.
	sends := !*oneway || me == 0 && n > 1
	receives := !*oneway || me == 1
	var inject time.Duration
	if sends {
		t0 := time.Now()
		for i := 0; i < *flood; i++ {
			check(tm.RequestShort(right, hFlood, 0))
		}
		check(tm.RequestShort(right, hFloodDone, 0))
		inject = time.Since(t0)
	}
	if receives {
		check(c.BlockUntil(func() bool { return floodDone.Load() != 0 && flooded.Load() == int64(*flood) }))
	}
	barrier()

	recvDur := time.Duration(floodDone.Load() - floodT0.Load())
	fmt.Printf("rank %d/%d: ring: %d laps, token seen %d times%s\n", me, n, *laps, tokens.Load(), ringNote(me, n, ringOK))
	if len(rts) > 0 {
		sort.Slice(rts, func(i, j int) bool { return rts[i] < rts[j] })
		var sum time.Duration
		for _, d := range rts {
			sum += d
		}
		fmt.Printf("rank %d/%d: AM Short round trip to rank %d: avg %.2f us, median %.2f us, min %.2f us (%d iterations)\n",
			me, n, right, us(sum/time.Duration(len(rts))), us(rts[len(rts)/2]), us(rts[0]), len(rts))
	}
	if receives {
		fmt.Printf("rank %d/%d: AM Short flood from rank %d: %d requests handled at %.2f M/s (%.3f us/msg)\n",
			me, n, left, flooded.Load(), float64(*flood)/recvDur.Seconds()/1e6, us(recvDur)/float64(*flood))
	}
	if sends {
		fmt.Printf("rank %d/%d: AM Short flood to rank %d: injected at %.3f us/msg\n", me, n, right, us(inject)/float64(*flood+1))
	}
	barrier()
	if !ringOK {
		c.Exit(1)
	}
	// Close ends the rank's part in the job (under PMI launchers such as
	// hydra, a rank that exits without it counts as failed).
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "amping:", err)
		os.Exit(1)
	}
}

func ringNote(me, n gex.Rank, ok bool) string {
	if me != 0 || n == 1 {
		return ""
	}
	if ok {
		return ", every rank visited in ring order"
	}
	return ", TOKEN CORRUPTED"
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
