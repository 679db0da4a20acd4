package gex_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// BenchmarkAMRoundTripSelf is gexbench am's loop in one process: a Request
// to this rank, the Reply its handler sends, and BlockUntil on the reply
// count, on the loop conduit (the smp engine on the heap). With both sides
// on one goroutine and no cache line crossing cores, ns/op is the software
// cost of a round trip alone (two sends, two polls that deliver, two
// handlers, the wait loop).
func BenchmarkAMRoundTripSelf(b *testing.B) {
	c, ep, tm := selfClient(b, gex.WithWaitMode(gex.WaitSpin))
	var replies atomic.Int64
	seg, err := gex.SegmentAttach(tm, 16384)
	if err != nil {
		b.Fatal(err)
	}
	dst, rdst := seg.QueryAddr()+8192, seg.QueryAddr()+12288
	count := func(*gex.Token, []byte, []gex.AMArg) { replies.Add(1) }
	table := []gex.AMEntry{
		{Name: "rep-short", Flags: gex.FlagAMShort | gex.FlagAMReply, Fn: count},
		{Name: "rep-med", Flags: gex.FlagAMMedium | gex.FlagAMReply, Fn: count},
		{Name: "rep-long", Flags: gex.FlagAMLong | gex.FlagAMReply, Fn: count},
		{Name: "req-short", Flags: gex.FlagAMShort | gex.FlagAMRequest},
		{Name: "req-med", Flags: gex.FlagAMMedium | gex.FlagAMRequest},
		{Name: "req-long", Flags: gex.FlagAMLong | gex.FlagAMRequest},
	}
	repShort, repMed, repLong := &table[0].Index, &table[1].Index, &table[2].Index
	table[3].Fn = func(tk *gex.Token, _ []byte, _ []gex.AMArg) { must(tk.ReplyShort(*repShort, 0)) }
	table[4].Fn = func(tk *gex.Token, p []byte, _ []gex.AMArg) { must(tk.ReplyMedium(*repMed, p, gex.EventNow, 0)) }
	table[5].Fn = func(tk *gex.Token, p []byte, _ []gex.AMArg) { must(tk.ReplyLong(*repLong, p, rdst, gex.EventNow, 0)) }
	if err := ep.RegisterHandlers(table); err != nil {
		b.Fatal(err)
	}
	src := seg.Bytes()[:4096]
	run := func(b *testing.B, send func() error) {
		b.ReportAllocs()
		for b.Loop() {
			want := replies.Load() + 1
			if err := send(); err != nil {
				b.Fatal(err)
			}
			if err := c.BlockUntil(func() bool { return replies.Load() >= want }); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("Short", func(b *testing.B) {
		run(b, func() error { return tm.RequestShort(0, table[3].Index, 0) })
	})
	for _, n := range []int{8, 64, 128, 256, 1024, 4096} {
		b.Run("Medium"+strconv.Itoa(n), func(b *testing.B) {
			run(b, func() error { return tm.RequestMedium(0, table[4].Index, src[:n], gex.EventNow, 0) })
		})
	}
	b.Run("Long8", func(b *testing.B) {
		run(b, func() error { return tm.RequestLong(0, table[5].Index, src[:8], dst, gex.EventNow, 0) })
	})
}
