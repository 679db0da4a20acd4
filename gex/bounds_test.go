package gex_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Initiator-side argument checks of the fixed-payload AM calls (GASNet-EX
// "Fixed-payload AM APIs" and "RMA", NOTE 4 "Remote addressing": "In all
// cases, the remote memory must be in the remote bound segment"; AM NOTE 5:
// "for the special case of 'nbytes == 0', no bound segment is required";
// NOTE 2: "GEX_EVENT_DEFER is prohibited" for AMs and "GEX_EVENT_GROUP is
// *not* permitted" for Replies; NOTE 4 "Overlap": "High-quality
// implementations may choose to diagnose such errors"), and the receiver's
// own checks: whatever a peer sends, a rank must not run a handler against
// its registration or write outside its segment.

// boundsTable registers the handlers the bounds tests use, in the same order
// on every rank.
type boundsTable struct {
	short, med, long, rep gex.AMIndex
	ran                   atomic.Int32
	longAddr              atomic.Uint64        // last Long handler's Token.Addr
	longLen               atomic.Int64         // and payload length
	longPtr               atomic.Pointer[byte] // and payload's first byte
}

func registerBounds(e *rankEnv, b *boundsTable, replyCheck func(tk *gex.Token)) {
	table := []gex.AMEntry{
		{Name: "short", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Fn: func(tk *gex.Token, _ []byte, _ []gex.AMArg) {
			if replyCheck != nil {
				replyCheck(tk)
			}
			b.ran.Add(1)
		}},
		{Name: "med", Flags: gex.FlagAMMedium | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { b.ran.Add(1) }},
		{Name: "long", Flags: gex.FlagAMLong | gex.FlagAMRequest, Fn: func(tk *gex.Token, p []byte, _ []gex.AMArg) {
			b.longAddr.Store(uint64(tk.Addr()))
			b.longLen.Store(int64(len(p)))
			if len(p) > 0 {
				b.longPtr.Store(&p[0])
			}
			b.ran.Add(1)
		}},
		{Name: "rep", Flags: gex.FlagAMMedLong | gex.FlagAMReply, Fn: func(*gex.Token, []byte, []gex.AMArg) { b.ran.Add(1) }},
	}
	e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
	b.short, b.med, b.long, b.rep = table[0].Index, table[1].Index, table[2].Index, table[3].Index
}

func expectBadArg(e *rankEnv, what string, err error) {
	e.t.Helper()
	if err == nil || !errors.Is(err, gex.ErrBadArg) || errors.Is(err, gex.ErrNoOp) {
		e.Fatalf("%s: %v, want an error wrapping ErrBadArg", what, err)
	}
}

func TestLongBoundsAtInitiator(t *testing.T) {
	for _, mode := range []struct {
		name      string
		supernode int
	}{{"mapped", 0}, {"unmapped", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			const segSize = 1 << 16
			conformance(t, 2, jobOpts{segSize: segSize, supernode: mode.supernode}, func(e *rankEnv) {
				var b boundsTable
				registerBounds(e, &b, nil)
				e.Barrier()
				peer := (e.rank + 1) % e.size
				bs, _, err := e.tm.QueryBoundSegmentNB(peer, 0)
				e.Check(err, "QueryBoundSegmentNB")
				if bs.Size != segSize {
					e.Fatalf("peer segment size %d, want %d", bs.Size, segSize)
				}
				base, end := bs.Owner, bs.Owner+gex.Addr(bs.Size)
				buf := make([]byte, 64)
				for _, tc := range []struct {
					name string
					dest gex.Addr
					n    int
				}{
					{"starting at the end", end, 1},
					{"far beyond the end", end + 1<<20, 8},
					{"straddling the end", end - 4, 8},
					{"one byte before the base", base - 1, 1},
					{"straddling the base", base - 4, 8},
					{"wrapping the address space", ^gex.Addr(0) - 2, 8},
				} {
					expectBadArg(e, "RequestLong "+tc.name, e.tm.RequestLong(peer, b.long, buf[:tc.n], tc.dest, nil, 0))
				}
				// Offsets with FlagPeerSegOffset are bounded the same way.
				expectBadArg(e, "RequestLong offset at the end", e.tm.RequestLong(peer, b.long, buf[:1], gex.Addr(bs.Size), nil, gex.FlagPeerSegOffset))
				expectBadArg(e, "RequestLong offset straddling the end", e.tm.RequestLong(peer, b.long, buf[:8], gex.Addr(bs.Size-4), nil, gex.FlagPeerSegOffset))
				// The last byte and the whole segment are inside.
				e.Check(e.tm.RequestLong(peer, b.long, buf[:1], end-1, nil, 0), "RequestLong of the last byte")
				e.Check(e.c.BlockUntil(func() bool { return b.ran.Load() >= 1 }), "BlockUntil")
				e.Barrier()
				if b.ran.Load() != 1 {
					e.Fatalf("%d handlers ran, want 1 (only the valid Long)", b.ran.Load())
				}
			})
		})
	}
}

// NOTE 5: "for the special case of 'nbytes == 0', no bound segment is
// required", and "dest_addr for Long is guaranteed to be passed to the handler
// as provided by the initiator, even for the degenerate case when nbytes==0".
func TestLongZeroBytesWithoutSegment(t *testing.T) {
	for _, mode := range []struct {
		name      string
		supernode int
	}{{"mapped", 0}, {"unmapped", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			conformance(t, 2, jobOpts{supernode: mode.supernode}, func(e *rankEnv) {
				var b boundsTable
				registerBounds(e, &b, nil)
				e.Barrier()
				peer := (e.rank + 1) % e.size
				if bs, _, err := e.tm.QueryBoundSegmentNB(peer, 0); err != nil || bs.Size != 0 {
					e.Fatalf("QueryBoundSegmentNB before any attach: size %d, %v; want an unsuccessful query (size 0)", bs.Size, err)
				}
				const dest = gex.Addr(0x5eed000)
				e.Check(e.tm.RequestLong(peer, b.long, nil, dest, nil, 0), "zero-byte RequestLong without a segment")
				e.Check(e.tm.RequestLong(peer, b.long, []byte{}, dest, nil, 0), "zero-byte RequestLong (empty slice) without a segment")
				e.Check(e.c.BlockUntil(func() bool { return b.ran.Load() >= 2 }), "BlockUntil")
				if got := gex.Addr(b.longAddr.Load()); got != dest || b.longLen.Load() != 0 {
					e.Fatalf("zero-byte Long handler saw Addr %#x, %d bytes; want %#x, 0", got, b.longLen.Load(), dest)
				}
				// A Long with a payload needs a segment.
				expectBadArg(e, "one-byte RequestLong to a rank without a segment", e.tm.RequestLong(peer, b.long, []byte{1}, dest, nil, 0))
				expectBadArg(e, "one-byte RequestLong to self without a segment", e.tm.RequestLong(e.rank, b.long, []byte{1}, dest, nil, 0))
				e.Barrier()
				if b.ran.Load() != 2 {
					e.Fatalf("%d handlers ran, want 2", b.ran.Load())
				}
			})
		})
	}
}

func TestAMArgumentChecks(t *testing.T) {
	for _, mode := range []struct {
		name      string
		supernode int
	}{{"mapped", 0}, {"unmapped", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			conformance(t, 2, jobOpts{segSize: 8 << 20, supernode: mode.supernode}, func(e *rankEnv) {
				var b boundsTable
				var replyErrs atomic.Pointer[string]
				var replies atomic.Int32
				replyCheck := func(tk *gex.Token) {
					msg := ""
					maxM, _ := tk.MaxReplyMedium(0, 0)
					maxL, _ := tk.MaxReplyLong(0, 0)
					info, _ := tk.Info(gex.TISrcRank)
					bs, _, _ := e.tm.QueryBoundSegmentNB(info.SrcRank, gex.FlagImmediate)
					for _, c := range []namedCall{
						{"ReplyMedium above MaxReplyMedium", func() error { return tk.ReplyMedium(b.rep, make([]byte, maxM+1), nil, 0) }},
						{"ReplyLong above MaxReplyLong", func() error { return tk.ReplyLong(b.rep, make([]byte, maxL+1), bs.Owner, nil, 0) }},
						{"ReplyMedium with EventGroup", func() error { return tk.ReplyMedium(b.rep, nil, gex.EventGroup, 0) }},
						{"ReplyLong with EventGroup", func() error { return tk.ReplyLong(b.rep, nil, bs.Owner, gex.EventGroup, 0) }},
						{"ReplyMedium with EventDefer", func() error { return tk.ReplyMedium(b.rep, nil, gex.EventDefer, 0) }},
						{"ReplyShort to index 127", func() error { return tk.ReplyShort(gex.AMIndexBase-1, 0) }},
						{"ReplyShort with 17 args", func() error { return tk.ReplyShort(b.rep, 0, make([]gex.AMArg, 17)...) }},
					} {
						if err := c.f(); err == nil || !errors.Is(err, gex.ErrBadArg) {
							msg += fmt.Sprintf("%s: %v; ", c.name, err)
						}
					}
					// The refused Replies consumed nothing: a valid one still goes.
					if err := tk.ReplyMedium(b.rep, make([]byte, maxM), nil, 0); err != nil {
						msg += fmt.Sprintf("valid ReplyMedium after refused ones: %v", err)
					}
					if msg != "" {
						replyErrs.Store(&msg)
					}
					replies.Add(1)
				}
				registerBounds(e, &b, replyCheck)
				e.Barrier()
				peer := (e.rank + 1) % e.size
				bs, _, err := e.tm.QueryBoundSegmentNB(peer, 0)
				e.Check(err, "QueryBoundSegmentNB")
				maxMed, err := e.tm.MaxRequestMedium(peer, 0, 0)
				e.Check(err, "MaxRequestMedium")
				maxLong, err := e.tm.MaxRequestLong(peer, 0, 0)
				e.Check(err, "MaxRequestLong")
				if uint64(maxLong)+1 > bs.Size {
					e.Fatalf("segment of %d bytes is too small to test MaxRequestLong %d", bs.Size, maxLong)
				}
				var ev gex.Event
				for _, c := range []namedCall{
					{"RequestMedium above MaxRequestMedium", func() error { return e.tm.RequestMedium(peer, b.med, make([]byte, maxMed+1), nil, 0) }},
					{"RequestLong above MaxRequestLong", func() error { return e.tm.RequestLong(peer, b.long, make([]byte, maxLong+1), bs.Owner, nil, 0) }},
					{"RequestShort to rank size", func() error { return e.tm.RequestShort(e.size, b.short, 0, 1) }},
					{"RequestShort to RankInvalid", func() error { return e.tm.RequestShort(gex.RankInvalid, b.short, 0, 1) }},
					{"RequestMedium to rank size", func() error { return e.tm.RequestMedium(e.size, b.med, nil, nil, 0) }},
					{"RequestLong to rank size", func() error { return e.tm.RequestLong(e.size, b.long, nil, 0, nil, 0) }},
					{"RequestShort to index 0", func() error { return e.tm.RequestShort(peer, 0, 0, 1) }},
					{"RequestShort to index 127", func() error { return e.tm.RequestShort(peer, gex.AMIndexBase-1, 0, 1) }},
					{"RequestMedium to index 127", func() error { return e.tm.RequestMedium(peer, gex.AMIndexBase-1, nil, nil, 0) }},
					{"RequestShort with 17 args", func() error { return e.tm.RequestShort(peer, b.short, 0, make([]gex.AMArg, 17)...) }},
					{"RequestMedium with 17 args", func() error { return e.tm.RequestMedium(peer, b.med, nil, nil, 0, make([]gex.AMArg, 17)...) }},
					{"RequestMedium with EventDefer", func() error { return e.tm.RequestMedium(peer, b.med, []byte{1}, gex.EventDefer, 0) }},
					{"RequestLong with EventDefer", func() error { return e.tm.RequestLong(peer, b.long, []byte{1}, bs.Owner, gex.EventDefer, 0) }},
					{"RequestShort with a non-AM flag", func() error { return e.tm.RequestShort(peer, b.short, gex.FlagADAcq, 1) }},
					{"RequestMedium with FlagPeerSegOffset", func() error { return e.tm.RequestMedium(peer, b.med, nil, nil, gex.FlagPeerSegOffset) }},
				} {
					expectBadArg(e, c.name, c.f())
				}
				// What is permitted: the maxima, EventGroup and *Event for Requests.
				e.Check(e.tm.RequestMedium(peer, b.med, make([]byte, maxMed), gex.EventGroup, 0), "RequestMedium of MaxRequestMedium with EventGroup")
				e.Check(e.tm.RequestLong(peer, b.long, make([]byte, maxLong), bs.Owner, &ev, 0), "RequestLong of MaxRequestLong")
				e.Check(ev.Wait(), "lc event")
				e.Check(e.tm.RequestShort(peer, b.short, 0, 1), "RequestShort")
				e.Check(e.c.BlockUntil(func() bool { return replies.Load() >= 1 && b.ran.Load() >= 4 }), "BlockUntil")
				if p := replyErrs.Load(); p != nil {
					e.Fatalf("in the Request handler: %s", *p)
				}
				e.Barrier()
				// Peer's Medium, Long and Short, plus the reply to our Short.
				if b.ran.Load() != 4 {
					e.Fatalf("%d handlers ran, want 4", b.ran.Load())
				}
			})
		})
	}
}

// "[With] GEX_FLAG_PEER_SEG_OFFSET ... the address argument is interpreted as
// an unsigned offset in bytes from the start address of the remote endpoint's
// bound segment."
func TestLongPeerSegOffset(t *testing.T) {
	for _, mode := range []struct {
		name      string
		supernode int
	}{{"mapped", 0}, {"unmapped", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			const segSize, off = 1 << 16, 1000
			conformance(t, 2, jobOpts{segSize: segSize, supernode: mode.supernode}, func(e *rankEnv) {
				var b boundsTable
				registerBounds(e, &b, nil)
				e.Barrier()
				peer := (e.rank + 1) % e.size
				payload := []byte("payload at an offset")
				e.Check(e.tm.RequestLong(peer, b.long, payload, off, nil, gex.FlagPeerSegOffset), "RequestLong with FlagPeerSegOffset")
				e.Check(e.c.BlockUntil(func() bool { return b.ran.Load() >= 1 }), "BlockUntil")
				mem := e.seg.Bytes()
				if !bytes.Equal(mem[off:off+len(payload)], payload) {
					e.Fatalf("segment bytes at offset %d are %q, want %q", off, mem[off:off+len(payload)], payload)
				}
				if b.longLen.Load() != int64(len(payload)) || b.longPtr.Load() != &mem[off] {
					e.Fatalf("handler's payload is %d bytes at %p, want %d bytes at %p (base+offset)",
						b.longLen.Load(), b.longPtr.Load(), len(payload), &mem[off])
				}
				if bytes.IndexFunc(mem[:off], func(r rune) bool { return r != 0 }) >= 0 {
					e.Fatalf("bytes before the offset were written")
				}
				e.Barrier()
			})
		})
	}
}

// NOTE 4: overlapping source and destination of one Long.
func TestLongOverlapRefused(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		var b boundsTable
		registerBounds(e, &b, nil)
		e.Barrier()
		base := e.seg.QueryAddr()
		mem := e.seg.Bytes()
		for i := range mem[:256] {
			mem[i] = byte(i)
		}
		expectBadArg(e, "Long to self from [0,100) to [50,150)", e.tm.RequestLong(e.rank, b.long, mem[0:100], base+50, nil, 0))
		expectBadArg(e, "Long to self from [50,150) to [0,100)", e.tm.RequestLong(e.rank, b.long, mem[50:150], base, nil, 0))
		expectBadArg(e, "Long to self onto itself", e.tm.RequestLong(e.rank, b.long, mem[0:100], base, nil, 0))
		for i := range mem[:256] {
			if mem[i] != byte(i) {
				e.Fatalf("a refused Long changed segment byte %d", i)
			}
		}
		// Adjacent ranges do not overlap.
		e.Check(e.tm.RequestLong(e.rank, b.long, mem[0:100], base+100, nil, 0), "Long to self from [0,100) to [100,200)")
		e.Check(e.c.BlockUntil(func() bool { return b.ran.Load() >= 1 }), "BlockUntil")
		if !bytes.Equal(mem[100:200], mem[0:100]) {
			e.Fatalf("adjacent Long to self did not copy")
		}
		// The source may be a neighbour's segment mapped here.
		peer := (e.rank + 1) % e.size
		if bs, _, err := e.tm.QueryBoundSegmentNB(peer, 0); err == nil && bs.Local != nil {
			expectBadArg(e, "Long to peer from its own mapped segment, overlapping", e.tm.RequestLong(peer, b.long, bs.Local[1000:1100], bs.Owner+1050, nil, 0))
		}
		e.Barrier()
		if b.ran.Load() != 1 {
			e.Fatalf("%d handlers ran, want 1", b.ran.Load())
		}
	})
}

// The receiver re-checks every AM: what the initiator's checks would have
// refused is refused, and no handler runs. Refusals end the job by default
// (TestRefusedAMEndsJob); here GEX_AM_REFUSE=drop makes them print, count
// and drop, so that one job can send every kind. AMs for unregistered
// indices are held first and refused at the next collective call.
func TestReceiverRejects(t *testing.T) {
	const segSize = 1 << 16
	t.Setenv(gex.EnvAMRefuse, "drop")
	conformance(t, 2, jobOpts{segSize: segSize, supernode: 1}, func(e *rankEnv) {
		var victims, fence atomic.Int32
		count := func(*gex.Token, []byte, []gex.AMArg) { victims.Add(1) }
		table := []gex.AMEntry{
			{Name: "short2", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 2, Fn: count},
			{Name: "reponly", Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 0, Fn: count},
			{Name: "long", Flags: gex.FlagAMLong | gex.FlagAMRequest, NArgs: 0, Fn: count},
			{Name: "fence", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 0, Fn: func(*gex.Token, []byte, []gex.AMArg) { fence.Add(1) }},
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		short2, reponly, long, fenceIdx := table[0].Index, table[1].Index, table[2].Index, table[3].Index
		unregistered := gex.AMIndex(200)
		const wantRejected = 15
		mem := e.seg.Bytes()
		for i := range mem {
			mem[i] = 0xA5
		}
		// Read before the barrier: the Poll that completes it may already
		// deliver the AMs the peer sends right after.
		before := gex.RejectedAMs(e.c)
		e.Barrier()

		if e.rank == 0 {
			bs, _, err := e.tm.QueryBoundSegmentNB(1, 0)
			e.Check(err, "QueryBoundSegmentNB")
			if bs.Local != nil {
				e.Fatalf("supernode 1: the peer's segment is mapped")
			}
			base, size := uint64(bs.Owner), bs.Size
			junk := bytes.Repeat([]byte{0x3C}, 64)
			bad := []struct {
				name    string
				h       gex.RawHeader
				payload []byte
			}{
				{"unregistered handler", gex.RawHeader{Cat: gex.RawShort, IsReq: true, Handler: uint8(unregistered)}, nil},
				{"library index 5", gex.RawHeader{Cat: gex.RawShort, IsReq: true, Handler: 5}, nil},
				{"wrong nargs", gex.RawHeader{Cat: gex.RawShort, IsReq: true, Handler: uint8(short2), NArgs: 3}, nil},
				{"Medium to a Short handler", gex.RawHeader{Cat: gex.RawMedium, IsReq: true, Handler: uint8(short2), NArgs: 2}, junk[:8]},
				{"Long to a Short handler", gex.RawHeader{Cat: gex.RawLong, IsReq: true, Handler: uint8(short2), NArgs: 2, Dest: base}, junk[:8]},
				{"Request to a Reply handler", gex.RawHeader{Cat: gex.RawShort, IsReq: true, Handler: uint8(reponly)}, nil},
				{"Reply to a Request handler", gex.RawHeader{Cat: gex.RawShort, IsReq: false, Handler: uint8(short2), NArgs: 2}, nil},
				{"Long past the segment end", gex.RawHeader{Cat: gex.RawLong, IsReq: true, Handler: uint8(long), Dest: base + size}, junk[:8]},
				{"Long straddling the segment end", gex.RawHeader{Cat: gex.RawLong, IsReq: true, Handler: uint8(long), Dest: base + size - 8}, junk[:16]},
				{"Long before the segment base", gex.RawHeader{Cat: gex.RawLong, IsReq: true, Handler: uint8(long), Dest: base - 16}, junk[:16]},
				{"Long straddling the segment base", gex.RawHeader{Cat: gex.RawLong, IsReq: true, Handler: uint8(long), Dest: base - 8}, junk[:16]},
				{"Long wrapping the address space", gex.RawHeader{Cat: gex.RawLong, IsReq: true, Handler: uint8(long), Dest: ^uint64(0) - 7}, junk[:16]},
				{"Long of 64 bytes past the end", gex.RawHeader{Cat: gex.RawLong, IsReq: true, Handler: uint8(long), Dest: base + size - 1}, junk},
				{"Long in a payload buffer past the end", gex.RawHeader{Cat: gex.RawLong, IsReq: true, Handler: uint8(long), Dest: base + size - 100}, bytes.Repeat(junk, 64)},
				{"Medium in a payload buffer to an unregistered handler", gex.RawHeader{Cat: gex.RawMedium, IsReq: true, Handler: uint8(unregistered)}, bytes.Repeat(junk, 64)},
			}
			for _, a := range bad {
				if err := gex.RawSend(e.c, 1, a.h, a.payload); err != nil {
					e.Fatalf("RawSend(%s): %v", a.name, err)
				}
			}
			if len(bad) != wantRejected {
				e.Fatalf("test table has %d entries, want %d", len(bad), wantRejected)
			}
			// The fence follows the bad AMs through the same queue.
			e.Check(e.tm.RequestShort(1, fenceIdx, 0), "fence")
		} else {
			e.Check(e.c.BlockUntil(func() bool { return fence.Load() == 1 }), "BlockUntil(fence)")
			for i := 0; i < 100; i++ {
				e.Check(e.c.Poll(), "Poll")
			}
			if held := gex.RejectedAMs(e.c) - before; held != wantRejected-2 {
				e.Fatalf("rejected %d AMs before the collective call, want %d (the 2 for an unregistered index are held)", held, wantRejected-2)
			}
		}
		ev, err := e.tm.BarrierNB(0) // the collective call refuses the held AMs
		e.Check(err, "BarrierNB")
		e.Check(ev.Wait(), "barrier")
		if e.rank == 1 {
			rejected := gex.RejectedAMs(e.c) - before
			if rejected != wantRejected || victims.Load() != 0 {
				e.Fatalf("rejected %d AMs and ran victim handlers %d times; want %d and 0", rejected, victims.Load(), wantRejected)
			}
			for i, v := range mem {
				if v != 0xA5 {
					e.Fatalf("segment byte %d is %#x after rejected Longs, want 0xa5", i, v)
				}
			}
		}
	})
}
