package main

import (
	"fmt"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
)

// The am benchmark: round trips of Active Messages, rank 0 -> rank 1 and
// back, like GASNet's testam: a request of each category carrying size bytes,
// answered by a reply of the same category and size from inside the
// handler. Rank 0 waits for the reply before sending the next request.

// Handler indices of the am benchmark (after hBarrier).
const (
	hAMShortReq gex.AMIndex = hBarrier + 1 + iota
	hAMShortRep
	hAMMedReq
	hAMMedRep
	hAMLongReq
	hAMLongRep
)

// amState is what the am handlers share with rank 0's loop.
type amState struct {
	replies atomic.Int64
	seg     []byte   // this rank's segment (Long payloads come from and land in it)
	peer    gex.Addr // base of the other rank's segment: rank 0's requests and rank 1's replies land there
}

// amHandlers are registered on every rank before SegmentAttach.
func amHandlers(st *amState) []gex.AMEntry {
	reply := func(_ *gex.Token, _ []byte, _ []gex.AMArg) { st.replies.Add(1) }
	return []gex.AMEntry{
		{Index: hAMShortReq, Flags: gex.FlagAMShort | gex.FlagAMRequest, Name: "am-short-req",
			Fn: func(t *gex.Token, _ []byte, _ []gex.AMArg) { t.ReplyShort(hAMShortRep, 0) }},
		{Index: hAMShortRep, Flags: gex.FlagAMShort | gex.FlagAMReply, Name: "am-short-rep", Fn: reply},
		{Index: hAMMedReq, Flags: gex.FlagAMMedium | gex.FlagAMRequest, Name: "am-med-req",
			Fn: func(t *gex.Token, p []byte, _ []gex.AMArg) { t.ReplyMedium(hAMMedRep, p, gex.EventNow, 0) }},
		{Index: hAMMedRep, Flags: gex.FlagAMMedium | gex.FlagAMReply, Name: "am-med-rep", Fn: reply},
		{Index: hAMLongReq, Flags: gex.FlagAMLong | gex.FlagAMRequest, Name: "am-long-req",
			Fn: func(t *gex.Token, p []byte, _ []gex.AMArg) { t.ReplyLong(hAMLongRep, p, st.peer, gex.EventNow, 0) }},
		{Index: hAMLongRep, Flags: gex.FlagAMLong | gex.FlagAMReply, Name: "am-long-rep", Fn: reply},
	}
}

// amRoundTrips measures the round trips on rank 0.
func (b *bench) amRoundTrips(st *amState) (*results, error) {
	cfg, tm, c := b.cfg, b.tm, b.c
	res := &results{}
	long, short := b.pathName()
	fmt.Fprintf(&res.table, "gexbench am: Active Message round trips (request, reply from the handler), rank 0 -> rank %d of %d; path: %s\n",
		peer, tm.QuerySize(), long)
	fmt.Fprintf(&res.table, "%d round trips per case after a warm-up of %d, timed in %d batches\n\n", cfg.iters, max(1, cfg.iters/10), min(cfg.batches, cfg.iters))
	fmt.Fprintf(&res.table, "%-8s %10s %14s %14s %14s\n", "category", "size", "avg (us)", "median (us)", "min (us)")
	maxMed, err := tm.MaxRequestMedium(peer, 0, 0)
	if err != nil {
		return nil, err
	}
	maxLong, err := tm.MaxRequestLong(peer, 0, 0)
	if err != nil {
		return nil, err
	}
	type amCase struct {
		cat  string
		size int
		send func(p []byte) error
	}
	var cases []amCase
	cases = append(cases, amCase{"Short", 0, func([]byte) error { return tm.RequestShort(peer, hAMShortReq, 0) }})
	for _, n := range cfg.sizes() {
		if n <= maxMed {
			cases = append(cases, amCase{"Medium", n, func(p []byte) error { return tm.RequestMedium(peer, hAMMedReq, p, gex.EventNow, 0) }})
		}
	}
	for _, n := range cfg.sizes() {
		if n <= maxLong && n <= len(st.seg) {
			cases = append(cases, amCase{"Long", n, func(p []byte) error { return tm.RequestLong(peer, hAMLongReq, p, st.peer, gex.EventNow, 0) }})
		}
	}
	for _, ac := range cases {
		payload := st.seg[:ac.size]
		f := func(n int) error {
			for i := 0; i < n; i++ {
				want := st.replies.Load() + 1
				if err := ac.send(payload); err != nil {
					return err
				}
				if err := c.BlockUntil(func() bool { return st.replies.Load() >= want }); err != nil {
					return err
				}
			}
			return nil
		}
		s, err := timeBatches(cfg.sizeIters(ac.size), cfg.batches, f)
		if err != nil {
			return nil, fmt.Errorf("%s round trip of %d bytes: %w", ac.cat, ac.size, err)
		}
		fmt.Fprintf(&res.table, "%-8s %10s %14s %14s %14s\n", ac.cat, sizeName(ac.size), durName(s.avg), durName(s.median), durName(s.min))
		res.latRows("am-"+ac.cat, short, ac.size, s)
	}
	cfg.floor.rows(res)
	return res, nil
}
