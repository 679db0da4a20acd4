package gex

// Segment is a local memory range registered for communication
// (gex_Segment_t). Its memory is shared memory, mapped into every process of
// the owner's neighbourhood.
type Segment struct {
	c     *Client
	mem   []byte
	addr  Addr
	cdata cdata
}

// SegmentAttach implements gex_Segment_Attach: a collective call over tm (the
// primordial team) that allocates a segment of size bytes on each caller, binds
// it to the caller's endpoint, maps the segments of the caller's neighbourhood,
// and ends with a barrier. size must be a non-zero multiple of PageSize, at most
// MaxLocalSegmentSize. One call per process.
//
// A rank whose arguments fail the checks still takes part in the collective so
// its peers do not hang; every rank then returns an error.
func SegmentAttach(tm *TM, size uint64) (*Segment, error) {
	if tm == nil {
		return nil, badArg("SegmentAttach", "tm is nil")
	}
	s, err := segmentAttach(tm, size)
	return s, tm.c.report(err)
}

func segmentAttach(tm *TM, size uint64) (*Segment, error) {
	c := tm.c
	if err := c.checkRestricted("SegmentAttach"); err != nil {
		return nil, err
	}
	var argErr error
	switch {
	case tm != c.tm:
		argErr = badArg("SegmentAttach", "tm must be the primordial team from ClientInit")
	case c.ep.seg.Load() != nil:
		argErr = badArg("SegmentAttach", "a segment is already attached (one call per process)")
	case size == 0 || size%PageSize != 0:
		argErr = badArg("SegmentAttach", "size %d is not a non-zero multiple of the page size %d", size, PageSize)
	case size > c.MaxLocalSegmentSize():
		argErr = badArg("SegmentAttach", "size %d exceeds MaxLocalSegmentSize %d (set GASNET_MAX_SEGSIZE to raise it)", size, c.MaxLocalSegmentSize())
	}
	if argErr != nil {
		if tm == c.tm && c.ep.seg.Load() == nil {
			_ = c.cd.AttachSegment(0) // take part so peers do not wait for us
		}
		return nil, argErr
	}
	if err := c.cd.AttachSegment(size); err != nil {
		return nil, resourceErr("SegmentAttach", "%v", err)
	}
	info := c.cd.Segment(c.rank)
	s := &Segment{c: c, mem: info.Local, addr: Addr(info.Owner)}
	c.ep.seg.Store(s)
	views := make([]segView, c.size)
	for r := range views {
		si := c.cd.Segment(r)
		views[r] = segView{owner: si.Owner, size: si.Size, local: si.Local}
	}
	c.segViews.Store(&views)
	return s, nil
}

// MaxLocalSegmentSize implements gasnet_getMaxLocalSegmentSize: the largest
// size SegmentAttach accepts on this rank (GASNET_MAX_SEGSIZE, else a share of
// physical memory among the ranks of the host).
func (c *Client) MaxLocalSegmentSize() uint64 { return c.topo.MaxSeg[c.rank] }

// MaxGlobalSegmentSize implements gasnet_getMaxGlobalSegmentSize: the smallest
// MaxLocalSegmentSize over all ranks.
func (c *Client) MaxGlobalSegmentSize() uint64 {
	m := c.topo.MaxSeg[0]
	for _, v := range c.topo.MaxSeg {
		m = min(m, v)
	}
	return m
}

// QueryClient implements gex_Segment_QueryClient.
func (s *Segment) QueryClient() *Client { return s.c }

// QueryFlags implements gex_Segment_QueryFlags (no segment flags are defined).
func (s *Segment) QueryFlags() Flags { return 0 }

// QueryAddr implements gex_Segment_QueryAddr: the base address of the segment
// in this process. Peers name locations in it by this address.
func (s *Segment) QueryAddr() Addr { return s.addr }

// QuerySize implements gex_Segment_QuerySize.
func (s *Segment) QuerySize() uint64 { return uint64(len(s.mem)) }

// Bytes returns the segment's memory. Writes to it are visible to peers that
// have it mapped (the neighbourhood) and to RMA.
func (s *Segment) Bytes() []byte { return s.mem }

// SetCData implements gex_Segment_SetCData.
func (s *Segment) SetCData(v any) { s.cdata.set(v) }

// QueryCData implements gex_Segment_QueryCData.
func (s *Segment) QueryCData() any { return s.cdata.get() }

// BoundSegment is what QueryBoundSegmentNB reports about an endpoint's bound
// segment.
type BoundSegment struct {
	// Owner is the segment's address in the owner's address space.
	Owner Addr
	// Local is the segment mapped into this process (neighbourhood peers and
	// self), or nil where it is not mapped.
	Local []byte
	// Size is the segment length; 0 if the endpoint has no bound segment (an
	// "unsuccessful" query).
	Size uint64
}

// QueryBoundSegmentNB implements gex_EP_QueryBoundSegmentNB(tm, rank, ...): the
// bound segment of the endpoint named by (tm, rank). The spec's first argument
// is the tm, so it is a TM method here. Segment information of every rank is
// exchanged by SegmentAttach, so the query never communicates: the event is
// always EventInvalid, with or without FlagImmediate, and the call is permitted
// in restricted context when flags include FlagImmediate (as the spec says).
func (tm *TM) QueryBoundSegmentNB(rank Rank, flags Flags) (BoundSegment, Event, error) {
	if flags&FlagImmediate == 0 {
		if err := tm.c.checkRestricted("QueryBoundSegmentNB"); err != nil {
			return BoundSegment{}, EventInvalid, err
		}
	}
	if flags&^FlagImmediate != 0 {
		return BoundSegment{}, EventInvalid, badArg("QueryBoundSegmentNB", "flags %v not accepted (only GEX_FLAG_IMMEDIATE)", flags&^FlagImmediate)
	}
	if err := tm.checkRank("QueryBoundSegmentNB", rank); err != nil {
		return BoundSegment{}, EventInvalid, err
	}
	info := tm.c.cd.Segment(tm.jobrank(rank))
	return BoundSegment{Owner: Addr(info.Owner), Local: info.Local, Size: info.Size}, EventInvalid, nil
}
