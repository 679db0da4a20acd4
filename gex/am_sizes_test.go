package gex_test

import (
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gexgo/gexgo/gex"
)

// Medium payloads at every size where the smp conduit changes how it carries
// them: the slot boundaries of an inline payload (a message is 64-byte slots,
// the first holding the ring word, header and args), the end of inline
// payloads (128 bytes), the pool copy's switch to non-temporal stores (32 KiB,
// internal/memcopy) and the largest Medium (64 KiB, a pool buffer). Each is
// sent with 1 and with 16 args, checked byte for byte by the handler (which
// must also find it 16-byte aligned: "suitably aligned to hold any
// datatype", GASNet-1 "Active Message Request"), and echoed back by a Reply
// that the initiator checks too. Then a flood of mixed sizes without waiting
// (the ring wraps around many times, with pads before messages that would
// not fit at its end) checks every payload again.

func mediumSizes(max int) []int {
	sizes := []int{0, 1, 7, 8, 15, 16, 17}
	// Data per slot 64 bytes; the first slot carries 8 bytes of ring word
	// and 24+4*nargs (rounded up to 16) of header and args.
	for _, head := range []int{8 + 32, 8 + 96} { // 1 arg, 16 args
		for k := 1; k <= 4; k++ {
			b := 64*k - head
			sizes = append(sizes, b-1, b, b+1)
		}
	}
	sizes = append(sizes, 127, 128, 129, 255, 256, 4096, 8192, 16384, 32767, 32768, 32769, 65535, 65536) // 32 KiB: where memcopy.Copy switches to non-temporal stores
	out := sizes[:0]
	for _, n := range sizes {
		if n >= 0 && n <= max {
			out = append(out, n)
		}
	}
	return out
}

func payloadByte(id, i int) byte { return byte(id*7 + i*13 + i>>8) }

func TestMediumSizeBoundaries(t *testing.T) {
	conformance(t, 2, jobOpts{}, func(e *rankEnv) {
		peer := 1 - e.rank
		maxMed, err := e.tm.MaxRequestMedium(peer, 0, 16)
		e.Check(err, "MaxRequestMedium")
		var bad, replies atomic.Int64
		var badWhat atomic.Value
		check := func(what string, p []byte, a []gex.AMArg) {
			id, n := int(a[0]), int(a[len(a)-1])
			ok := len(p) == n
			for i := 0; ok && i < n; i++ {
				ok = p[i] == payloadByte(id, i)
			}
			if n > 0 && uintptr(unsafe.Pointer(&p[0]))%16 != 0 {
				ok = false
			}
			for i := 1; ok && i < len(a)-1; i++ {
				ok = a[i] == int32(id*100+i)
			}
			if !ok {
				if bad.Add(1) == 1 {
					badWhat.Store(what)
				}
			}
		}
		table := []gex.AMEntry{
			{Name: "req1", Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 2},
			{Name: "req16", Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 16},
			{Name: "rep1", Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: 2, Fn: func(_ *gex.Token, p []byte, a []gex.AMArg) {
				check("reply, 2 args", p, a)
				replies.Add(1)
			}},
			{Name: "rep16", Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: 16, Fn: func(_ *gex.Token, p []byte, a []gex.AMArg) {
				check("reply, 16 args", p, a)
				replies.Add(1)
			}},
		}
		rep1, rep16 := &table[2].Index, &table[3].Index
		table[0].Fn = func(tk *gex.Token, p []byte, a []gex.AMArg) {
			check("request, 2 args", p, a)
			if err := tk.ReplyMedium(*rep1, p, gex.EventNow, 0, a...); err != nil {
				bad.Add(1)
			}
		}
		table[1].Fn = func(tk *gex.Token, p []byte, a []gex.AMArg) {
			check("request, 16 args", p, a)
			if err := tk.ReplyMedium(*rep16, p, gex.EventNow, 0, a...); err != nil {
				bad.Add(1)
			}
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		e.Barrier()
		buf := make([]byte, maxMed)
		args := make([]gex.AMArg, 16)
		send := func(id, n int, wide bool) {
			for i := 0; i < n; i++ {
				buf[i] = payloadByte(id, i)
			}
			h, na := table[0].Index, 2
			if wide {
				h, na = table[1].Index, 16
			}
			args[0], args[na-1] = int32(id), int32(n)
			for i := 1; i < na-1; i++ {
				args[i] = int32(id*100 + i)
			}
			e.Check(e.tm.RequestMedium(peer, h, buf[:n], gex.EventNow, 0, args[:na]...), "RequestMedium")
		}
		sent := int64(0)
		id := 0
		for _, n := range mediumSizes(maxMed) {
			for _, wide := range []bool{false, true} {
				send(id, n, wide)
				id++
				sent++
				e.Check(e.c.BlockUntil(func() bool { return replies.Load() == sent }), "BlockUntil reply")
			}
		}
		// Mixed sizes in flight at once: the ring wraps, with pads.
		for i := 0; i < 600; i++ {
			send(id, (i*37)%300, i%3 == 0)
			id++
			sent++
		}
		e.Check(e.c.BlockUntil(func() bool { return replies.Load() == sent }), "BlockUntil flood replies")
		e.Barrier()
		if n := bad.Load(); n > 0 {
			e.Fatalf("%d AMs carried a wrong or misaligned payload or args (first: %v)", n, badWhat.Load())
		}
	})
}

// TestAMRoundTripNoAllocs: a Request and the Reply its handler sends, Short
// and Medium (inline in the ring, and in a pool buffer past 128 bytes), cost no
// allocation on the shared-memory path, polling included.
func TestAMRoundTripNoAllocs(t *testing.T) {
	c, ep, tm := selfClient(t)
	var replies atomic.Int64
	table := []gex.AMEntry{
		{Name: "rep-short", Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 1, Fn: func(*gex.Token, []byte, []gex.AMArg) { replies.Add(1) }},
		{Name: "rep-med", Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: 1, Fn: func(*gex.Token, []byte, []gex.AMArg) { replies.Add(1) }},
		{Name: "req-short", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1},
		{Name: "req-med", Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 1},
	}
	repShort, repMed := &table[0].Index, &table[1].Index
	var failed atomic.Value
	table[2].Fn = func(tk *gex.Token, _ []byte, a []gex.AMArg) {
		if err := tk.ReplyShort(*repShort, 0, a[0]); err != nil {
			failed.Store(err)
		}
	}
	table[3].Fn = func(tk *gex.Token, p []byte, a []gex.AMArg) {
		if err := tk.ReplyMedium(*repMed, p, gex.EventNow, 0, a[0]); err != nil {
			failed.Store(err)
		}
	}
	if err := ep.RegisterHandlers(table); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16<<10)
	for _, n := range []int{-1, 8, 128, 129, 4096, 16 << 10} {
		want := replies.Load()
		allocs := testing.AllocsPerRun(500, func() {
			want++
			var err error
			if n < 0 {
				err = tm.RequestShort(0, table[2].Index, 0, 7)
			} else {
				err = tm.RequestMedium(0, table[3].Index, buf[:n], gex.EventNow, 0, 7)
			}
			if err != nil {
				t.Fatal(err)
			}
			for replies.Load() < want {
				if err := c.Poll(); err != nil {
					t.Fatal(err)
				}
			}
		})
		if err := failed.Load(); err != nil {
			t.Fatalf("reply failed: %v", err)
		}
		if allocs != 0 {
			t.Errorf("round trip with a %d-byte payload (-1: Short): %v allocations, want 0", n, allocs)
		}
	}
}
