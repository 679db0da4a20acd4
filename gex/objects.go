package gex

import (
	"sync"
	"sync/atomic"
)

// EP is an endpoint (gex_EP_t): a local communication context with an AM
// handler table and a bound segment (SegmentAttach or BindSegment). The
// primordial endpoint has index 0; EPCreate makes the others (ep.go).
type EP struct {
	c     *Client
	index EPIndex
	flags Flags
	caps  EPCapabilities
	cdata cdata
	// published: the bound segment was published (PublishBoundSegment or
	// SegmentAttach), which makes it part of the job's addressing.
	published atomic.Bool

	seg atomic.Pointer[Segment]

	pairMu sync.Mutex
	pairs  map[EPIndex]*TM // TMPair(ep, i), made on first use

	regMu    sync.Mutex // serialises RegisterHandlers
	handlers [256]atomic.Pointer[AMEntry]
}

// QueryClient implements gex_EP_QueryClient.
func (ep *EP) QueryClient() *Client { return ep.c }

// QueryFlags implements gex_EP_QueryFlags.
func (ep *EP) QueryFlags() Flags { return ep.flags }

// QuerySegment implements gex_EP_QuerySegment: the bound segment, or nil
// (GEX_SEGMENT_INVALID) before SegmentAttach.
func (ep *EP) QuerySegment() *Segment { return ep.seg.Load() }

// QueryIndex implements gex_EP_QueryIndex.
func (ep *EP) QueryIndex() EPIndex { return ep.index }

// SetCData implements gex_EP_SetCData.
func (ep *EP) SetCData(v any) { ep.cdata.set(v) }

// QueryCData implements gex_EP_QueryCData.
func (ep *EP) QueryCData() any { return ep.cdata.get() }

// TM is a team member (gex_TM_t): an ordered set of endpoints plus the local
// one that represents the caller. The primordial team holds every rank's
// primordial endpoint, in job-rank order.
type TM struct {
	c    *Client
	ep   *EP
	rank Rank
	size Rank
	// direct: team rank is job rank and every endpoint is primordial (the
	// primordial team, TMPair(ep0, 0)), so the RMA and atomic fast paths,
	// which know the primordial segments by job rank, apply.
	direct bool
	fast   fastMap // the RMA fast path's segment table (rma_fast_unsafe.go)
	flags  Flags
	// members maps team rank to job rank; nil means the identity (primordial
	// team and TM-pairs).
	members []Rank
	// eps maps team rank to the member's endpoint index; nil means every
	// member's index is pairEP (0 for the primordial team).
	eps    []EPIndex
	pairEP EPIndex
	// epPath: the local endpoint or some member is not primordial, so the
	// fast paths that know only primordial segments are skipped.
	epPath bool
	cdata  cdata

	id        uint64     // team id (team.go); 0 for TM-pairs
	ts        *teamState // collective state (guarded by the client's coll.mu)
	pair      bool       // a TM-pair (TMPair): point-to-point only
	noScratch bool       // created with GEX_FLAG_TM_NO_SCRATCH: no collectives
	scratch   []byte     // client-provided scratch, returned by Destroy
	destroyed atomic.Bool
	ads       atomic.Int32 // live atomic domains created over this team
}

// QueryClient implements gex_TM_QueryClient.
func (tm *TM) QueryClient() *Client { return tm.c }

// QueryEP implements gex_TM_QueryEP.
func (tm *TM) QueryEP() *EP { return tm.ep }

// QueryFlags implements gex_TM_QueryFlags.
func (tm *TM) QueryFlags() Flags { return tm.flags }

// QueryRank implements gex_TM_QueryRank.
func (tm *TM) QueryRank() Rank { return tm.rank }

// QuerySize implements gex_TM_QuerySize.
func (tm *TM) QuerySize() Rank { return tm.size }

// SetCData implements gex_TM_SetCData.
func (tm *TM) SetCData(v any) { tm.cdata.set(v) }

// QueryCData implements gex_TM_QueryCData.
func (tm *TM) QueryCData() any { return tm.cdata.get() }

// jobrank translates a team rank without checks (hot path; caller checked).
func (tm *TM) jobrank(r Rank) int {
	if tm.members == nil {
		return int(r)
	}
	return int(tm.members[r])
}

// TranslateRankToJobrank implements gex_TM_TranslateRankToJobrank.
func (tm *TM) TranslateRankToJobrank(rank Rank) (Rank, error) {
	if err := tm.c.checkRestricted("TranslateRankToJobrank"); err != nil {
		return RankInvalid, err
	}
	if rank >= tm.size {
		return RankInvalid, badArg("TranslateRankToJobrank", "rank %d out of range: team size is %d", rank, tm.size)
	}
	return Rank(tm.jobrank(rank)), nil
}

// TranslateJobrankToRank implements gex_TM_TranslateJobrankToRank: the rank in
// tm of the endpoint with the given job rank, or RankInvalid if the team has
// no such member.
func (tm *TM) TranslateJobrankToRank(jobrank Rank) (Rank, error) {
	if err := tm.c.checkRestricted("TranslateJobrankToRank"); err != nil {
		return RankInvalid, err
	}
	if int(jobrank) >= tm.c.size {
		return RankInvalid, badArg("TranslateJobrankToRank", "jobrank %d out of range: job size is %d", jobrank, tm.c.size)
	}
	if tm.members == nil {
		return jobrank, nil
	}
	for i, j := range tm.members {
		if j == jobrank {
			return Rank(i), nil
		}
	}
	return RankInvalid, nil
}

// TranslateRankToEP implements gex_TM_TranslateRankToEP: the job rank and
// endpoint index of the member of tm at rank.
func (tm *TM) TranslateRankToEP(rank Rank, flags Flags) (EPLocation, error) {
	if flags != 0 {
		return EPLocation{}, badArg("TranslateRankToEP", "flags must be 0, got %v", flags)
	}
	j, err := tm.TranslateRankToJobrank(rank)
	if err != nil {
		return EPLocation{}, err
	}
	return EPLocation{Rank: j, EPIndex: EPIndex(tm.epOf(rank))}, nil
}

// epOf is the endpoint index of team rank r (caller checked r).
func (tm *TM) epOf(r Rank) uint16 {
	if tm.eps == nil {
		return uint16(tm.pairEP)
	}
	return uint16(tm.eps[r])
}

// checkRank validates a team rank for a communication call.
func (tm *TM) checkRank(op string, rank Rank) error {
	if rank >= tm.size {
		return tm.rankErr(op, rank)
	}
	return nil
}

// rankErr is checkRank's error, out of line so that checkRank inlines.
func (tm *TM) rankErr(op string, rank Rank) error {
	return tm.c.report(badArg(op, "rank %d out of range: team size is %d", rank, tm.size))
}
