package gex_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// GASNet-EX "Calls from restricted context": "The only GASNet functions which
// may be called within AM handler context, or while holding a GASNet
// handler-safe lock are" the queries, HSL, CData, Max/LUB, Token queries and
// gasnet_exit; Replies are "conditionally permitted ... the caller must be
// within an AMRequest handler and not holding a handler-safe lock";
// gex_EP_QueryBoundSegmentNB only with GEX_FLAG_IMMEDIATE. "All other
// functions are prohibited ... This prohibition notably prohibits all
// communication initiation (aside from Reply injection from a Request
// handler), explicit polling and test/wait operations". And from
// "Negotiated-payload AM": "in the interval between a Prepare and Commit, the
// client is bound by the same restrictions as in an Active Message Reply
// handler", and "Prepare/commit pairs do not nest".

// failures collects check failures from handlers (which must not call
// Fatalf: that would exit from inside the library).
type failures struct {
	mu   sync.Mutex
	msgs []string
}

func (f *failures) add(format string, args ...any) {
	f.mu.Lock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *failures) check(e *rankEnv) {
	e.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.msgs) > 0 {
		e.Fatalf("%d failures, first: %s", len(f.msgs), f.msgs[0])
	}
}

type namedCall struct {
	name string
	f    func() error
}

// expectRestricted runs calls that must be refused with ErrRestricted.
func expectRestricted(fail *failures, where string, calls []namedCall) {
	for _, c := range calls {
		if err := c.f(); !errors.Is(err, gex.ErrRestricted) {
			fail.add("%s: %s returned %v, want an error wrapping ErrRestricted", where, c.name, err)
		}
	}
}

// expectOK runs calls that must succeed.
func expectOK(fail *failures, where string, calls []namedCall) {
	for _, c := range calls {
		if err := c.f(); err != nil {
			fail.add("%s: %s returned %v, want success", where, c.name, err)
		}
	}
}

// communicating lists calls that communicate, poll or wait: all prohibited in
// restricted context. h is a registered Short request handler taking one
// argument, med a Medium and long a Long one.
func communicating(e *rankEnv, peer gex.Rank, h, med, long gex.AMIndex) []namedCall {
	buf := make([]byte, 8)
	return []namedCall{
		{"Poll", e.c.Poll},
		{"BlockUntil", func() error { return e.c.BlockUntil(func() bool { return true }) }},
		{"RequestShort", func() error { return e.tm.RequestShort(peer, h, 0, 1) }},
		{"RequestShort|IMMEDIATE", func() error { return e.tm.RequestShort(peer, h, gex.FlagImmediate, 1) }},
		{"RequestMedium", func() error { return e.tm.RequestMedium(peer, med, buf, nil, 0) }},
		{"RequestLong", func() error {
			bs, _, _ := e.tm.QueryBoundSegmentNB(peer, gex.FlagImmediate)
			return e.tm.RequestLong(peer, long, buf, bs.Owner, nil, 0)
		}},
		{"PrepareRequestMedium", func() error {
			_, err := e.tm.PrepareRequestMedium(peer, nil, 8, 8, nil, 0, 0)
			return err
		}},
		{"PrepareRequestLong", func() error {
			_, err := e.tm.PrepareRequestLong(peer, buf, 8, 8, 0, nil, 0, 0)
			return err
		}},
		{"SegmentAttach", func() error { _, err := gex.SegmentAttach(e.tm, gex.PageSize); return err }},
		{"RegisterHandlers", func() error {
			return e.ep.RegisterHandlers([]gex.AMEntry{{Fn: nopHandler, Flags: gex.FlagAMShort | gex.FlagAMRequest}})
		}},
		{"TranslateRankToJobrank", func() error { _, err := e.tm.TranslateRankToJobrank(peer); return err }},
		{"TranslateJobrankToRank", func() error { _, err := e.tm.TranslateJobrankToRank(peer); return err }},
		{"TranslateRankToEP", func() error { _, err := e.tm.TranslateRankToEP(peer, 0); return err }},
		{"QueryBoundSegmentNB without IMMEDIATE", func() error { _, _, err := e.tm.QueryBoundSegmentNB(peer, 0); return err }},
	}
}

// permitted lists the calls the spec allows in restricted context that take
// no token, with checks of their results.
func permitted(e *rankEnv, peer gex.Rank) []namedCall {
	c, ep, tm, seg := e.c, e.ep, e.tm, e.seg
	return []namedCall{
		{"job queries", func() error {
			if c.JobRank() != e.rank || c.JobSize() != e.size {
				return fmt.Errorf("JobRank/JobSize = %d/%d", c.JobRank(), c.JobSize())
			}
			info, idx := c.QueryNbrhdInfo()
			hinfo, hidx := c.QueryHostInfo()
			if info[idx].JobRank != e.rank || hinfo[hidx].JobRank != e.rank {
				return errors.New("nbrhd/host info does not name the caller")
			}
			_ = c.QueryMyPosition()
			_ = c.QueryMaxThreads()
			_ = c.QueryHiddenAMConcurrencyLevel()
			c.SetVerboseErrors(c.VerboseErrors())
			return nil
		}},
		{"object queries", func() error {
			if ep.QueryClient() != c || tm.QueryClient() != c || tm.QueryEP() != ep || ep.QueryIndex() != 0 ||
				tm.QueryRank() != e.rank || tm.QuerySize() != e.size || c.QueryName() != "CONFORMANCE" ||
				ep.QuerySegment() != seg {
				return errors.New("a Query call returned a wrong object")
			}
			_, _, _ = c.QueryFlags(), ep.QueryFlags(), tm.QueryFlags()
			if seg != nil && (seg.QueryClient() != c || seg.QuerySize() == 0 || seg.QueryAddr() == 0 || seg.QueryFlags() != 0) {
				return errors.New("a Segment Query call returned a wrong value")
			}
			return nil
		}},
		{"CData", func() error {
			v := "restricted"
			c.SetCData(v)
			ep.SetCData(v)
			tm.SetCData(v)
			if c.QueryCData() != v || ep.QueryCData() != v || tm.QueryCData() != v {
				return errors.New("CData did not round-trip")
			}
			if seg != nil {
				seg.SetCData(v)
				if seg.QueryCData() != v {
					return errors.New("segment CData did not round-trip")
				}
				seg.SetCData(nil)
			}
			c.SetCData(nil)
			ep.SetCData(nil)
			tm.SetCData(nil)
			return nil
		}},
		{"HSL", func() error {
			var h gex.HSL
			h.Init()
			h.Lock()
			h.Unlock()
			if !h.TryLock() {
				return errors.New("TryLock of a free HSL failed")
			}
			h.Unlock()
			h.Destroy()
			return nil
		}},
		{"Max/LUB", func() error {
			for _, f := range []func(gex.Rank, gex.Flags, int) (int, error){tm.MaxRequestMedium, tm.MaxReplyMedium, tm.MaxRequestLong, tm.MaxReplyLong} {
				for _, r := range []gex.Rank{peer, gex.RankInvalid} {
					if v, err := f(r, 0, 0); err != nil || v < 512 {
						return fmt.Errorf("Max query: %d, %v", v, err)
					}
				}
			}
			if gex.AMMaxArgs() != 16 || c.AMLUBRequestMedium() < 512 || c.AMLUBReplyMedium() < 512 || c.AMLUBRequestLong() < 512 || c.AMLUBReplyLong() < 512 {
				return errors.New("LUB/MaxArgs query out of range")
			}
			return nil
		}},
		{"QueryBoundSegmentNB|IMMEDIATE", func() error {
			for _, r := range []gex.Rank{e.rank, peer} {
				bs, ev, err := tm.QueryBoundSegmentNB(r, gex.FlagImmediate)
				if err != nil {
					return err
				}
				if r == e.rank && (ev != gex.EventInvalid || (seg != nil && bs.Owner != seg.QueryAddr())) {
					return fmt.Errorf("self query: event %v, owner %#x", ev, bs.Owner)
				}
			}
			return nil
		}},
	}
}

func TestRestrictedInHandlers(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		var fail failures
		peer := (e.rank + 1) % e.size
		var cnt, med, long atomic.Int32
		var reqDone, repDone atomic.Int32
		var saved *gex.Token
		table := []gex.AMEntry{
			{Name: "req", Flags: gex.FlagAMShort | gex.FlagAMRequest},
			{Name: "rep", Flags: gex.FlagAMShort | gex.FlagAMReply},
			{Name: "cnt", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Fn: func(*gex.Token, []byte, []gex.AMArg) { cnt.Add(1) }},
			{Name: "med", Flags: gex.FlagAMMedium | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { med.Add(1) }},
			{Name: "long", Flags: gex.FlagAMLong | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { long.Add(1) }},
		}
		idx := func(i int) gex.AMIndex { return table[i].Index }
		table[0].Fn = func(tk *gex.Token, _ []byte, _ []gex.AMArg) {
			where := "Request handler"
			expectRestricted(&fail, where, communicating(e, peer, idx(2), idx(3), idx(4)))
			expectOK(&fail, where, permitted(e, peer))
			expectOK(&fail, where, []namedCall{
				{"Token.Info", func() error {
					info, mask := tk.Info(gex.TISrcRank | gex.TIEP)
					if mask&(gex.TISrcRank|gex.TIEP) != gex.TISrcRank|gex.TIEP || info.SrcRank != peer || info.EP != e.ep {
						return fmt.Errorf("Token.Info = %+v, mask %v", info, mask)
					}
					return nil
				}},
				{"Token.MaxReply*", func() error {
					m, err := tk.MaxReplyMedium(0, 0)
					l, err2 := tk.MaxReplyLong(0, 0)
					if err != nil || err2 != nil || m < 512 || l < 512 {
						return fmt.Errorf("Token.MaxReplyMedium %d (%v), MaxReplyLong %d (%v)", m, err, l, err2)
					}
					return nil
				}},
			})
			// A Reply while holding an HSL is refused and consumes nothing.
			var h gex.HSL
			h.Lock()
			expectRestricted(&fail, "Request handler holding an HSL", []namedCall{
				{"ReplyShort", func() error { return tk.ReplyShort(idx(1), 0) }},
				{"ReplyMedium", func() error { return tk.ReplyMedium(idx(1), nil, nil, 0) }},
				{"PrepareReplyMedium", func() error { _, err := tk.PrepareReplyMedium(nil, 8, 8, nil, 0, 0); return err }},
				{"Poll", e.c.Poll},
			})
			h.Unlock()
			expectOK(&fail, where, []namedCall{{"ReplyShort after Unlock", func() error { return tk.ReplyShort(idx(1), 0) }}})
			saved = tk
			reqDone.Add(1)
		}
		table[1].Fn = func(tk *gex.Token, _ []byte, _ []gex.AMArg) {
			where := "Reply handler"
			expectRestricted(&fail, where, communicating(e, peer, idx(2), idx(3), idx(4)))
			expectOK(&fail, where, permitted(e, peer))
			expectRestricted(&fail, where, []namedCall{
				{"ReplyShort", func() error { return tk.ReplyShort(idx(1), 0) }},
				{"Token.MaxReplyMedium", func() error { _, err := tk.MaxReplyMedium(0, 0); return err }},
			})
			repDone.Add(1)
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		e.Barrier()

		e.Check(e.tm.RequestShort(peer, idx(0), 0), "RequestShort")
		e.Check(e.c.BlockUntil(func() bool { return reqDone.Load() == 1 && repDone.Load() == 1 }), "BlockUntil")
		fail.check(e)

		// The token is dead once its handler returned.
		expectRestricted(&fail, "after the handler returned", []namedCall{
			{"saved Token.ReplyShort", func() error { return saved.ReplyShort(idx(1), 0) }},
			{"saved Token.ReplyMedium", func() error { return saved.ReplyMedium(idx(1), nil, nil, 0) }},
			{"saved Token.PrepareReplyMedium", func() error { _, err := saved.PrepareReplyMedium(nil, 8, 8, nil, 0, 0); return err }},
			{"saved Token.MaxReplyMedium", func() error { _, err := saved.MaxReplyMedium(0, 0); return err }},
		})
		fail.check(e)
		e.Barrier()
		// Nothing the refused calls named was initiated: the peer's only
		// Request was "req", and its only Reply was "rep" (counted above).
		if n := cnt.Load() + med.Load() + long.Load(); n != 0 {
			e.Fatalf("%d AMs arrived from calls that were refused", n)
		}
	})
}

// Outside handlers: holding an HSL, and between a Prepare and its Commit.
func TestRestrictedHSLAndPrepare(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		var fail failures
		peer := (e.rank + 1) % e.size
		var cnt, med, long atomic.Int32
		table := []gex.AMEntry{
			{Name: "cnt", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Fn: func(*gex.Token, []byte, []gex.AMArg) { cnt.Add(1) }},
			{Name: "med", Flags: gex.FlagAMMedium | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { med.Add(1) }},
			{Name: "long", Flags: gex.FlagAMLong | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { long.Add(1) }},
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		e.Barrier()
		h, m, l := table[0].Index, table[1].Index, table[2].Index

		var hsl gex.HSL
		hsl.Lock()
		expectRestricted(&fail, "holding an HSL", communicating(e, peer, h, m, l))
		expectOK(&fail, "holding an HSL", permitted(e, peer))
		hsl.Unlock()
		// TryLock restricts as Lock does.
		if !hsl.TryLock() {
			e.Fatalf("TryLock of a free HSL failed")
		}
		expectRestricted(&fail, "holding an HSL from TryLock", []namedCall{{"Poll", e.c.Poll}})
		hsl.Unlock()
		fail.check(e)
		// After Unlock everything works again.
		expectOK(&fail, "after Unlock", []namedCall{
			{"Poll", e.c.Poll},
			{"RequestShort", func() error { return e.tm.RequestShort(peer, h, 0, 1) }},
			{"TranslateRankToJobrank", func() error { _, err := e.tm.TranslateRankToJobrank(peer); return err }},
			{"QueryBoundSegmentNB", func() error { _, _, err := e.tm.QueryBoundSegmentNB(peer, 0); return err }},
		})
		fail.check(e)

		// Between Prepare and Commit (library and client buffers).
		for _, clientBuf := range [][]byte{nil, make([]byte, 32)} {
			sd, err := e.tm.PrepareRequestMedium(peer, clientBuf, 16, 32, nil, 0, 0)
			e.Check(err, "PrepareRequestMedium")
			expectRestricted(&fail, "between Prepare and Commit", communicating(e, peer, h, m, l))
			expectOK(&fail, "between Prepare and Commit", permitted(e, peer))
			e.Check(sd.CommitRequestMedium(m, sd.Size()), "CommitRequestMedium")
			fail.check(e)
			expectOK(&fail, "after Commit", []namedCall{
				{"RequestShort", func() error { return e.tm.RequestShort(peer, h, 0, 2) }},
				{"Poll", e.c.Poll},
			})
			fail.check(e)
		}
		// Exactly what was permitted arrived: 3 Shorts and 2 Mediums.
		e.Check(e.c.BlockUntil(func() bool { return cnt.Load() >= 3 && med.Load() >= 2 }), "BlockUntil")
		e.Barrier()
		if cnt.Load() != 3 || med.Load() != 2 || long.Load() != 0 {
			e.Fatalf("received %d Shorts, %d Mediums, %d Longs; want 3, 2, 0", cnt.Load(), med.Load(), long.Load())
		}
	})
}

// The restriction belongs to the goroutine running the handler: while a
// handler runs on the receive goroutine, the application goroutine may
// communicate. (One rank: with several, the harness's barrier handler is
// registered after the receive goroutine started, so a peer's barrier AM
// could be rejected.)
func TestRestrictedOnlyHandlerGoroutine(t *testing.T) {
	conformance(t, 1, jobOpts{rcv: true, segSize: 1 << 16}, func(e *rankEnv) {
		var fail failures
		peer := e.rank
		entered := make(chan struct{})
		release := make(chan struct{})
		var cnt, med atomic.Int32
		var handlerPoll atomic.Pointer[error]
		table := []gex.AMEntry{
			{Name: "block", Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) {
				err := e.c.Poll()
				handlerPoll.Store(&err)
				close(entered)
				<-release
			}},
			{Name: "cnt", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Fn: func(*gex.Token, []byte, []gex.AMArg) { cnt.Add(1) }},
			{Name: "med", Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 1, Fn: func(*gex.Token, []byte, []gex.AMArg) { med.Add(1) }},
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		if e.c.QueryHiddenAMConcurrencyLevel() != 1 {
			e.Fatalf("QueryHiddenAMConcurrencyLevel = %d with a receive goroutine, want 1", e.c.QueryHiddenAMConcurrencyLevel())
		}
		// The receive goroutine runs the handler; this goroutine does not poll
		// until it has entered.
		e.Check(e.tm.RequestShort(e.rank, table[0].Index, 0), "RequestShort(block)")
		<-entered
		expectOK(&fail, "while the receive goroutine runs a handler", []namedCall{
			{"RequestShort", func() error { return e.tm.RequestShort(e.rank, table[1].Index, 0, 1) }},
			{"RequestShort|IMMEDIATE", func() error { return e.tm.RequestShort(e.rank, table[1].Index, gex.FlagImmediate, 1) }},
			{"Poll", e.c.Poll},
			{"TranslateRankToJobrank", func() error { _, err := e.tm.TranslateRankToJobrank(peer); return err }},
			{"QueryBoundSegmentNB", func() error { _, _, err := e.tm.QueryBoundSegmentNB(peer, 0); return err }},
			{"PrepareRequestMedium+Commit", func() error {
				sd, err := e.tm.PrepareRequestMedium(e.rank, nil, 8, 8, nil, 0, 1)
				if err != nil {
					return err
				}
				return sd.CommitRequestMedium(table[2].Index, 0, 1)
			}},
		})
		close(release)
		if p := handlerPoll.Load(); p == nil || !errors.Is(*p, gex.ErrRestricted) {
			fail.add("Poll inside the handler on the receive goroutine was not refused")
		}
		fail.check(e)
		// Two Shorts and one Medium arrive.
		e.Check(e.c.BlockUntil(func() bool { return cnt.Load() >= 2 && med.Load() >= 1 }), "BlockUntil")
		for i := 0; i < 100; i++ {
			e.Check(e.c.Poll(), "Poll")
		}
		if cnt.Load() != 2 || med.Load() != 1 {
			e.Fatalf("cnt ran %d times and med %d, want 2 and 1", cnt.Load(), med.Load())
		}
	})
}
