package gex_test

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// A refused AM ends the job (docs/am.md, "Refused AMs"): rank 1 refuses
// what rank 0 sends, the launcher prints one line naming sender, target,
// handler and reason, and the job's code is 1. Each case is a job of its
// own; the handler never runs and no byte outside the segment is written.
func TestRefusedAMEndsJob(t *testing.T) {
	cases := []struct {
		name string
		send func(e *rankEnv, short2 gex.AMIndex, base, size uint64) error
		want string
	}{
		{"unregistered", func(e *rankEnv, _ gex.AMIndex, _, _ uint64) error {
			return e.tm.RequestShort(1, 200, 0, 7)
		}, `refused an AM Short Request from rank 0 to rank 1 for handler 200: handler index 200 is not registered \((no handler was registered for it before this rank's next collective call|it was held 2s and no handler was registered for it)\)`},
		{"unknown endpoint", func(e *rankEnv, _ gex.AMIndex, _, _ uint64) error {
			p, err := gex.TMPair(e.ep, 7)
			if err != nil {
				return err
			}
			return p.RequestShort(1, 150, 0, 1, 2)
		}, `refused an AM Short Request from rank 0 to rank 1 for handler 150: endpoint index 7 does not exist in this process \(1 endpoint\(s\); sent by endpoint 0 of rank 0\)`},
		{"wrong nargs", func(e *rankEnv, short2 gex.AMIndex, _, _ uint64) error {
			return gex.RawSend(e.c, 1, gex.RawHeader{Cat: gex.RawShort, IsReq: true, Handler: uint8(short2), NArgs: 3}, nil)
		}, `refused an AM Short Request from rank 0 to rank 1 for handler \d+: short2 takes 2 args but the AM carries 3`},
		{"wrong category", func(e *rankEnv, short2 gex.AMIndex, _, _ uint64) error {
			return gex.RawSend(e.c, 1, gex.RawHeader{Cat: gex.RawMedium, IsReq: true, Handler: uint8(short2), NArgs: 2}, []byte("junk"))
		}, `refused an AM Medium Request from rank 0 to rank 1 for handler \d+: short2 was registered with GEX_FLAG_AM_SHORT but arrived as a Medium`},
		{"Long past the end", func(e *rankEnv, _ gex.AMIndex, base, size uint64) error {
			return gex.RawSend(e.c, 1, gex.RawHeader{Cat: gex.RawLong, IsReq: true, Handler: uint8(short2Long), Dest: base + size - 8}, bytes.Repeat([]byte{0x3c}, 16))
		}, `refused an AM Long Request from rank 0 to rank 1 for handler \d+: Long destination \[0x[0-9a-f]+, \+16\) is outside the segment \[0x[0-9a-f]+, \+65536\)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out string
			spmdtest.Run(t, 2, func(t *testing.T) {
				c, ep, tm, err := gex.ClientInit("REFUSE", 0, gex.WithWaitMode(gex.WaitSpinBlock))
				if err != nil {
					t.Fatal(err)
				}
				e := &rankEnv{t: t, c: c, ep: ep, tm: tm}
				e.fatal = func(msg string) { t.Fatal(msg) }
				e.rank, e.size = tm.QueryRank(), tm.QuerySize()
				var ran atomic.Int32
				count := func(*gex.Token, []byte, []gex.AMArg) { ran.Add(1) }
				e.Check(ep.RegisterHandlers([]gex.AMEntry{
					{Index: 150, Name: "short2", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 2, Fn: count},
					{Index: short2Long, Name: "long", Flags: gex.FlagAMLong | gex.FlagAMRequest, Fn: count},
				}), "RegisterHandlers")
				e.seg, err = gex.SegmentAttach(tm, 1<<16)
				e.Check(err, "SegmentAttach")
				if e.rank == 0 {
					bs, _, err := tm.QueryBoundSegmentNB(1, 0)
					e.Check(err, "QueryBoundSegmentNB")
					e.Check(tc.send(e, 150, uint64(bs.Owner), bs.Size), "send")
				}
				// Rank 1's collective call refuses what is held; rank 0
				// waits in the barrier until the job ends.
				ev, err := tm.BarrierNB(0)
				e.Check(err, "BarrierNB")
				ev.Wait()
				time.Sleep(time.Minute) // the job must end before this
				t.Errorf("rank %d: still running, handler ran %d times", e.rank, ran.Load())
			}, spmdtest.ExpectExit(1), spmdtest.Output(&out), spmdtest.Timeout(30*time.Second),
				spmdtest.Env("GASNET_SUPERNODE_MAXSIZE=1")) // the peer's segment unmapped: the target places Longs
			if spmdtest.InRank() {
				return
			}
			re := regexp.MustCompile(`(?m)^gexrun: rank 1 aborted: ` + tc.want + `$`)
			if !re.MatchString(out) {
				t.Errorf("output lacks a line matching %v:\n%s", re, out)
			}
			if n := regexp.MustCompile(`(?m)^gexrun: `).FindAllStringIndex(out, -1); len(n) != 1 {
				t.Errorf("%d launcher lines, want 1:\n%s", len(n), out)
			}
		})
	}
}

const short2Long gex.AMIndex = 151

// An AM that arrives before its handler is registered is held and delivered
// by the RegisterHandlers that registers it, with its arguments and payload.
func TestEarlyAMHeldUntilRegistered(t *testing.T) {
	conformance(t, 2, jobOpts{}, func(e *rankEnv) {
		const h gex.AMIndex = 160
		var got atomic.Int32
		var sum atomic.Int64
		var payload atomic.Value
		entry := []gex.AMEntry{{Index: h, Name: "late", Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 2,
			Fn: func(t *gex.Token, p []byte, a []gex.AMArg) {
				payload.Store(string(p))
				sum.Add(int64(a[0]) + int64(a[1]))
				got.Add(1)
			}}}
		if e.rank == 0 {
			e.Check(e.ep.RegisterHandlers(entry), "RegisterHandlers")
			e.Check(e.tm.RequestMedium(1, h, []byte("early bird"), gex.EventNow, 0, 40, 2), "RequestMedium")
		}
		// The AM-based test barrier: rank 1 polls here, so the early AM
		// (sent before rank 0 arrived) reaches rank 1 before it registers.
		e.Barrier()
		if e.rank == 1 {
			if got.Load() != 0 {
				e.Fatalf("the handler ran before it was registered")
			}
			e.Check(e.ep.RegisterHandlers(entry), "RegisterHandlers")
			if got.Load() != 1 || sum.Load() != 42 || payload.Load() != "early bird" {
				e.Fatalf("after RegisterHandlers: handler ran %d times, args sum %d, payload %q; want 1, 42, \"early bird\"", got.Load(), sum.Load(), payload.Load())
			}
		}
	})
}

// WaitContext returns when its context is cancelled, with an error that
// wraps the context's error and ErrNotReady and names what was pending; the
// event stays pending and a later Wait completes it.
func TestWaitContextCancel(t *testing.T) {
	conformance(t, 2, jobOpts{}, func(e *rankEnv) {
		if e.rank == 0 {
			e.Barrier() // rank 1 reaches it only after its WaitContext returned
			ev, err := e.tm.BarrierNB(0)
			e.Check(err, "BarrierNB")
			e.Check(ev.Wait(), "Wait")
			return
		}
		ev, err := e.tm.BarrierNB(0)
		e.Check(err, "BarrierNB")
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		err = ev.WaitContext(ctx)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, gex.ErrNotReady) {
			e.Fatalf("WaitContext after cancel: %v; want an error wrapping context.Canceled and ErrNotReady", err)
		}
		if !regexp.MustCompile(`Event.WaitContext: context canceled while waiting for Barrier`).MatchString(err.Error()) {
			e.Fatalf("WaitContext error %q does not name the pending barrier", err)
		}
		e.Barrier()
		e.Check(ev.Wait(), "Wait after the cancelled WaitContext")
		// BlockUntilContext: a condition that never holds, a deadline.
		ctx3, cancel3 := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err = e.c.BlockUntilContext(ctx3, func() bool { return false })
		cancel3()
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, gex.ErrNotReady) {
			e.Fatalf("BlockUntilContext past its deadline: %v; want an error wrapping context.DeadlineExceeded and ErrNotReady", err)
		}
		e.Check(e.c.BlockUntilContext(context.Background(), func() bool { return true }), "BlockUntilContext(true)")
		// An expired deadline on a completed event is no error.
		done, cancel2 := context.WithCancel(context.Background())
		cancel2()
		e.Check(gex.EventInvalid.WaitContext(done), "WaitContext(EventInvalid)")
	})
}
