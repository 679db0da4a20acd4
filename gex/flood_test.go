package gex_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// TestAMFlood: 4 ranks each send their share of 1,000,000 requests round-robin
// to every rank (themselves included) without waiting, every request handler
// answers with a Reply, and nothing is lost, duplicated or deadlocked, on 2
// cores. Payload sizes cycle through inline (Short, small Medium) and
// pool-buffer (large Medium) paths so both kinds of send resources run out and
// flow control has to work in both directions at once.
func TestAMFlood(t *testing.T) {
	for _, o := range []struct {
		name string
		opts jobOpts
	}{
		{"spinblock", jobOpts{}},
		{"block+rcv", jobOpts{waitMode: gex.WaitBlock, rcv: true}},
	} {
		t.Run(o.name, func(t *testing.T) {
			conformance(t, 4, o.opts, func(e *rankEnv) { amFlood(e, o.name == "spinblock") })
		})
	}
}

func amFlood(e *rankEnv, full bool) {
	total := 1_000_000
	if e.loop || !full {
		total = 40_000 // goroutine ranks (and -race) are much slower; the property is the same
	}
	per := total / int(e.size)
	var (
		reqs    atomic.Int64 // requests handled here
		replies atomic.Int64 // replies handled here
		sum     atomic.Int64 // checksum of request args handled here
		bad     atomic.Pointer[string]
	)
	payload := make([]byte, 4096)
	for i := range payload {
		payload[i] = byte(i)
	}
	check := func(msg string) { bad.CompareAndSwap(nil, &msg) }
	// Fixed indices: handlers may run (on the receive goroutine) as soon as
	// they are registered, so they must not read anything assigned after.
	const repIdx, shortIdx, medIdx gex.AMIndex = 201, 202, 203
	reqFn := func(tk *gex.Token, p []byte, a []gex.AMArg) {
		for i, b := range p {
			if b != byte(i) {
				check(fmt.Sprintf("payload byte %d corrupted", i))
				break
			}
		}
		if int(a[1]) != len(p) {
			check(fmt.Sprintf("payload length %d, arg says %d", len(p), a[1]))
		}
		reqs.Add(1)
		sum.Add(int64(a[0]))
		if err := tk.ReplyShort(repIdx, 0); err != nil {
			check(err.Error())
		}
	}
	table := []gex.AMEntry{
		{Index: repIdx, Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 0, Name: "flood-rep",
			Fn: func(*gex.Token, []byte, []gex.AMArg) { replies.Add(1) }},
		{Index: shortIdx, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 2, Name: "flood-short", Fn: reqFn},
		{Index: medIdx, Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 2, Name: "flood-medium", Fn: reqFn},
	}
	e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
	e.Barrier()

	sizes := [...]int{0, 8, 100, 4096, 0, 1000}
	for i := 0; i < per; i++ {
		dst := gex.Rank(i) % e.size
		n := sizes[i%len(sizes)]
		var err error
		if n == 0 && i%2 == 0 {
			err = e.tm.RequestShort(dst, shortIdx, 0, int32(i), 0)
		} else {
			err = e.tm.RequestMedium(dst, medIdx, payload[:n], gex.EventNow, 0, int32(i), int32(n))
		}
		if err != nil {
			e.Fatalf("request %d: %v", i, err)
		}
	}
	e.Check(e.c.BlockUntil(func() bool { return replies.Load() == int64(per) }), "BlockUntil(replies)")
	e.Barrier()
	if b := bad.Load(); b != nil {
		e.Fatalf("%s", *b)
	}
	// Every rank r sent requests i = r'..per-1 with i%size == r to rank r: the
	// handled count and checksum at this rank are determined.
	var wantN, wantSum int64
	for i := 0; i < per; i++ {
		if gex.Rank(i)%e.size == e.rank {
			wantN++
			wantSum += int64(i)
		}
	}
	wantN *= int64(e.size)
	wantSum *= int64(e.size)
	if reqs.Load() != wantN || sum.Load() != wantSum {
		e.Fatalf("handled %d requests with checksum %d, want %d and %d", reqs.Load(), sum.Load(), wantN, wantSum)
	}
	if replies.Load() != int64(per) {
		e.Fatalf("%d replies, want %d", replies.Load(), per)
	}
	e.Logf("flood: %d requests and %d replies handled per rank, %d AMs in all", wantN, per, 2*per*int(e.size))
}
