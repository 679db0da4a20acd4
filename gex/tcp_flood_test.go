package gex_test

import (
	"hash/crc32"
	"os"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// The flood tests drive the tcp conduit's receive and send paths as hard as
// they go: two namespace hosts of one rank each send each other AMs of every
// category and size class at once, in both directions, every payload
// checksummed (CRC-32 in an argument) and its length checked by the handler.
// Both ranks are senders and receivers at the same time, so both sockets fill
// up and each sender must read its own receive side while it waits for room,
// or the two would deadlock.

// envFloodFull runs the full 10^6 AMs per direction (about 1.4 GB each way).
const envFloodFull = "GEXGO_TCP_FLOOD_FULL"

// floodCount is the AMs each rank sends: 10^6 with GEXGO_TCP_FLOOD_FULL=1,
// else ci, a CI-sized run that still has every size class many times over.
func floodCount(ci int) int {
	if os.Getenv(envFloodFull) == "1" {
		return 1_000_000
	}
	return ci
}

const (
	hFloodShort  gex.AMIndex = 200
	hFloodMedium gex.AMIndex = 201
	hFloodLong   gex.AMIndex = 202
	hFloodEcho   gex.AMIndex = 203      // Medium reply echoing a 4 KiB Medium request
	floodSlot                = 64 << 10 // a Long lands in slot seq%floodSlots of the peer's segment
	floodSlots               = 16
)

// floodShapes are the ten size classes, by seq%10: from a Short to 64 KiB
// Mediums and Longs (those only every 100th message, else big).
var floodShapes = [10]struct {
	cat       gex.Flags
	size, big int
}{
	{gex.FlagAMShort, 0, 0}, {gex.FlagAMMedium, 8, 8}, {gex.FlagAMMedium, 100, 100},
	{gex.FlagAMMedium, 1000, 1000}, {gex.FlagAMLong, 8, 8}, {gex.FlagAMLong, 512, 512},
	{gex.FlagAMMedium, 4096, 4096}, {gex.FlagAMLong, 20000, 20000},
	{gex.FlagAMMedium, 300, 65536}, {gex.FlagAMLong, 2000, 65536},
}

// floodShape is message seq's category and payload size.
func floodShape(seq int) (gex.Flags, int) {
	c := floodShapes[seq%10]
	if seq%100 >= 90 {
		return c.cat, c.big
	}
	return c.cat, c.size
}

// floodFill writes message seq's payload from rank src.
func floodFill(b []byte, src, seq int) {
	x := uint32(seq)*2654435761 + uint32(src)*40503 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

// tcpFlood returns a job body that sends floodCount(ci) AMs to the other
// rank while receiving as many, and checks every one.
func tcpFlood(ci int) func(*rankEnv) {
	return func(e *rankEnv) { tcpFloodN(e, floodCount(ci)) }
}

func tcpFloodN(e *rankEnv, n int) {
	var got, bad, echoed atomic.Int64
	check := func(want gex.Flags) func(*gex.Token, []byte, []gex.AMArg) {
		return func(t *gex.Token, p []byte, a []gex.AMArg) {
			cat, size := floodShape(int(a[0]))
			if cat != want || len(p) != size || crc32.ChecksumIEEE(p) != uint32(a[1]) {
				if bad.Add(1) <= 5 {
					e.Logf("AM %d from rank %d: category %v size %d crc %#x, want %v %d %#x", a[0], tokenSrc(t), want, len(p), crc32.ChecksumIEEE(p), cat, size, uint32(a[1]))
				}
			}
			got.Add(1)
			if want == gex.FlagAMMedium && size == 4096 {
				// Answered from the handler while both sides flood: the
				// reply may meet a full socket (its writer polls).
				if err := t.ReplyMedium(hFloodEcho, p, nil, 0, a[0], a[1]); err != nil {
					e.Errorf("ReplyMedium: %v", err)
				}
			}
		}
	}
	e.Check(e.ep.RegisterHandlers([]gex.AMEntry{
		{Index: hFloodShort, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 2, Fn: check(gex.FlagAMShort)},
		{Index: hFloodMedium, Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 2, Fn: check(gex.FlagAMMedium)},
		{Index: hFloodLong, Flags: gex.FlagAMLong | gex.FlagAMRequest, NArgs: 2, Fn: check(gex.FlagAMLong)},
		{Index: hFloodEcho, Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: 2, Fn: func(_ *gex.Token, p []byte, a []gex.AMArg) {
			if _, size := floodShape(int(a[0])); len(p) != size || crc32.ChecksumIEEE(p) != uint32(a[1]) {
				bad.Add(1)
			}
			echoed.Add(1)
		}},
	}), "RegisterHandlers")
	peer := 1 - e.rank
	bs, ev, err := e.tm.QueryBoundSegmentNB(peer, 0)
	e.wait(ev, err, "QueryBoundSegmentNB")
	e.Barrier() // every handler is registered
	buf := make([]byte, 64<<10)
	for seq := 0; seq < n; seq++ {
		cat, size := floodShape(seq)
		p := buf[:size]
		floodFill(p, int(e.rank), seq)
		sum := gex.AMArg(crc32.ChecksumIEEE(p))
		switch cat {
		case gex.FlagAMShort:
			err = e.tm.RequestShort(peer, hFloodShort, 0, gex.AMArg(seq), 0)
		case gex.FlagAMMedium:
			err = e.tm.RequestMedium(peer, hFloodMedium, p, nil, 0, gex.AMArg(seq), sum)
		default:
			dest := bs.Owner + gex.Addr((seq%floodSlots)*floodSlot)
			err = e.tm.RequestLong(peer, hFloodLong, p, dest, nil, 0, gex.AMArg(seq), sum)
		}
		if err != nil {
			e.Fatalf("AM %d: %v", seq, err)
		}
	}
	echoes := int64((n + 3) / 10) // seq%10 == 6
	e.Check(e.c.BlockUntil(func() bool { return got.Load() >= int64(n) && echoed.Load() >= echoes }), "BlockUntil")
	if b := bad.Load(); b != 0 || got.Load() != int64(n) || echoed.Load() != echoes {
		e.Fatalf("received %d AMs (want %d) and %d echoes (want %d), %d of them wrong", got.Load(), n, echoed.Load(), echoes, b)
	}
}

// TestNetnsFlood floods AMs of every size class both ways at once between
// two namespace hosts: 10^5 each way (10^6 with GEXGO_TCP_FLOOD_FULL=1).
func TestNetnsFlood(t *testing.T) {
	processOnly(t)
	adjust := inNetns(t, 2)
	runSMP(t, 2, jobOpts{segSize: floodSlots * floodSlot, env: []string{"GEX_CONDUIT=tcp"}, launch: adjust}, tcpFlood(100_000))
}

// TestNetnsFloodWaitModes runs the flood in each wait mode, and with the
// receive goroutine: spin (the polling goroutine busy-polls the sockets),
// block (it sleeps in the kernel and the waker's epoll wakes it) and
// spinblock.
func TestNetnsFloodWaitModes(t *testing.T) {
	processOnly(t)
	adjust := inNetns(t, 2)
	for _, tc := range []struct {
		name string
		mode gex.WaitMode
		rcv  bool
	}{
		{"spin", gex.WaitSpin, false},
		{"block", gex.WaitBlock, false},
		{"spinblock", gex.WaitSpinBlock, false},
		{"block-rcv", gex.WaitBlock, true},
	} {
		o := jobOpts{segSize: floodSlots * floodSlot, env: []string{"GEX_CONDUIT=tcp"}, launch: adjust, waitMode: tc.mode, rcv: tc.rcv}
		t.Run(tc.name, func(t *testing.T) { runSMP(t, 2, o, tcpFlood(20_000)) })
	}
}

func tokenSrc(t *gex.Token) gex.Rank {
	info, _ := t.Info(gex.TISrcRank)
	return info.SrcRank
}

// tcpLargeRMA moves 4 MiB + 5 bytes each way between the hosts, with the
// local side in the segment (puts and gets as pipelined Longs straight into
// the segments) and in the heap (gets as Medium replies), and checks every
// byte.
func tcpLargeRMA(e *rankEnv) {
	const n = 4<<20 + 5
	if e.rank != 0 {
		return
	}
	peer := gex.Rank(1)
	bs := rmaSeg(e, peer)
	mem := e.seg.Bytes()
	src, back := mem[:n], mem[n+3:2*n+3] // odd offsets: chunks not aligned
	floodFill(src, 0, 7)
	e.Check(e.tm.PutBlocking(peer, bs.Owner+1, src, 0), "PutBlocking")
	e.Check(e.tm.GetBlocking(back, peer, bs.Owner+1, 0), "GetBlocking into the segment")
	heap := make([]byte, n)
	e.Check(e.tm.GetBlocking(heap, peer, bs.Owner+1, 0), "GetBlocking into the heap")
	for i := range src {
		if back[i] != src[i] || heap[i] != src[i] {
			e.Fatalf("byte %d of %d: put %#x, got back %#x (segment) %#x (heap)", i, n, src[i], back[i], heap[i])
		}
	}
	ev, err := e.tm.PutNB(peer, bs.Owner+n+9, src[5:], nil, 0)
	e.wait(ev, err, "PutNB")
	ev, err = e.tm.GetNB(back[:n-5], peer, bs.Owner+n+9, 0)
	e.wait(ev, err, "GetNB")
	if string(back[:n-5]) != string(src[5:]) {
		e.Fatalf("PutNB/GetNB of %d bytes did not round-trip", n-5)
	}
}

// TestNetnsLargeRMA: RMA of several MiB between two namespace hosts.
func TestNetnsLargeRMA(t *testing.T) {
	processOnly(t)
	adjust := inNetns(t, 2)
	runSMP(t, 2, jobOpts{segSize: 16 << 20, env: []string{"GEX_CONDUIT=tcp"}, launch: adjust}, tcpLargeRMA)
}

// processOnly skips a tcp conduit test under the loop conduit.
func processOnly(t *testing.T) {
	t.Helper()
	if os.Getenv(envConduit) == "loop" {
		t.Skipf("%s=loop: the tcp conduit runs between processes", envConduit)
	}
}
