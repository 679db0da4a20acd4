package gex

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/conduit"
)

// The collectives engine (GASNet-EX "Collectives (Coll)").
//
// Every collective is an operation (collOp) of a team, numbered by the team's
// collective sequence: all members call collectives over a team in the same
// order, so the n-th call on every member is the same operation, and a message
// names its operation by (team id, sequence number). Team ids are derived from
// the parent's id and sequence number at creation (team.go), so members agree
// on them without communicating.
//
// Where a team's members share memory, the barrier, large broadcasts and
// small reductions run on flags and buffers in the ranks' collective areas
// instead (coll_shm.go, coll_shm_small.go); over several neighbourhoods they
// combine that with AMs among one member of each (coll_shm_hier.go).
// Everything else is library AMs
// through the conduit (hColl, Medium requests), so a conduit that moves AMs
// carries the collectives too: within a neighbourhood
// they travel through the shared-memory rings and payload pools of the smp
// conduit, between hosts over the network. Handlers only record what arrived:
// an AM handler must not send requests. Whatever an arrival makes possible
// (forwarding, combining, the next round) is done by progress(), which runs
// outside handler context - in the initiating call, in every blocking wait and
// Poll of the client, and on the receive goroutine.
//
// A message may arrive before its operation was initiated here (a peer ran
// ahead), even before the team exists here: it is kept (payload copied into a
// pooled buffer) in an operation created on arrival and adopted when the local
// call comes. Every message an algorithm sends is one its receiver needs to
// complete, so when a member's operations are complete no more messages for
// them can arrive; a message naming an operation this rank already finished is
// dropped with a log line.

// hColl is the collectives' AM (Medium request). Args: team id lo, team id hi,
// sequence number, kind<<8|slot, byte offset, slot total bytes, sender's team
// rank, barrier id, barrier flags.
const hColl AMIndex = 6

const collNArgs = 9

// collKind is the kind of a collective operation.
type collKind uint8

const (
	kindBarrier collKind = iota + 1
	kindBcast
	kindReduceOne
	kindReduceAll
	kindGather // internal: every rank's nbytes land at rank 0 (team construction)
	kindLast
)

var kindNames = [...]string{"", "Barrier", "Broadcast", "ReduceToOne", "ReduceToAll", "Gather"}

func (k collKind) String() string {
	if k > 0 && k < kindLast {
		return kindNames[k]
	}
	return "kind(" + itoa(int(k)) + ")"
}

// maxSlots bounds the distinct inbound streams of one operation: slot 0 is the
// data (broadcast, gathered records, a reduction's result), slots 1+k the
// contribution of the tree child at distance 2^k, or barrier round k.
const maxSlots = 34

// Barrier flags carried by the barrier machinery (room for the GASNet-1 named
// barrier: an id and a flags word travel with every barrier message).
const (
	barrierAnonymous uint32 = 1 << 0 // GASNET_BARRIERFLAG_ANONYMOUS
	barrierMismatch  uint32 = 1 << 1 // GASNET_BARRIERFLAG_MISMATCH
)

// collSlot is one inbound stream of an operation.
type collSlot struct {
	buf     []byte // where the bytes land: the caller's dst or a pooled buffer
	pooled  bool
	total   int
	got     int
	arrived bool
	id      int32 // barrier: the sender's id and flags
	bflags  uint32
	segOff  int // direct broadcast: the data's offset in the root's segment
}

// collSpan is a received byte range not yet forwarded (broadcast).
type collSpan struct{ off, n int }

// collOp is one collective operation of a team. Fields are guarded by the
// engine's mu, except that progress() - one goroutine at a time - owns the
// algorithm state it reads between advance() and the sends it queued.
type collOp struct {
	ts        *teamState
	seq       uint32
	kind      collKind
	initiated bool
	queued    bool
	finishing bool // complete once progress has sent its messages
	again     bool // advance again once the queued messages are out
	ev        *eventState
	err       error

	me, n, root int
	dst, src    []byte
	nbytes      int
	dt          DT
	dtSize      int
	op          OP
	fn          ReduceFn
	cdata       any
	id          int32  // barrier id
	bflags      uint32 // barrier flags (accumulated)

	step    int  // algorithm position
	sent    bool // barrier: this round's message is queued
	phase   int  // ReduceToAll: 0 reduce up, 1 broadcast down
	acc     []byte
	spans   []collSpan
	slots   [maxSlots]collSlot
	nchild  int   // children in the reduction tree
	staged  int64 // bytes staged before initiation (counted in the engine's staged)
	forward bool
	viaMap  bool // broadcast through the root's mapped segment (root side)

	shm    bool    // runs through the collective areas (coll_shm.go)
	small  bool    // a reduction through the contribution buffers (coll_shm_small.go)
	ord    uint32  // its number among the team's small operations
	sub    *collOp // hierarchical barrier: the leaders' AM barrier in flight
	subEv  Event   // its event
	parent *collOp // the hierarchical barrier this leaders' barrier serves
	hnet   bool    // hierarchical: this rank has a network phase still to start
	hring  bool    // hierarchical broadcast: the ring phase is complete here
}

// teamState is a team's collective state, keyed by team id in the engine.
type teamState struct {
	id uint64
	// base is the team's id when members are addressed one by one
	// (perMember: a team over non-primordial endpoints, where a process may
	// hold several members, each with its own state under memberID(base, r)).
	base      uint64
	perMember bool
	tm        *TM // nil while only peers' messages created it
	next      uint32
	active    int // operations initiated here and not complete
	ops       map[uint32]*collOp
	legacy    atomic.Bool // a GASNet-1 barrier is in progress (gasnet1.go)
	shm       *shmTeam    // shared-memory state, or nil (coll_shm.go)
}

// collSend is a message progress() has to inject.
type collSend struct {
	op      *collOp
	to      int // job rank
	rank    int // team rank
	slot    int
	off     int
	total   int
	payload []byte
}

// collEngine is a client's collectives state.
type collEngine struct {
	c        *Client
	mu       sync.Mutex
	teams    map[uint64]*teamState
	ready    []*collOp
	spare    []*collOp
	hasReady atomic.Bool
	run      sync.Mutex // held by the goroutine running progress
	sends    []collSend // progress-owned
	done     []*collOp  // progress-owned
	free     []*collOp
	bufs     [24][][]byte // pooled buffers by size class (1<<6 .. 1<<29)
	stale    atomic.Uint64
	staged   int64 // bytes staged for operations not yet initiated here (under mu)
	shm      shmState
}

func (e *collEngine) init(c *Client) {
	e.c = c
	e.teams = make(map[uint64]*teamState)
}

// team returns the state for id, creating it.
func (e *collEngine) team(id uint64) *teamState {
	ts := e.teams[id]
	if ts == nil {
		ts = &teamState{id: id, ops: make(map[uint32]*collOp)}
		e.teams[id] = ts
	}
	return ts
}

// getBuf returns a pooled buffer of n bytes (8-byte aligned: reductions view
// it as a slice of the element type).
func (e *collEngine) getBuf(n int) []byte {
	cl := max(0, bits.Len(uint(n-1))-6)
	if n <= 0 {
		return nil
	}
	if cl < len(e.bufs) {
		if l := len(e.bufs[cl]); l > 0 {
			b := e.bufs[cl][l-1]
			e.bufs[cl] = e.bufs[cl][:l-1]
			return b[:n]
		}
		return make([]byte, n, 64<<cl)
	}
	return make([]byte, n)
}

func (e *collEngine) putBuf(b []byte) {
	if cap(b) < 64 || cap(b)&(cap(b)-1) != 0 {
		return
	}
	cl := bits.Len(uint(cap(b))) - 7
	if cl < len(e.bufs) && len(e.bufs[cl]) < 8 {
		e.bufs[cl] = append(e.bufs[cl], b[:0])
	}
}

// newOp takes an operation from the free list (under mu).
func (e *collEngine) newOp(ts *teamState, seq uint32, kind collKind) *collOp {
	var op *collOp
	if n := len(e.free); n > 0 {
		op = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		op = &collOp{}
	}
	op.ts, op.seq, op.kind = ts, seq, kind
	ts.ops[seq] = op
	return op
}

// release returns op's buffers and op itself to the pools (under mu).
func (e *collEngine) release(op *collOp) {
	e.staged -= op.staged
	for i := range op.slots {
		if op.slots[i].pooled {
			e.putBuf(op.slots[i].buf)
		}
	}
	if op.acc != nil {
		e.putBuf(op.acc)
	}
	spans := op.spans[:0]
	*op = collOp{}
	op.spans = spans
	if len(e.free) < 64 {
		e.free = append(e.free, op)
	}
}

// enqueue marks op as having work for progress (under mu).
func (e *collEngine) enqueue(op *collOp) {
	if !op.queued && !op.finishing {
		op.queued = true
		e.ready = append(e.ready, op)
		e.hasReady.Store(true)
	}
}

func teamID(a []AMArg) uint64 { return uint64(uint32(a[0])) | uint64(uint32(a[1]))<<32 }

// seqBefore reports a < b in serial-number order.
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }

// collHandlers is the library's collectives handler.
func (c *Client) collHandlers() []AMEntry {
	return []AMEntry{{Index: hColl, Flags: FlagAMMedium | FlagAMRequest, NArgs: collNArgs, Name: "gex-coll",
		Fn: func(t *Token, p []byte, a []AMArg) { c.coll.recv(t.src, a, p) }}}
}

// recv records an arriving collective message. It runs in handler context:
// it copies and counts, and leaves everything else to progress. Nothing in the
// message is trusted: a malformed one is dropped with a message.
func (e *collEngine) recv(src int, a []AMArg, p []byte) {
	id, seq := teamID(a), uint32(a[2])
	kind, slot := collKind(uint32(a[3])>>8), int(a[3]&0xff)
	off, total := int(a[4]), int(a[5])
	direct := kind == kindBcast && slot == slotDirect
	if direct {
		// A direct-broadcast notice: off is an offset in the root's
		// segment, checked against the mapping when it is used.
		off = int(uint32(a[4]))
		if len(p) != 0 || total != 0 {
			off = -1
		}
		total = 0
	}
	if kind == 0 || kind >= kindLast || slot >= maxSlots || off < 0 || total < 0 || !direct && (off > total || len(p) > total-off) {
		e.c.logf("dropped a malformed collective message from rank %d (kind %d, slot %d, bytes [%d,+%d) of %d)", src, kind, slot, off, len(p), total)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ts := e.team(id)
	op := ts.ops[seq]
	if op == nil {
		if ts.tm != nil && seqBefore(seq, ts.next) {
			if e.stale.Add(1) <= 10 {
				e.c.logf("dropped a %v message from rank %d for collective #%d of a team, which this rank already completed", kind, src, seq)
			}
			return
		}
		op = e.newOp(ts, seq, kind)
	}
	if op.finishing {
		e.c.logf("dropped a %v message from rank %d for collective #%d of a team, which is complete here", kind, src, seq)
		return
	}
	if op.kind != kind {
		op.fail(badArg("Coll", "collective calls out of order: rank %d is in %v where this rank called %v (collective #%d of the team)", src, kind, op.kind, seq))
		e.enqueue(op)
		return
	}
	s := &op.slots[slot]
	if !s.arrived {
		if op.initiated {
			// The stream's size follows from this rank's own arguments; a
			// peer disagreeing allocates nothing here.
			if want := op.expect(slot); want != total {
				op.fail(badArg("Coll", "%v: rank %d sent a stream of %d bytes where this rank expects %d: arguments are not single-valued", kind, src, total, want))
				e.enqueue(op)
				return
			}
		} else if e.staged+int64(total) > maxStaged {
			e.c.logf("dropped a %v message from rank %d: staging it would hold more than %d bytes for collectives this rank has not called yet", kind, src, maxStaged)
			return
		}
		s.arrived, s.total = true, total
		if total > 0 {
			if b := op.direct(slot); b != nil && len(b) == total {
				s.buf = b
			} else {
				s.buf, s.pooled = e.getBuf(total), true
				if !op.initiated {
					op.staged += int64(total)
					e.staged += int64(total)
				}
			}
		}
	} else if total == 0 {
		e.c.logf("dropped a duplicate %v message from rank %d (collective #%d of a team, stream %d)", kind, src, seq, slot)
		return
	} else if s.total != total || s.got+len(p) > total {
		op.fail(badArg("Coll", "%v: rank %d sent %d bytes of %d for a stream of %d bytes (of which %d arrived): arguments are not single-valued", kind, src, len(p), total, s.total, s.got))
		e.enqueue(op)
		return
	}
	if direct {
		s.segOff, off = off, 0
	}
	copy(s.buf[off:], p)
	s.got += len(p)
	if kind == kindBarrier {
		s.id, s.bflags = a[7], uint32(a[8])
	}
	if slot == 0 && (kind == kindBcast || kind == kindReduceAll) && len(p) > 0 {
		op.spans = append(op.spans, collSpan{off, len(p)})
	}
	if op.initiated {
		e.enqueue(op)
	}
}

// fail records the operation's first error.
func (op *collOp) fail(err error) {
	if op.err == nil {
		op.err = err
	}
}

// maxStaged bounds the bytes a rank holds for collectives it has not called
// yet (peers ahead of it): beyond it, their messages are dropped with a line,
// so no peer can make a rank allocate without limit.
const maxStaged = 1 << 30

// expect is the size of stream slot of an initiated operation, as this
// rank's own arguments determine it (-1: no such stream).
func (op *collOp) expect(slot int) int {
	switch op.kind {
	case kindBarrier:
		if slot >= 1 && 1<<(slot-1) < op.n {
			return 0
		}
	case kindBcast:
		switch {
		case slot == 0:
			return op.nbytes
		case slot == slotDirect, slot >= slotAck && slot < slotAck+op.n-1:
			return 0
		}
	case kindReduceOne, kindReduceAll:
		if slot <= 32 {
			return op.nbytes
		}
	case kindGather:
		if slot == 0 {
			return op.n * op.nbytes
		}
	}
	return -1
}

// direct is where slot's bytes may land without a staging copy once the
// operation is initiated (nil: a pooled buffer).
func (op *collOp) direct(slot int) []byte {
	if !op.initiated || slot != 0 {
		return nil
	}
	switch op.kind {
	case kindBcast, kindReduceOne, kindReduceAll:
		return op.dst[:op.nbytes]
	}
	return nil
}

// start registers the local call of a collective on tm and returns the
// operation, adopting one that peers' messages created (under mu).
func (e *collEngine) start(tm *TM, kind collKind) (*collOp, error) {
	ts := tm.ts
	seq := ts.next
	ts.next++
	op := ts.ops[seq]
	if op == nil {
		op = e.newOp(ts, seq, kind)
	} else if op.kind != kind {
		op.fail(badArg("Coll", "collective calls out of order: a peer is in %v where this rank called %v (collective #%d of the team)", op.kind, kind, seq))
		op.kind = kind
	}
	op.me, op.n = int(tm.rank), int(tm.size)
	ts.active++
	return op, nil
}

// launch completes initiation: the operation gets its event, is marked
// initiated and handed to progress, which sends what can be sent at once.
func (e *collEngine) launch(op *collOp) Event {
	op.ev = e.c.newEvent(1)
	op.ev.what, op.ev.coll = op.kind.String(), op
	h := op.ev.handle()
	op.initiated = true
	e.enqueue(op)
	e.mu.Unlock()
	e.progress()
	return h
}

// pending reports whether progress may have something to do: a
// shared-memory collective under way or an operation ready. It inlines into
// the wait loops, which call progress only then (two loads between AMs
// instead of a call).
func (e *collEngine) pending() bool { return e.shm.n.Load() != 0 || e.hasReady.Load() }

// progress runs the operations that have work, one goroutine at a time. It
// must not run in handler context (it sends requests).
func (e *collEngine) progress() {
	if e.shm.n.Load() != 0 {
		e.advanceShm()
	}
	for e.hasReady.Load() {
		if !e.run.TryLock() {
			return // the holder re-checks hasReady after unlocking
		}
		for {
			e.mu.Lock()
			if len(e.ready) == 0 {
				e.hasReady.Store(false)
				e.mu.Unlock()
				break
			}
			batch := e.ready
			e.ready, e.spare = e.spare[:0], batch
			e.sends, e.done = e.sends[:0], e.done[:0]
			for _, op := range batch {
				op.queued = false
				if op.advance(e) {
					op.finishing = true
					e.done = append(e.done, op)
				}
			}
			e.mu.Unlock()
			for i := range e.sends {
				s := &e.sends[i]
				if err := e.send(s); err != nil {
					e.mu.Lock()
					s.op.fail(err)
					e.mu.Unlock()
				}
				s.payload, s.op = nil, nil
			}
			if len(e.spare) > 0 {
				e.mu.Lock()
				for _, op := range e.spare {
					if op.again && !op.finishing {
						op.again = false
						e.enqueue(op)
					}
				}
				e.mu.Unlock()
			}
			if len(e.done) > 0 {
				e.mu.Lock()
				for i, op := range e.done {
					e.finish(op)
					e.done[i] = nil
				}
				e.mu.Unlock()
			}
		}
		e.run.Unlock()
	}
}

// send injects one collective message.
func (e *collEngine) send(s *collSend) error {
	op := s.op
	h := conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: uint8(hColl), NArgs: collNArgs}
	id := op.ts.id
	if op.ts.perMember {
		id = memberID(op.ts.base, s.rank)
	}
	h.Args[0], h.Args[1] = int32(uint32(id)), int32(uint32(id>>32))
	h.Args[2] = int32(op.seq)
	h.Args[3] = int32(uint32(op.kind)<<8 | uint32(s.slot))
	h.Args[4], h.Args[5] = int32(s.off), int32(s.total)
	h.Args[6] = int32(op.me)
	h.Args[7], h.Args[8] = op.id, int32(op.bflags)
	return e.c.cd.Send(s.to, h, s.payload, 0)
}

// queue adds the message(s) carrying data[off:off+n] of a slot of total bytes
// to team rank r, in pieces the conduit can carry as one Medium.
func (e *collEngine) queue(op *collOp, r, slot int, data []byte, off, total int) {
	to := op.ts.tm.jobrank(Rank(r))
	piece := e.c.cd.Limits(to).MaxMedium
	if len(data) == 0 {
		e.sends = append(e.sends, collSend{op: op, to: to, rank: r, slot: slot, off: off, total: total})
		return
	}
	for len(data) > 0 {
		k := min(piece, len(data))
		e.sends = append(e.sends, collSend{op: op, to: to, rank: r, slot: slot, off: off, total: total, payload: data[:k]})
		data, off = data[k:], off+k
	}
}

// finish completes an operation whose sends are out (under mu): the result is
// copied to dst where it was staged, the event is signalled, and the
// operation's state is recycled.
func (e *collEngine) finish(op *collOp) {
	ts := op.ts
	delete(ts.ops, op.seq)
	ts.active--
	if p := op.parent; p != nil {
		p.id, p.bflags = op.id, op.bflags // read once the event completed
	}
	ev, err := op.ev, op.err
	e.release(op)
	ev.done(err)
}

// advance runs op's algorithm as far as the arrivals allow, queueing the
// messages it must send; it reports whether op is complete once they are out
// (under mu).
func (op *collOp) advance(e *collEngine) bool {
	if op.err != nil {
		return true
	}
	switch op.kind {
	case kindBarrier:
		return op.advanceBarrier(e)
	case kindBcast:
		return op.advanceBcast(e, op.root)
	case kindGather:
		return op.advanceGather(e)
	case kindReduceOne, kindReduceAll:
		return op.advanceReduce(e)
	}
	return true
}

// advanceBarrier is a dissemination barrier (Hensgen, Finkel and Manber): in
// round k rank i signals rank (i+2^k) mod N and waits for the signal of rank
// (i-2^k) mod N. After ceil(log2 N) rounds every rank has heard, directly or
// transitively, from every other. Messages per call: ceil(log2 N) per rank,
// N*ceil(log2 N) in all, none of them with payload. The barrier id and flags
// are merged along the way (GASNet-1 named barrier rules): a named barrier
// whose id differs from one it hears of is a mismatch.
func (op *collOp) advanceBarrier(e *collEngine) bool {
	for 1<<op.step < op.n {
		if !op.sent {
			op.sent = true
			e.queue(op, (op.me+1<<op.step)%op.n, op.step+1, nil, 0, 0)
		}
		s := &op.slots[op.step+1]
		if !s.arrived {
			return false
		}
		op.mergeBarrier(s.id, s.bflags)
		op.step++
		op.sent = false
	}
	if op.bflags&barrierMismatch != 0 {
		op.fail(&Error{Op: "Barrier", Code: ErrCodeBarrierMism, Msg: "barrier mismatch: ranks passed different ids to a named barrier, or a rank passed GASNET_BARRIERFLAG_MISMATCH"})
	}
	return true
}

func (op *collOp) mergeBarrier(id int32, fl uint32) {
	switch {
	case fl&barrierMismatch != 0:
		op.bflags |= barrierMismatch
	case fl&barrierAnonymous != 0:
	case op.bflags&barrierAnonymous != 0:
		op.id, op.bflags = id, op.bflags&^barrierAnonymous
	case op.id != id:
		op.bflags |= barrierMismatch
	}
}

// children of relative rank v in a binomial tree of n nodes, largest subtree
// first: v+2^k for every 2^k below the lowest set bit of v (any 2^k for v=0)
// with v+2^k < n.
func binomialTop(v, n int) int {
	top := 1
	if v == 0 {
		for top < n {
			top <<= 1
		}
		return top >> 1
	}
	return (v & -v) >> 1
}

// advanceBcast is a binomial-tree broadcast from root, pipelined: the root
// sends its data in pieces of at most one Medium payload and every node
// forwards each piece to its children as it arrives (largest subtree first),
// so a large broadcast streams down all levels at once. Messages per call:
// N-1 times ceil(nbytes/piece); tree depth ceil(log2 N).
func (op *collOp) advanceBcast(e *collEngine, root int) bool {
	n := op.n
	v := (op.me - root + n) % n
	if op.viaMap {
		return op.advanceDirectRoot(e)
	}
	if d := &op.slots[slotDirect]; d.arrived && op.kind == kindBcast {
		return op.copyDirect(e, d.segOff)
	}
	s := &op.slots[0]
	for _, sp := range op.spans {
		data := s.buf[sp.off : sp.off+sp.n]
		for k := binomialTop(v, n); k > 0; k >>= 1 {
			if v+k < n {
				e.queue(op, (v+k+root)%n, 0, data, sp.off, op.nbytes)
			}
		}
	}
	op.spans = op.spans[:0]
	if v != 0 && s.got < op.nbytes {
		return false
	}
	if s.pooled && v != 0 {
		copyMapped(op.dst[:op.nbytes], s.buf)
	}
	return true
}

// The direct broadcast (inside a neighbourhood): when every member's process
// maps the root's segment and the root's src lies in it, the root sends each
// member a notice naming the data's offset in its segment; each member copies
// the bytes straight from the mapping into its dst (one copy, all members at
// once) and acknowledges, and the root completes when every member has (src
// must stay valid until then). Messages: 2(N-1), none with payload; depth 1.
// Used from directMin bytes up, for teams of at most maxSlots-2 members.
const (
	slotDirect = 1 // the root's notice
	slotAck    = 2 // + relative rank - 1: a member's acknowledgement
	directMin  = 16 << 10
)

// useDirect reports whether a broadcast of src from this rank (the root)
// can go through the mapping, and the offset of src in the segment.
func (op *collOp) useDirect(c *Client, src []byte) (int, bool) {
	if op.nbytes < directMin || op.n > maxSlots-slotAck+1 {
		return 0, false
	}
	var off int
	if !op.segOffset(c, src, &off) {
		return 0, false
	}
	my := c.topo.Nbrhd[c.rank]
	for r := 0; r < op.n; r++ {
		if c.topo.Nbrhd[op.ts.tm.jobrank(Rank(r))] != my {
			return 0, false
		}
	}
	return off, true
}

// segOffset reports whether src lies in this rank's primordial segment
// (within the 31-bit offsets the messages carry) and sets *off to its
// offset.
func (op *collOp) segOffset(c *Client, src []byte, off *int) bool {
	if op.ts.tm.epPath {
		return false // the mapping path knows primordial segments only
	}
	seg := c.ep.seg.Load()
	if seg == nil {
		return false
	}
	base, p := addrOf(seg.mem), addrOf(src)
	if p < base || p-base+uintptr(op.nbytes) > uintptr(len(seg.mem)) || p-base > 1<<31-1 {
		return false
	}
	*off = int(p - base)
	return true
}

// advanceDirectRoot: the root sends the notices at once and waits for
// every acknowledgement.
func (op *collOp) advanceDirectRoot(e *collEngine) bool {
	n := op.n
	if !op.sent {
		op.sent = true
		for v := 1; v < n; v++ {
			e.queue(op, (op.root+v)%n, slotDirect, nil, op.slots[slotDirect].segOff, 0)
		}
	}
	for v := 1; v < n; v++ {
		if !op.slots[slotAck+v-1].arrived {
			return false
		}
	}
	return true
}

// copyDirect: a member copies the broadcast from the root's mapped segment
// and acknowledges.
func (op *collOp) copyDirect(e *collEngine, off int) bool {
	if op.sent {
		return true
	}
	op.sent = true
	rootJob := op.ts.tm.jobrank(Rank(op.root))
	seg := e.c.cd.Segment(rootJob)
	if seg.Local == nil || off < 0 || uint64(off) > seg.Size || uint64(op.nbytes) > seg.Size-uint64(off) {
		op.fail(badArg("BroadcastNB", "rank %d named bytes [%d, +%d) of its segment for a direct broadcast, which this rank cannot read (segment of %d bytes, mapped: %v)", op.root, off, op.nbytes, seg.Size, seg.Local != nil))
		return true
	}
	copyMapped(op.dst[:op.nbytes], seg.Local[off:off+op.nbytes])
	v := (op.me - op.root + op.n) % op.n
	e.queue(op, op.root, slotAck+v-1, nil, 0, 0)
	return true
}

// advanceGather: every rank but 0 sends its nbytes to rank 0, where they land
// at offset rank*nbytes (N-1 messages; used to build teams).
func (op *collOp) advanceGather(e *collEngine) bool {
	if op.me != 0 {
		if !op.sent {
			op.sent = true
			e.queue(op, 0, 0, op.src[:op.nbytes], op.me*op.nbytes, op.n*op.nbytes)
		}
		return true
	}
	s := &op.slots[0]
	if s.got < (op.n-1)*op.nbytes {
		return false
	}
	if s.pooled {
		for r := 1; r < op.n; r++ {
			copy(op.dst[r*op.nbytes:(r+1)*op.nbytes], s.buf[r*op.nbytes:])
		}
	}
	copyMapped(op.dst[:op.nbytes], op.src[:op.nbytes])
	return true
}

// advanceReduce is a binomial-tree reduction over the team ranks in order,
// rooted at rank 0: rank v's subtree is the rank range [v, v+lowbit(v)), and v
// folds the results of its children v+1, v+2, v+4, ... into its own value from
// the left, in that order. Every result is therefore the rank-ordered fold
// src[0] (+) src[1] (+) ... (+) src[N-1] with one fixed bracketing - what a
// non-commutative (USER_NC) operator needs, and the same bits on every run
// with the same inputs. Messages: N-1 contributions up the tree, plus for
// ReduceToOne with root != 0 one message from rank 0 to the root, or for
// ReduceToAll the broadcast of the result from rank 0 (N-1 more). Depth
// ceil(log2 N) (twice that for ReduceToAll).
func (op *collOp) advanceReduce(e *collEngine) bool {
	if op.kind == kindReduceAll && op.n&(op.n-1) == 0 && (op.n == 2 || op.nbytes <= doublingMax) {
		return op.advanceDoubling(e)
	}
	if op.phase == 1 {
		return op.advanceBcast(e, 0)
	}
	for op.step < op.nchild {
		s := &op.slots[1+op.step]
		if !s.arrived || s.got < op.nbytes {
			return false
		}
		op.combine(op.acc, s.buf) // s.buf = acc (+) child
		op.acc, s.buf = s.buf, op.acc
		op.step++
	}
	if op.me != 0 {
		if !op.sent {
			op.sent = true
			low := op.me & -op.me
			e.queue(op, op.me-low, 1+bits.TrailingZeros(uint(low)), op.acc, 0, op.nbytes)
		}
		if op.kind == kindReduceOne && op.me == op.root {
			return op.awaitResult()
		}
		if op.kind == kindReduceAll {
			op.phase = 1
			return op.advanceBcast(e, 0)
		}
		return true
	}
	// Rank 0 holds the result.
	switch {
	case op.kind == kindReduceAll:
		copyMapped(op.dst[:op.nbytes], op.acc)
		op.slots[0].buf = op.dst[:op.nbytes]
		op.spans = append(op.spans[:0], collSpan{0, op.nbytes})
		op.phase = 1
		return op.advanceBcast(e, 0)
	case op.root == 0:
		copyMapped(op.dst[:op.nbytes], op.acc)
	default:
		if !op.forward {
			op.forward = true
			e.queue(op, op.root, 0, op.acc, 0, op.nbytes)
		}
	}
	return true
}

// doublingMax is the largest ReduceToAll done by recursive doubling: above
// it every member sending the full vector in every step costs more than the
// tree's pipelined broadcast of the result (1 MiB over 4 ranks: 4.0 ms by
// doubling, measured against the tree below).
const doublingMax = 64 << 10

// advanceDoubling is ReduceToAll by recursive doubling, for teams of a power
// of two (and, beyond two members, vectors up to doublingMax): in step k rank i exchanges its partial result with rank i XOR 2^k,
// and both fold the two in rank order (the lower block on the left), so after
// log2 N steps every rank holds src[0] (+) ... (+) src[N-1] with the same
// bracketing - the same bits everywhere. Messages: log2 N per rank, N log2 N in
// all, each of the full nbytes; depth log2 N (half the tree's 2 log2 N).
func (op *collOp) advanceDoubling(e *collEngine) bool {
	for 1<<op.step < op.n {
		k := op.step
		partner := op.me ^ 1<<k
		if !op.sent {
			op.sent = true
			e.queue(op, partner, 1+k, op.acc, 0, op.nbytes)
			op.again = true // acc must not change before the message is out
			return false
		}
		s := &op.slots[1+k]
		if !s.arrived || s.got < op.nbytes {
			return false
		}
		if partner < op.me {
			op.combine(s.buf, op.acc) // acc = partner's (+) acc
		} else {
			op.combine(op.acc, s.buf) // s.buf = acc (+) partner's
			op.acc, s.buf = s.buf, op.acc
		}
		op.step++
		op.sent = false
	}
	copyMapped(op.dst[:op.nbytes], op.acc)
	return true
}

// awaitResult: the ReduceToOne root (not rank 0) waits for rank 0's result.
func (op *collOp) awaitResult() bool {
	s := &op.slots[0]
	if s.got < op.nbytes || !s.arrived {
		return false
	}
	if s.pooled {
		copyMapped(op.dst[:op.nbytes], s.buf)
	}
	return true
}

// reduceChildren is the number of tree children of rank v among n.
func reduceChildren(v, n int) int {
	c := 0
	for k := 1; (v == 0 || k < v&-v) && v+k < n; k <<= 1 {
		c++
	}
	return c
}

// combine computes right = left (+) right element-wise.
func (op *collOp) combine(left, right []byte) {
	if op.op == OPUser || op.op == OPUserNC {
		op.fn(left, right, op.nbytes/op.dtSize, op.cdata)
		return
	}
	reduceBuiltin(op.dt, op.op, left, right)
}
