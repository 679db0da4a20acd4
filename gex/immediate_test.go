package gex_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// GASNet-EX "Fixed-payload AM APIs", NOTE 1: "An AM Request or Reply call is
// a "no op" IF AND ONLY IF the value GEX_FLAG_IMMEDIATE is included in the
// 'flags' argument AND the conduit could determine that it would need to block
// temporarily to obtain the necessary resources. ... In the "no op" case no
// communication has been performed". And "Negotiated-payload AM": with
// GEX_FLAG_IMMEDIATE "the Prepare call may return GEX_AM_SRCDESC_NO_OP ... if
// injection resources (in particular a buffer of size least_payload or
// longer) cannot be obtained".

// floodBound is far above any queue or pool capacity of the conduits (the smp
// rings hold 4096 one-slot AMs), so a flood that never meets backpressure is a bug.
const floodBound = 100000

// seqSet records which sequence numbers arrived and flags duplicates.
type seqSet struct {
	seen [floodBound]atomic.Bool
	n    atomic.Int64
	dup  atomic.Int64
	bad  atomic.Int64 // payload or args wrong
}

func (s *seqSet) add(seq int32) {
	if seq < 0 || seq >= floodBound || s.seen[seq].Swap(true) {
		s.dup.Add(1)
		return
	}
	s.n.Add(1)
}

// checkExactly verifies that sequence numbers [0, k) arrived, each once, and
// nothing else.
func (s *seqSet) checkExactly(e *rankEnv, k int, what string) {
	e.t.Helper()
	if d := s.dup.Load(); d > 0 {
		e.Fatalf("%s: %d handler runs were duplicates or carried a sequence number never sent", what, d)
	}
	if b := s.bad.Load(); b > 0 {
		e.Fatalf("%s: %d handler runs saw a wrong payload or args", what, b)
	}
	if got := s.n.Load(); got != int64(k) {
		e.Fatalf("%s: %d handlers ran, want %d (one per accepted injection)", what, got, k)
	}
	for i := 0; i < k; i++ {
		if !s.seen[i].Load() {
			e.Fatalf("%s: AM %d was accepted but its handler never ran", what, i)
		}
	}
}

// drainExactly polls until k handlers ran, then polls some more to catch any
// extra delivery, and checks the set.
func (s *seqSet) drainExactly(e *rankEnv, k int, what string) {
	e.t.Helper()
	e.Check(e.c.BlockUntil(func() bool { return s.n.Load()+s.dup.Load() >= int64(k) }), "BlockUntil")
	for i := 0; i < 100; i++ {
		e.Check(e.c.Poll(), "Poll")
	}
	s.checkExactly(e, k, what)
}

func TestImmediateShortFloodSelf(t *testing.T) {
	conformance(t, 1, jobOpts{}, func(e *rankEnv) {
		s := new(seqSet)
		var after atomic.Int32
		table := []gex.AMEntry{
			{Name: "flood", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { s.add(a[0]) }},
			{Name: "after", Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { after.Add(1) }},
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		h := table[0].Index

		k := 0
		var err error
		for ; k < floodBound; k++ {
			if err = e.tm.RequestShort(e.rank, h, gex.FlagImmediate, int32(k)); err != nil {
				break
			}
		}
		if !errors.Is(err, gex.ErrNoOp) {
			e.Fatalf("after %d immediate Shorts to self without polling: %v, want ErrNoOp", k, err)
		}
		if errors.Is(err, gex.ErrBadArg) || errors.Is(err, gex.ErrResource) || errors.Is(err, gex.ErrRestricted) {
			e.Fatalf("ErrNoOp result %v also wraps a spec error code", err)
		}
		if k == 0 {
			e.Fatalf("the first immediate Short to an idle self was a no-op")
		}
		if n := s.n.Load(); n > int64(k) {
			e.Fatalf("%d handlers ran for %d accepted AMs before any polling", n, k)
		}
		e.Logf("%d immediate Shorts accepted before backpressure", k)
		// The no-op initiated nothing: exactly [0, k) arrive.
		s.drainExactly(e, k, "Short flood")

		// Resources came back.
		e.Check(e.tm.RequestShort(e.rank, table[1].Index, gex.FlagImmediate), "immediate Short after draining")
		e.Check(e.c.BlockUntil(func() bool { return after.Load() == 1 }), "BlockUntil")
	})
}

// Without GEX_FLAG_IMMEDIATE, a call that meets backpressure waits (polling)
// instead of failing.
func TestNonImmediateWaitsForResources(t *testing.T) {
	conformance(t, 1, jobOpts{}, func(e *rankEnv) {
		s := new(seqSet)
		table := []gex.AMEntry{
			{Name: "flood", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { s.add(a[0]) }},
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		h := table[0].Index
		k := 0
		for ; k < floodBound; k++ {
			if err := e.tm.RequestShort(e.rank, h, gex.FlagImmediate, int32(k)); err != nil {
				if !errors.Is(err, gex.ErrNoOp) {
					e.Fatalf("immediate Short %d: %v", k, err)
				}
				break
			}
		}
		if k == floodBound {
			e.Fatalf("no backpressure after %d immediate Shorts", k)
		}
		// The queue is full; these must succeed anyway.
		for i := 0; i < 10; i++ {
			if err := e.tm.RequestShort(e.rank, h, 0, int32(k)); err != nil {
				e.Fatalf("Short %d without IMMEDIATE on a full queue: %v", i, err)
			}
			k++
		}
		s.drainExactly(e, k, "Short flood then blocking Shorts")
	})
}

func TestImmediateMediumFloodSelf(t *testing.T) {
	conformance(t, 1, jobOpts{}, func(e *rankEnv) {
		max, err := e.tm.MaxRequestMedium(e.rank, gex.FlagImmediate, 1)
		e.Check(err, "MaxRequestMedium")
		n := min(65536, max)
		s := new(seqSet)
		table := []gex.AMEntry{
			{Name: "flood", Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 1, Fn: func(_ *gex.Token, p []byte, a []gex.AMArg) {
				l := len(p)
				if l < 3 || p[0] != byte(a[0]) || p[l-1] != byte(a[0]>>8) || p[l/2] != 0x77 {
					s.bad.Add(1)
				}
				s.add(a[0])
			}},
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		h := table[0].Index
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = 0x77
		}
		k := 0
		var lc gex.Event
		for ; k < floodBound; k++ {
			buf[0], buf[n-1] = byte(k), byte(k>>8)
			if err = e.tm.RequestMedium(e.rank, h, buf, &lc, gex.FlagImmediate, int32(k)); err != nil {
				break
			}
			e.Check(lc.Wait(), "local completion")
		}
		if !errors.Is(err, gex.ErrNoOp) {
			e.Fatalf("after %d immediate %d-byte Mediums to self without polling: %v, want ErrNoOp", k, n, err)
		}
		if k == 0 {
			e.Fatalf("the first immediate Medium to an idle self was a no-op")
		}
		e.Logf("%d immediate %d-byte Mediums accepted before backpressure", k, n)

		// With the payload buffers exhausted, an immediate Prepare with a
		// library buffer is a no-op too.
		least, err := e.tm.MaxRequestMedium(e.rank, gex.FlagAMPrepareLeastAlloc|gex.FlagImmediate, 0)
		e.Check(err, "MaxRequestMedium(LEAST_ALLOC)")
		sd, err := e.tm.PrepareRequestMedium(e.rank, nil, least, least, nil, gex.FlagImmediate, 0)
		if !errors.Is(err, gex.ErrNoOp) || sd != nil {
			e.Fatalf("immediate PrepareRequestMedium(%d bytes) with buffers exhausted: %v (sd %v), want ErrNoOp", least, err, sd)
		}
		// The failed Prepare left this goroutine unrestricted.
		e.Check(e.c.Poll(), "Poll after a no-op Prepare")
		s.drainExactly(e, k, "Medium flood")

		// Resources came back: the same Prepare now succeeds.
		sd, err = e.tm.PrepareRequestMedium(e.rank, nil, least, least, nil, gex.FlagImmediate, 1)
		e.Check(err, "immediate PrepareRequestMedium after draining")
		if sd.Size() != least {
			e.Fatalf("SrcDesc Size %d, want %d", sd.Size(), least)
		}
		p := sd.Addr()
		for i := range p {
			p[i] = 0x77
		}
		p[0], p[len(p)-1] = byte(k), byte(k>>8)
		e.Check(sd.CommitRequestMedium(h, len(p), int32(k)), "CommitRequestMedium")
		s.drainExactly(e, k+1, "Medium after draining")
	})
}

// A Prepare holding buffers on other goroutines exhausts them as well.
func TestImmediatePrepareExhausted(t *testing.T) {
	conformance(t, 1, jobOpts{}, func(e *rankEnv) {
		s := new(seqSet)
		table := []gex.AMEntry{
			{Name: "med", Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 1, Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { s.add(a[0]) }},
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		least, err := e.tm.MaxRequestMedium(e.rank, gex.FlagAMPrepareLeastAlloc|gex.FlagImmediate, 1)
		e.Check(err, "MaxRequestMedium(LEAST_ALLOC)")
		// Each goroutine holds one prepared buffer until told to commit.
		type held struct {
			commit chan struct{}
			done   chan error
		}
		var holders []held
		prepared := make(chan error)
		var commitErr error
		release := func() {
			for _, h := range holders {
				close(h.commit)
				if err := <-h.done; err != nil && commitErr == nil {
					commitErr = err
				}
			}
			holders = nil
		}
		var noop error
		for g := 0; g < 64 && noop == nil; g++ {
			h := held{commit: make(chan struct{}), done: make(chan error, 1)}
			seq := int32(g)
			go func() {
				sd, err := e.tm.PrepareRequestMedium(e.rank, nil, least, least, nil, gex.FlagImmediate, 1)
				prepared <- err
				if err != nil {
					h.done <- nil
					return
				}
				<-h.commit
				h.done <- sd.CommitRequestMedium(table[0].Index, 1, seq)
			}()
			holders = append(holders, h)
			noop = <-prepared
		}
		k := len(holders) - 1
		release()
		if !errors.Is(noop, gex.ErrNoOp) {
			e.Fatalf("%d goroutines each holding a prepared %d-byte buffer, then: %v, want ErrNoOp", k, least, noop)
		}
		e.Check(commitErr, "CommitRequestMedium")
		s.drainExactly(e, k, "prepared Mediums")
	})
}

// A Reply with GEX_FLAG_IMMEDIATE either goes out or is a no-op that sends
// nothing (and leaves the Reply still to be made).
func TestImmediateReplyMedium(t *testing.T) {
	conformance(t, 1, jobOpts{}, func(e *rankEnv) {
		const requests = 32
		reps := new(seqSet)
		var noops, otherErr atomic.Int32
		table := []gex.AMEntry{
			{Name: "req", Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1},
			{Name: "rep", Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: 1, Fn: func(_ *gex.Token, p []byte, a []gex.AMArg) {
				if len(p) == 0 || p[0] != byte(a[0]) {
					reps.bad.Add(1)
				}
				reps.add(a[0])
			}},
		}
		table[0].Fn = func(tk *gex.Token, _ []byte, a []gex.AMArg) {
			n, err := tk.MaxReplyMedium(gex.FlagImmediate, 1)
			if err != nil {
				otherErr.Add(1)
				return
			}
			buf := make([]byte, n)
			buf[0] = byte(a[0])
			err = tk.ReplyMedium(table[1].Index, buf, nil, gex.FlagImmediate, a[0])
			if errors.Is(err, gex.ErrNoOp) {
				noops.Add(1)
				err = tk.ReplyMedium(table[1].Index, buf, nil, 0, a[0])
			}
			if err != nil {
				otherErr.Add(1)
			}
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		for i := 0; i < requests; i++ {
			e.Check(e.tm.RequestShort(e.rank, table[0].Index, 0, int32(i)), "RequestShort")
		}
		reps.drainExactly(e, requests, "Replies")
		if otherErr.Load() != 0 {
			e.Fatalf("%d Replies failed with an error other than ErrNoOp", otherErr.Load())
		}
		e.Logf("%d of %d immediate Replies were no-ops", noops.Load(), requests)
	})
}

// ErrNoOp means backpressure only: argument errors with FlagImmediate are
// ordinary errors, and a successful immediate call returns nil.
func TestImmediateNoOpOnlyForBackpressure(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		var got atomic.Int32
		table := []gex.AMEntry{
			{Name: "s", Flags: gex.FlagAMShort | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { got.Add(1) }},
			{Name: "m", Flags: gex.FlagAMMedium | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { got.Add(1) }},
			{Name: "l", Flags: gex.FlagAMLong | gex.FlagAMRequest, Fn: func(*gex.Token, []byte, []gex.AMArg) { got.Add(1) }},
		}
		e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
		e.Barrier()
		peer := (e.rank + 1) % e.size
		bs, _, err := e.tm.QueryBoundSegmentNB(peer, gex.FlagImmediate)
		e.Check(err, "QueryBoundSegmentNB")
		buf := make([]byte, 64)
		imm := gex.FlagImmediate
		for _, c := range []namedCall{
			{"RequestShort", func() error { return e.tm.RequestShort(peer, table[0].Index, imm) }},
			{"RequestMedium", func() error { return e.tm.RequestMedium(peer, table[1].Index, buf, nil, imm) }},
			{"RequestLong", func() error { return e.tm.RequestLong(peer, table[2].Index, buf, bs.Owner, nil, imm) }},
		} {
			if err := c.f(); err != nil {
				e.Fatalf("%s|IMMEDIATE to an idle peer: %v, want nil", c.name, err)
			}
		}
		big := make([]byte, 1<<21)
		for _, c := range []namedCall{
			{"RequestShort to rank size", func() error { return e.tm.RequestShort(e.size, table[0].Index, imm) }},
			{"RequestShort to index 1", func() error { return e.tm.RequestShort(peer, 1, imm) }},
			{"RequestShort with 17 args", func() error { return e.tm.RequestShort(peer, table[0].Index, imm, make([]gex.AMArg, 17)...) }},
			{"RequestMedium too large", func() error { return e.tm.RequestMedium(peer, table[1].Index, big, nil, imm) }},
			{"RequestLong outside the segment", func() error { return e.tm.RequestLong(peer, table[2].Index, buf, bs.Owner+gex.Addr(bs.Size), nil, imm) }},
			{"PrepareRequestMedium most < least", func() error { _, err := e.tm.PrepareRequestMedium(peer, nil, 16, 8, nil, imm, 0); return err }},
		} {
			err := c.f()
			if err == nil || errors.Is(err, gex.ErrNoOp) || !errors.Is(err, gex.ErrBadArg) {
				e.Fatalf("%s|IMMEDIATE: %v, want ErrBadArg and not ErrNoOp", c.name, err)
			}
		}
		e.Check(e.c.BlockUntil(func() bool { return got.Load() == 3 }), "BlockUntil")
	})
}
