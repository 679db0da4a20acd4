package gex

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/shm"
)

// Segment is a local memory range registered for communication
// (gex_Segment_t). Library-allocated segments are shared memory that the
// owner's neighbourhood maps once the segment is bound and published.
type Segment struct {
	c     *Client
	mem   []byte
	addr  Addr
	cdata cdata

	mk       *MK
	reg      *shm.Region // library-allocated: the shared region (nil for client memory)
	attached bool        // made by SegmentAttach (cannot be destroyed)
	bound    atomic.Pointer[EP]
	dead     atomic.Bool
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
	s := &Segment{c: c, mem: info.Local, addr: Addr(info.Owner), mk: MKHost, attached: true}
	s.bound.Store(c.ep)
	c.ep.seg.Store(s)
	c.ep.published.Store(true)
	views := make([]segView, c.size)
	for r := range views {
		si := c.cd.Segment(r)
		views[r] = segView{owner: si.Owner, size: si.Size, local: si.Local}
	}
	c.segViews.Store(&views)
	c.mapped.Store(newMapTable(views))
	tm.fast.fill(c, tm.direct, tm.size)
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
// bound segment of the endpoint named by (tm, rank), which may be any
// endpoint of any process. The spec's first argument is the tm, so it is a TM
// method here. SegmentAttach and PublishBoundSegment give every member of
// their team the segment information, and a process knows its own
// endpoints', so the query mostly answers from what this process holds, with
// EventInvalid. For another process's non-primordial endpoint whose segment
// was never published here the information must be fetched: the call
// returns an empty BoundSegment and an event that completes when it has
// arrived, after which the same query answers it (Size 0 still: the endpoint
// has no bound segment). With FlagImmediate nothing is fetched and the
// answer is "unsuccessful" (Size 0); the call is then permitted in
// restricted context.
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
	j, ep := tm.jobrank(rank), tm.epOf(rank)
	info := tm.c.segOf(j, ep)
	if info.Size == 0 && j != tm.c.rank && ep != 0 && flags&FlagImmediate == 0 {
		// Not published here: fetch it from the endpoint. The event
		// completes when the information has arrived; the same query then
		// answers it (a returned struct cannot be written later in Go).
		ev, err := tm.c.fetchSeg(j, ep)
		return BoundSegment{}, ev, tm.c.report(err)
	}
	return BoundSegment{Owner: Addr(info.Owner), Local: info.Local, Size: info.Size}, EventInvalid, nil
}

// SegmentCreate implements gex_Segment_Create (Memory Kinds, "gex_Segment_Create"):
// a segment of kind mk owned by c, not bound to any endpoint. With mem nil
// the library allocates size bytes (a non-zero multiple of PageSize up to
// MaxLocalSegmentSize) as shared memory, which neighbourhood peers map when
// the segment is bound and published; otherwise mem is client-provided host
// memory (size must be 0 or len(mem)): it is reached through the AM path by
// every peer (Go memory cannot be mapped into another process). flags must
// be 0.
func SegmentCreate(c *Client, mem []byte, size uint64, mk *MK, flags Flags) (*Segment, error) {
	const op = "SegmentCreate"
	if c == nil {
		return nil, badArg(op, "client is nil")
	}
	if err := c.checkRestricted(op); err != nil {
		return nil, err
	}
	switch {
	case mk == nil:
		return nil, c.report(badArg(op, "kind is nil (pass MKHost)"))
	case mk.destroyed.Load():
		return nil, c.report(badArg(op, "kind was destroyed"))
	case mk.c != nil && mk.c != c:
		return nil, c.report(badArg(op, "kind belongs to another client"))
	case flags != 0:
		return nil, c.report(badArg(op, "flags %v not accepted (must be 0)", flags))
	}
	if mem != nil {
		if len(mem) == 0 {
			return nil, c.report(badArg(op, "client-provided memory is empty: length must be non-zero"))
		}
		if size != 0 && size != uint64(len(mem)) {
			return nil, c.report(badArg(op, "size %d differs from len(mem) %d (pass 0 or the length)", size, len(mem)))
		}
		mem = mem[:len(mem):len(mem)]
		return &Segment{c: c, mem: mem, addr: Addr(addrOf(mem)), mk: mk}, nil
	}
	switch {
	case size == 0 || size%PageSize != 0:
		return nil, c.report(badArg(op, "size %d is not a non-zero multiple of the page size %d", size, PageSize))
	case size > c.MaxLocalSegmentSize():
		return nil, c.report(badArg(op, "size %d exceeds MaxLocalSegmentSize %d", size, c.MaxLocalSegmentSize()))
	}
	b, reg, err := mk.kind.alloc(c, size)
	if err != nil {
		return nil, c.report(resourceErr(op, "allocating %d bytes of %v memory: %v", size, mk.class, err))
	}
	return &Segment{c: c, mem: b, addr: Addr(addrOf(b)), mk: mk, reg: reg}, nil
}

// QueryKind implements gex_Segment_QueryKind.
func (s *Segment) QueryKind() *MK { return s.mk }

// Destroy implements gex_Segment_Destroy: it releases the segment and, if
// the library allocated it, its memory. It refuses the primordial segment
// (SegmentAttach's) and a segment bound to an endpoint whose segment was
// published (peers may address it), or that has path-(b) operations in
// flight from this process. flags must be 0.
func (s *Segment) Destroy(flags Flags) error {
	const op = "Segment.Destroy"
	if s == nil {
		return badArg(op, "segment is nil")
	}
	c := s.c
	if err := c.checkRestricted(op); err != nil {
		return err
	}
	ep := s.bound.Load()
	switch {
	case flags != 0:
		return c.report(badArg(op, "flags %v not accepted (must be 0)", flags))
	case s.attached:
		return c.report(badArg(op, "the segment made by SegmentAttach cannot be destroyed"))
	case s.dead.Load():
		return c.report(badArg(op, "segment was already destroyed"))
	case ep != nil && ep.published.Load():
		return c.report(badArg(op, "segment is bound to endpoint %d and published: peers may still address it", ep.index))
	case c.inFlight() > 0:
		return c.report(badArg(op, "%d operation(s) are pending on this process", c.inFlight()))
	}
	if !s.dead.CompareAndSwap(false, true) {
		return c.report(badArg(op, "segment was already destroyed"))
	}
	if ep != nil {
		ep.seg.CompareAndSwap(s, nil)
	}
	err := s.mk.kind.free(s.mem, s.reg)
	s.mem, s.reg = nil, nil
	if err != nil {
		return c.report(resourceErr(op, "%v", err))
	}
	return nil
}

// inFlight counts this process's path-(b) operations not yet complete.
func (c *Client) inFlight() int {
	c.ops.mu.Lock()
	n := len(c.ops.ops) - len(c.ops.free)
	c.ops.mu.Unlock()
	return n
}

// BindSegment implements gex_EP_BindSegment: seg becomes ep's bound segment.
// ep and seg must belong to the same client, ep must have no bound segment
// and seg must not be bound elsewhere. flags must be 0.
func (ep *EP) BindSegment(seg *Segment, flags Flags) error {
	const op = "BindSegment"
	if ep == nil {
		return badArg(op, "ep is nil")
	}
	c := ep.c
	if err := c.checkRestricted(op); err != nil {
		return err
	}
	switch {
	case seg == nil:
		return c.report(badArg(op, "segment is nil"))
	case seg.c != c:
		return c.report(badArg(op, "segment belongs to another client than endpoint %d", ep.index))
	case seg.dead.Load():
		return c.report(badArg(op, "segment was destroyed"))
	case flags != 0:
		return c.report(badArg(op, "flags %v not accepted (must be 0)", flags))
	case ep.caps&(EPCapabilityRMA|EPCapabilityAM|EPCapabilityVIS|EPCapabilityColl|EPCapabilityAD) == 0:
		return c.report(badArg(op, "endpoint %d has no capability that uses a segment", ep.index))
	}
	if b := seg.bound.Load(); b != nil {
		return c.report(badArg(op, "segment is already bound to endpoint %d", b.index))
	}
	if !ep.seg.CompareAndSwap(nil, seg) {
		return c.report(badArg(op, "endpoint %d already has a bound segment", ep.index))
	}
	if !seg.bound.CompareAndSwap(nil, ep) {
		ep.seg.Store(nil)
		return c.report(badArg(op, "segment is already bound to another endpoint"))
	}
	return nil
}

// pubRec is one endpoint's published segment in PublishBoundSegment's
// exchange: endpoint index, flags (bit 0: a mappable region follows),
// owner address, size, region descriptor.
const pubRec = 2 + 2 + 4 + 8 + 8 + shm.DescSize

// pubSeg is a peer endpoint's published segment as this process knows it.
type pubSeg struct {
	info conduit.SegInfo
	reg  *shm.Region // the mapping, for neighbourhood peers' shared memory
}

// pubTable holds every published segment of other processes' endpoints.
type pubTable struct {
	mu sync.Mutex
	m  map[uint64]*pubSeg // key: job rank << 16 | endpoint index
}

// PublishBoundSegment implements gex_EP_PublishBoundSegment, collective over
// tm: every caller passes the endpoints whose bound segments it publishes
// (each must have one, and publishing an endpoint twice is refused), and
// every member of tm learns them all. Neighbourhood peers map the shared
// memory of library-allocated host segments, so RMA to them is a copy. flags
// must be 0. A caller whose arguments fail its checks still takes part, so
// the others do not hang, and returns the error.
func PublishBoundSegment(tm *TM, eps []*EP, flags Flags) error {
	const op = "PublishBoundSegment"
	c, err := teamTM(op, tm)
	if err != nil {
		return err
	}
	var argErr error
	seen := map[*EP]bool{}
	for i, ep := range eps {
		switch {
		case flags != 0:
			argErr = badArg(op, "flags %v not accepted (must be 0)", flags)
		case ep == nil:
			argErr = badArg(op, "eps[%d] is nil", i)
		case ep.c != c:
			argErr = badArg(op, "eps[%d] belongs to another client", i)
		case ep.seg.Load() == nil:
			argErr = badArg(op, "eps[%d] (endpoint %d) has no bound segment", i, ep.index)
		case ep.published.Load() || seen[ep]:
			argErr = badArg(op, "eps[%d] (endpoint %d): its segment is already published", i, ep.index)
		}
		if argErr != nil {
			break
		}
		seen[ep] = true
	}
	mine := []byte{}
	if argErr == nil {
		mine = make([]byte, len(eps)*pubRec)
		for i, ep := range eps {
			seg := ep.seg.Load()
			r := mine[i*pubRec:]
			binary.LittleEndian.PutUint16(r[0:], uint16(ep.index))
			binary.LittleEndian.PutUint64(r[8:], uint64(seg.addr))
			binary.LittleEndian.PutUint64(r[16:], uint64(len(seg.mem)))
			if seg.reg != nil {
				binary.LittleEndian.PutUint16(r[2:], 1)
				d, _ := seg.reg.Desc().MarshalBinary()
				copy(r[24:], d)
			}
		}
	}
	all, err := c.allGatherVar(tm, mine)
	if err != nil {
		return c.report(err)
	}
	if argErr != nil {
		return c.report(argErr)
	}
	for _, ep := range eps {
		ep.published.Store(true)
	}
	for r, recs := range all {
		j := tm.jobrank(Rank(r))
		if j == c.rank {
			continue
		}
		for len(recs) >= pubRec {
			c.learnSeg(j, recs[:pubRec])
			recs = recs[pubRec:]
		}
	}
	return nil
}

// learnSeg records one published segment of job rank j, mapping it if j is
// in this neighbourhood and the segment is shared memory.
func (c *Client) learnSeg(j int, r []byte) {
	ep := binary.LittleEndian.Uint16(r[0:])
	ps := &pubSeg{info: conduit.SegInfo{Owner: binary.LittleEndian.Uint64(r[8:]), Size: binary.LittleEndian.Uint64(r[16:])}}
	if binary.LittleEndian.Uint16(r[2:])&1 != 0 && c.topo.Nbrhd[j] == c.topo.Nbrhd[c.rank] {
		var d shm.Desc
		if d.UnmarshalBinary(r[24:pubRec]) == nil {
			if reg, err := c.allocator().Open(d); err == nil && uint64(len(reg.Bytes())) >= ps.info.Size {
				ps.reg, ps.info.Local = reg, reg.Bytes()[:ps.info.Size:ps.info.Size]
			} else if err == nil {
				_ = reg.Close()
			}
		}
	}
	k := uint64(j)<<16 | uint64(ep)
	c.pub.mu.Lock()
	if c.pub.m == nil {
		c.pub.m = make(map[uint64]*pubSeg)
	}
	old := c.pub.m[k]
	c.pub.m[k] = ps
	c.pub.mu.Unlock()
	if old != nil && old.reg != nil {
		_ = old.reg.Close() // the peer republished: its old segment is gone
	}
}

// segOf is the segment of endpoint ep of job rank j as this process knows it
// (Size 0 if unknown).
func (c *Client) segOf(j int, ep uint16) conduit.SegInfo {
	if j == c.rank {
		if e := c.epAt(ep); e != nil {
			if s := e.seg.Load(); s != nil {
				return conduit.SegInfo{Owner: uint64(s.addr), Size: uint64(len(s.mem)), Local: s.mem}
			}
		}
		return conduit.SegInfo{}
	}
	if ep == 0 {
		if si := c.cd.Segment(j); si.Size != 0 {
			return si
		}
	}
	c.pub.mu.Lock()
	ps := c.pub.m[uint64(j)<<16|uint64(ep)]
	c.pub.mu.Unlock()
	if ps == nil {
		return conduit.SegInfo{}
	}
	return ps.info
}

// allGatherVar gathers every member's mine (any length) and returns them
// in team-rank order, on every member: the lengths first, then the records
// padded to the longest, each a gather to rank 0 and a broadcast.
func (c *Client) allGatherVar(tm *TM, mine []byte) ([][]byte, error) {
	n := int(tm.size)
	var l [8]byte
	binary.LittleEndian.PutUint64(l[:], uint64(len(mine)))
	lens := make([]byte, 8*n)
	if err := c.allGather(tm, lens, l[:]); err != nil {
		return nil, err
	}
	most := 0
	for r := 0; r < n; r++ {
		most = max(most, int(binary.LittleEndian.Uint64(lens[8*r:])))
	}
	out := make([][]byte, n)
	if most == 0 {
		return out, nil
	}
	padded := make([]byte, most)
	copy(padded, mine)
	table := make([]byte, most*n)
	if err := c.allGather(tm, table, padded); err != nil {
		return nil, err
	}
	for r := range out {
		k := min(int(binary.LittleEndian.Uint64(lens[8*r:])), most)
		out[r] = table[r*most : r*most+k]
	}
	return out, nil
}

// allGather is a gather to rank 0 of tm and a broadcast of the table.
func (c *Client) allGather(tm *TM, table, mine []byte) error {
	if err := c.coll.gather(tm, table, mine, len(mine)); err != nil {
		return err
	}
	ev, err := tm.BroadcastNB(0, table, table, len(table), 0)
	if err != nil {
		return err
	}
	return ev.Wait()
}

// Fetching a bound segment (gex_EP_QueryBoundSegmentNB when the information
// is not here): a Short request to the endpoint, answered by a Medium reply
// carrying its record in PublishBoundSegment's format (size 0: none bound).
const (
	hSegQuery AMIndex = 8  // Short request to the endpoint; args: op, gen
	hSegInfo  AMIndex = 12 // Medium reply; args: op, gen; payload: one pubRec
)

// segRecord encodes ep's bound segment as one pubRec.
func segRecord(r []byte, ep *EP) {
	binary.LittleEndian.PutUint16(r[0:], uint16(ep.index))
	seg := ep.seg.Load()
	if seg == nil || seg.dead.Load() {
		return
	}
	binary.LittleEndian.PutUint64(r[8:], uint64(seg.addr))
	binary.LittleEndian.PutUint64(r[16:], uint64(len(seg.mem)))
	if seg.reg != nil {
		binary.LittleEndian.PutUint16(r[2:], 1)
		d, _ := seg.reg.Desc().MarshalBinary()
		copy(r[24:], d)
	}
}

// fetchSeg starts the fetch of endpoint ep of job rank j's segment.
func (c *Client) fetchSeg(j int, ep uint16) (Event, error) {
	id, op := c.startOp(j, 1, pubRec, nil, modeNB, ECGet)
	ev := op.ev
	h := conduit.Header{Cat: conduit.Short, IsReq: true, Handler: uint8(hSegQuery), NArgs: 2, EP: ep}
	h.Args[0], h.Args[1] = id, int32(op.gen)
	if err := c.cd.Send(j, h, nil, 0); err != nil {
		return abandonOp(c, &c.ops, "QueryBoundSegmentNB", id, op, modeNB, err)
	}
	return ev.handle(), nil
}

// segHandlers answer and complete segment fetches.
func (c *Client) segHandlers() []AMEntry {
	return []AMEntry{
		{Index: hSegQuery, Flags: FlagAMShort | FlagAMRequest, NArgs: 2, Name: "gex-seg-query", Fn: func(t *Token, _ []byte, a []AMArg) {
			var rec [pubRec]byte
			segRecord(rec[:], t.ep)
			h := conduit.Header{Cat: conduit.Medium, Handler: uint8(hSegInfo), NArgs: 2}
			h.Args[0], h.Args[1] = a[0], a[1]
			c.replyInternal(t, h, rec[:])
		}},
		{Index: hSegInfo, Flags: FlagAMMedium | FlagAMReply, NArgs: 2, Name: "gex-seg-info", Fn: func(t *Token, p []byte, a []AMArg) {
			op := c.ops.lookup(a[0], a[1], t.src)
			if op == nil {
				c.logf("dropped segment information from rank %d for a query not in flight (%d/%d)", t.src, a[0], a[1])
				return
			}
			var err error
			if len(p) != pubRec {
				err = resourceErr("QueryBoundSegmentNB", "rank %d answered with %d bytes, want %d", t.src, len(p), pubRec)
			} else if binary.LittleEndian.Uint64(p[16:]) != 0 {
				c.learnSeg(t.src, p)
			}
			c.chunkDone(a[0], op, err)
		}},
	}
}
