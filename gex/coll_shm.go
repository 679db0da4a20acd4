package gex

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/internal/conduit/smp"
	"github.com/gexgo/gexgo/internal/memcopy"
	"github.com/gexgo/gexgo/internal/shm"
)

// Collectives through shared memory (GASNet-EX "Collectives (Coll)";
// docs/coll.md, "Shared memory").
//
// Every rank of an smp (or tcp) job owns a collective area that its
// neighbourhood maps (internal/conduit/smp, coll.go). gex lays it out:
//
//	offSlots   collSlots team lines of 64 bytes, one per team this rank is
//	           in that uses the area (line 0: the primordial team)
//	offRing    the broadcast ring of this rank as a root: a header line
//	           (owner tag, fill word, size), ringSlots counter lines, then
//	           ringSlots chunks of ringChunk bytes
//	offSmall   for the first smallLines team lines: the reductions'
//	           contributions (coll_shm_small.go)
//
// A team line (written only by its owner, read by the team's members):
//
//	+0   team id (0: free); the owner clears it before it reuses the line
//	+8   arrive: (seq+1)<<8 | kind of the last collective the owner started here
//	+16  release: seq+1 of the last hierarchical barrier its group leader
//	     released; on flat teams the count of small operations the owner
//	     completed (coll_shm_small.go)
//	+24  named-barrier record, parity 0: (seq+1)<<32 | flags, then id at +32
//	+40  the same, parity 1 (+40, +48)
//	+56  merged: the leader's merged flags<<32 | id for its group
//
// Counters and flags are monotonic (sequence numbers of the team's
// collectives, never reset while the team lives), so no barrier needs a
// reset phase: a peer has arrived at collective seq once its arrive word
// holds seq+1 or later (serial-number order). A peer whose line no longer
// holds the team id has destroyed the team, which it does only once every
// collective of the team is complete on it: it counts as arrived.
//
// Which teams: the primordial team (line 0 everywhere), and teams made by
// Split, whose members exchange their line numbers in Split's records.
// Every member takes the same decision from the same data (the topology and
// the exchanged lines), so no member uses the area while another uses AMs.
// A team entirely inside one neighbourhood is flat; a team over several
// neighbourhoods, each member with a line, is hierarchical: a shared-memory
// phase inside each neighbourhood, the AM dissemination barrier among one
// leader per neighbourhood (the lowest team rank), and a shared-memory
// release; its broadcasts and small reductions likewise (coll_shm_hier.go).
// Teams made by Create or Dup, and teams over non-primordial endpoints,
// keep the AM algorithms.

const (
	offSlots   = smp.CollAreaHeader
	collSlots  = 64
	lineBytes  = 64
	offRing    = offSlots + collSlots*lineBytes
	ringSlots  = 4
	ringChunk  = 64 << 10
	offRingBuf = offRing + (1+ringSlots)*lineBytes
	offSmall   = offRingBuf + ringSlots*ringChunk
	collEnd    = offSmall + smallLines*smallStride

	lineID      = 0
	lineArrive  = 8
	lineRelease = 16
	lineIDF     = 24 // + 16*parity: word0, then id at +8
	lineMerged  = 56

	ringTag    = 0
	ringFill   = 8
	ringSize   = 16
	fillDirect = 1 << 63 // fill word of a broadcast from the root's segment: | offset
	claiming   = 1 << 63 // tag of a ring its root is setting up: | tag

	// shmBcastMin is the smallest broadcast that goes through the ring
	// (smaller ones stay on AMs, which carry them inline in one message).
	shmBcastMin = 16 << 10
)

// lineView is the atomic words of one member's team line.
type lineView struct {
	id, arrive, release, merged *atomic.Uint64
	idf                         [2][2]*atomic.Uint64
}

func lineAt(area []byte, slot int) lineView {
	o := offSlots + slot*lineBytes
	v := lineView{id: shm.Uint64At(area, o+lineID), arrive: shm.Uint64At(area, o+lineArrive),
		release: shm.Uint64At(area, o+lineRelease), merged: shm.Uint64At(area, o+lineMerged)}
	for p := 0; p < 2; p++ {
		v.idf[p][0] = shm.Uint64At(area, o+lineIDF+16*p)
		v.idf[p][1] = shm.Uint64At(area, o+lineIDF+16*p+8)
	}
	return v
}

// ringView is a root's broadcast ring.
type ringView struct {
	tag, fill, size *atomic.Uint64
	done            [ringSlots]*atomic.Uint64
	buf             []byte
}

func ringAt(area []byte) ringView {
	v := ringView{tag: shm.Uint64At(area, offRing+ringTag), fill: shm.Uint64At(area, offRing+ringFill),
		size: shm.Uint64At(area, offRing+ringSize), buf: area[offRingBuf:offSmall:offSmall]}
	for i := range v.done {
		v.done[i] = shm.Uint64At(area, offRing+(1+i)*lineBytes)
	}
	return v
}

// collAreas is what a conduit with collective areas offers (smp, tcp).
type collAreas interface {
	CollArea(p int) []byte
	WakeColl(p int)
	SleepUntil(cond func() bool, timeout time.Duration)
}

// shmTeam is a team's shared-memory state (nil in teamState: AMs only).
type shmTeam struct {
	id     uint64
	mine   int        // my line
	slots  []int      // by team rank: the member's line
	lines  []lineView // by team rank; zero for members outside my neighbourhood
	jobs   []int      // job ranks by team rank
	local  []int      // team ranks of my neighbourhood, ascending (the group)
	rings  []ringView // by team rank (flat teams): the members' rings
	hier   bool
	leader int // team rank of my group's leader (local[0])
	// leaders is the team of the group leaders (on leaders of a
	// hierarchical team only).
	leaders *TM
	// small is the contribution parts by team rank (those of my
	// neighbourhood; nil unless every member's line has one), nsmall the
	// number of small operations initiated (under the engine's mu)
	// (coll_shm_small.go).
	small  []smallView
	nsmall uint32
	// Hierarchical teams (coll_shm_hier.go): group is the neighbourhood
	// index of each team rank (in order of first appearance), glead the
	// leader of each group, contig whether every group is a contiguous
	// block of team ranks, bteams the broadcast teams by root (built on
	// first use).
	group  []int
	glead  []int
	contig bool
	bteams []*TM
	nhier  int // hierarchical broadcasts and reductions initiated (under mu)
}

// shmState is the engine's part: the pending shared-memory operations.
type shmState struct {
	areas collAreas
	slots [collSlots]bool // my lines in use
	free  []*collOp       // recycled operations (under the engine's mu)
	mu    sync.Mutex      // guards q
	q     []*collOp       // pending, in initiation order
	n     atomic.Int32    // len(q)
	ready func() bool     // for SleepUntil (built once: no allocation per sleep)
	// The spin window of the oldest pending operation (shmSpinning).
	spinOp   *collOp
	spinSeq  uint32
	spinFrom time.Time
}

// initShm connects the engine to the conduit's collective areas and gives
// the primordial team line 0 (before ClientInit's barrier, so that no peer
// reads the line before it holds the team id).
func (e *collEngine) initShm() {
	a, ok := e.c.cd.(collAreas)
	if !ok || a.CollArea(e.c.rank) == nil || len(a.CollArea(e.c.rank)) < collEnd {
		return
	}
	e.shm.areas = a
	e.shm.ready = e.shmReady
	lineAt(a.CollArea(e.c.rank), 0).id.Store(primordialTeamID)
	e.shm.slots[0] = true
	slots := make([]int, e.c.size)
	e.c.tm.ts.shm = e.newShmTeam(e.c.tm, primordialTeamID, slots)
}

// claimLine takes a free line of this rank's area for team id, cleared, or
// returns -1.
func (e *collEngine) claimLine(id uint64) int {
	if e.shm.areas == nil {
		return -1
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := 1; s < collSlots; s++ {
		if !e.shm.slots[s] {
			e.shm.slots[s] = true
			v := lineAt(e.shm.areas.CollArea(e.c.rank), s)
			v.id.Store(0)
			v.arrive.Store(0)
			v.release.Store(0)
			v.merged.Store(0)
			for p := range v.idf {
				v.idf[p][0].Store(0)
				v.idf[p][1].Store(0)
			}
			v.id.Store(id)
			return s
		}
	}
	return -1
}

// freeLine gives a line back (its id cleared first: a peer still reading
// it sees the team gone).
func (e *collEngine) freeLine(s int) {
	if s <= 0 || e.shm.areas == nil {
		return
	}
	lineAt(e.shm.areas.CollArea(e.c.rank), s).id.Store(0)
	e.mu.Lock()
	e.shm.slots[s] = false
	e.mu.Unlock()
}

// newShmTeam builds the shared-memory state of tm (id: the id the lines
// hold) from every member's line number, or returns nil when the team must
// keep the AM algorithms: a member without a line (-1), a member of my
// neighbourhood whose area is not mapped, or every neighbourhood holding
// one member only (nothing to share).
func (e *collEngine) newShmTeam(tm *TM, id uint64, slots []int) *shmTeam {
	a := e.shm.areas
	n := int(tm.size)
	if a == nil || n < 2 || tm.epPath || len(slots) != n {
		return nil
	}
	st := &shmTeam{id: id, slots: slots, lines: make([]lineView, n), jobs: make([]int, n), rings: make([]ringView, n)}
	topo := e.c.topo
	my := topo.Nbrhd[e.c.rank]
	groups := map[int]int{}
	for r := 0; r < n; r++ {
		if slots[r] < 0 {
			return nil
		}
		j := tm.jobrank(Rank(r))
		st.jobs[r] = j
		groups[topo.Nbrhd[j]]++
		if topo.Nbrhd[j] != my {
			continue
		}
		area := a.CollArea(j)
		if len(area) < collEnd || slots[r] >= collSlots {
			return nil
		}
		st.lines[r] = lineAt(area, slots[r])
		st.rings[r] = ringAt(area)
		st.local = append(st.local, r)
		if j == e.c.rank {
			st.mine = slots[r]
		}
	}
	if len(groups) == n {
		return nil
	}
	st.hier = len(groups) > 1
	st.groupTeam(topo.Nbrhd)
	// Contribution parts: every member's line among the first smallLines
	// (the same decision on every member).
	st.small = make([]smallView, n)
	for r := 0; r < n; r++ {
		if slots[r] >= smallLines {
			st.small = nil
			break
		}
		if st.lines[r].id != nil {
			st.small[r] = smallAt(a.CollArea(st.jobs[r]), slots[r], st.hier)
		}
	}
	st.leader = st.local[0]
	if st.hier {
		st.bteams = make([]*TM, n)
		if st.leader == int(tm.rank) {
			// The leaders: the lowest team rank of every neighbourhood.
			leaders := make([]Rank, len(st.glead))
			for g, r := range st.glead {
				leaders[g] = Rank(st.jobs[r])
			}
			st.leaders = e.subTeam(tm, deriveID(tm.id, 0, 'L', leaders, 0), Rank(st.group[int(tm.rank)]), leaders)
		}
	}
	return st
}

// dropShmTeam releases ts's shared-memory state (Destroy, under mu).
func (e *collEngine) dropShmTeam(ts *teamState) {
	st := ts.shm
	if st == nil {
		return
	}
	ts.shm = nil
	if st.leaders != nil {
		delete(e.teams, st.leaders.ts.id)
	}
	for _, bt := range st.bteams {
		if bt != nil {
			delete(e.teams, bt.ts.id)
		}
	}
	if st.mine > 0 {
		lineAt(e.shm.areas.CollArea(e.c.rank), st.mine).id.Store(0)
		e.shm.slots[st.mine] = false
	}
}

// startShm registers the local call of a shared-memory collective on tm
// (under mu): it consumes the team's next sequence number like start.
func (e *collEngine) startShm(tm *TM, kind collKind) *collOp {
	ts := tm.ts
	var op *collOp
	if n := len(e.shm.free); n > 0 {
		op = e.shm.free[n-1]
		e.shm.free = e.shm.free[:n-1]
	} else {
		op = &collOp{}
	}
	op.ts, op.seq, op.kind, op.shm = ts, ts.next, kind, true
	ts.next++
	op.me, op.n = int(tm.rank), int(tm.size)
	ts.active++
	return op
}

// launchShm completes initiation (mu held, released here): the operation
// gets its event, publishes what it can, and joins the pending list.
func (e *collEngine) launchShm(op *collOp) Event {
	// Announce the call first (the peers may be waiting for it), whoever
	// advances the operation later.
	st := op.ts.shm
	if op.small {
		op.writeSmall(st) // the initiation waited until its buffer is free
	}
	op.publish(st)
	op.step = 1
	op.ev = e.c.newEvent(1)
	op.ev.what, op.ev.coll = op.kind.String(), op
	h := op.ev.handle()
	op.initiated = true
	e.mu.Unlock()
	if st.hier && op.me != st.leader {
		e.shm.areas.WakeColl(st.jobs[st.leader])
	} else {
		st.wakeGroup(e, op.me)
	}
	s := &e.shm
	s.mu.Lock()
	s.q = append(s.q, op)
	e.advanceLocked()
	return h
}

// barrierNow completes an anonymous barrier of a flat team at initiation
// (mu held; released here if it did): with nothing else of the team in
// flight, it publishes the arrive word and reads the peers'; if every
// member has arrived at this barrier with no named-barrier record, the
// barrier is complete and BarrierNB returns EventInvalid (GASNet-EX
// "Events": GEX_EVENT_INVALID is the "result for already-completed
// operation"); no event, list entry or pass of this rank's engine is needed. Otherwise the operation goes on
// through launchShm (which publishes the same word again).
func (e *collEngine) barrierNow(op *collOp) bool {
	st := op.ts.shm
	if st.hier || op.ts.active != 1 || op.bflags != barrierAnonymous {
		return false
	}
	op.publish(st)
	p := op.seq & 1
	for _, r := range st.local {
		if r == op.me {
			continue
		}
		ok, k := st.arrived(r, op.seq)
		if !ok || (k != 0 && k != op.kind) {
			return false
		}
		if uint32(st.lines[r].idf[p][0].Load()>>32) == op.seq+1 {
			return false // a named record: the engine merges it
		}
	}
	me := op.me
	op.ts.active--
	e.releaseShm(op)
	e.mu.Unlock()
	st.wakeGroup(e, me)
	return true
}

// advanceShm runs the pending shared-memory operations as far as their
// peers allow and completes those that are done. One goroutine at a time;
// others return at once. Not in handler context (a hierarchical leader
// sends AMs).
func (e *collEngine) advanceShm() {
	if e.shm.mu.TryLock() {
		e.advanceLocked()
	}
}

// advanceLocked is advanceShm with shm.mu held; it unlocks.
func (e *collEngine) advanceLocked() {
	s := &e.shm
	for i := 0; i < len(s.q); {
		op := s.q[i]
		if !op.advanceShm(e) {
			i++
			continue
		}
		copy(s.q[i:], s.q[i+1:])
		s.q[len(s.q)-1] = nil
		s.q = s.q[:len(s.q)-1]
		e.mu.Lock()
		op.ts.active--
		ev, err := op.ev, op.err
		e.releaseShm(op)
		e.mu.Unlock()
		ev.done(err)
	}
	s.n.Store(int32(len(s.q)))
	s.mu.Unlock()
}

// releaseShm recycles a shared-memory operation (under mu). It resets the
// fields these operations use - not the whole collOp, whose AM stream
// slots they never touch - and keeps it on its own free list.
func (e *collEngine) releaseShm(op *collOp) {
	op.ts, op.ev, op.err, op.sub, op.subEv = nil, nil, nil, nil, Event{}
	op.dst, op.src, op.dt, op.fn, op.cdata = nil, nil, 0, nil, nil
	op.step, op.viaMap, op.id, op.bflags, op.slots[slotDirect].segOff = 0, false, 0, 0, 0
	op.root, op.nbytes, op.me, op.n, op.small, op.ord = 0, 0, 0, 0, false, 0
	op.hnet, op.hring = false, false
	if op.acc != nil {
		e.putBuf(op.acc)
		op.acc = nil
	}
	if s := &op.slots[0]; s.pooled {
		e.putBuf(s.buf)
		s.buf, s.pooled = nil, false
	}
	if len(e.shm.free) < 64 {
		e.shm.free = append(e.shm.free, op)
	}
}

// shmReady reports whether a pending shared-memory operation may advance
// (the sleeping wait's condition): it looks without changing anything.
func (e *collEngine) shmReady() bool {
	s := &e.shm
	if !s.mu.TryLock() {
		return true
	}
	defer s.mu.Unlock()
	for _, op := range s.q {
		if op.canAdvanceShm(e) {
			return true
		}
	}
	return false
}

// spinShmIters bounds spinShm: about a microsecond of checking flags.
const spinShmIters = 64

// spinShm is the start of a wait for s while shared-memory collectives are
// pending: it advances them in a tight loop (no AM polling, no sleeping)
// for a short while, since a peer that is running typically arrives within
// a cache-line transfer; it reports whether s completed. A polite rank
// (more ranks than CPUs) does not spin: its peers need the CPU.
func (e *collEngine) spinShm(s *eventState) bool {
	if e.shm.n.Load() == 0 || e.c.polite || e.c.checkRestricted("Event.Wait") != nil {
		return false // (Wait refuses restricted context: blockUntilEv says so)
	}
	for i := 0; i < spinShmIters; i++ {
		e.advanceShm()
		if s.complete() {
			return true
		}
	}
	return false
}

// sleep is the blocking waits' sleep, unless cond already holds (the
// progress just before may have completed a shared-memory operation): with
// shared-memory operations pending it also ends when one of them may
// advance (their peers wake this rank after changing a flag).
func (c *Client) sleep(cond func() bool) {
	if cond() {
		return
	}
	if e := &c.coll; e.shm.n.Load() != 0 {
		if !c.polite && e.shmSpinning() {
			sysYield() // to other processes too: the peer may need this CPU
			return
		}
		e.shm.areas.SleepUntil(e.shm.ready, sleepCap)
		return
	}
	c.cd.Sleep(sleepCap)
}

// shmSpinWindow is how long a wait for a shared-memory collective keeps
// yielding before it sleeps, when ranks do not outnumber CPUs: its peers
// are typically copying (a broadcast) or about to arrive, and a futex
// wake-up costs tens of microseconds on a loaded machine - more than the
// spin-block mode's count of empty polls lasts at the few nanoseconds a
// flag check takes.
const shmSpinWindow = time.Millisecond

// shmSpinning reports whether the oldest pending shared-memory operation
// has been waited on for less than shmSpinWindow (the clock starts at the
// first call for that operation).
func (e *collEngine) shmSpinning() bool {
	s := &e.shm
	if !s.mu.TryLock() {
		return true
	}
	defer s.mu.Unlock()
	if len(s.q) == 0 {
		return false
	}
	if op := s.q[0]; op != s.spinOp || op.seq != s.spinSeq {
		s.spinOp, s.spinSeq, s.spinFrom = op, op.seq, time.Now()
		return true
	}
	return time.Since(s.spinFrom) < shmSpinWindow
}

// wakeGroup wakes the members of my neighbourhood in the team (their
// waits may sleep on the flag just written).
func (st *shmTeam) wakeGroup(e *collEngine, me int) {
	for _, r := range st.local {
		if r != me {
			e.shm.areas.WakeColl(st.jobs[r])
		}
	}
}

// arrived reports whether member r has started the collective seq (or
// left the team, which implies it), and the kind it started if that was
// seq itself (0 otherwise).
func (st *shmTeam) arrived(r int, seq uint32) (bool, collKind) {
	v := st.lines[r]
	w := v.arrive.Load()
	s := uint32(w >> 8)
	if int32(s-(seq+1)) >= 0 {
		if s == seq+1 {
			return true, collKind(w & 0xff)
		}
		return true, 0
	}
	return v.id.Load() != st.id, 0
}

// publish announces this rank's start of op in its line (a named barrier
// writes its record first).
func (op *collOp) publish(st *shmTeam) {
	v := st.lines[op.me]
	if op.kind == kindBarrier && (op.bflags&barrierAnonymous == 0 || op.bflags&barrierMismatch != 0) {
		p := op.seq & 1
		v.idf[p][1].Store(uint64(uint32(op.id)))
		v.idf[p][0].Store(uint64(op.seq+1)<<32 | uint64(op.bflags))
	}
	v.arrive.Store(uint64(op.seq+1)<<8 | uint64(op.kind))
}

// mergeFrom merges member r's named-barrier record for op into op.
func (op *collOp) mergeFrom(st *shmTeam, r int) {
	v := st.lines[r]
	p := op.seq & 1
	w := v.idf[p][0].Load()
	if uint32(w>>32) == op.seq+1 {
		op.mergeBarrier(int32(uint32(v.idf[p][1].Load())), uint32(w))
	}
}

// outOfOrder fails op: member r started another kind of collective as the
// same call of the team.
func (op *collOp) outOfOrder(st *shmTeam, r int, k collKind) {
	op.fail(badArg("Coll", "collective calls out of order: rank %d is in %v where this rank called %v (collective #%d of the team)", r, k, op.kind, op.seq))
}

// advanceShm runs op; it reports completion.
func (op *collOp) advanceShm(e *collEngine) bool {
	st := op.ts.shm
	if op.small {
		return op.advanceSmall(e, st)
	}
	if op.kind == kindBcast {
		return op.advanceShmBcast(e, st)
	}
	if st.hier {
		return op.advanceHier(e, st)
	}
	if !op.gatherLocal(st) {
		return false
	}
	op.barrierResult()
	return true
}

// gatherLocal reports whether every member of my neighbourhood (every
// member, on a flat team) has arrived at op, and then merges their
// named-barrier records into op.
func (op *collOp) gatherLocal(st *shmTeam) bool {
	for _, r := range st.local {
		if r == op.me {
			continue
		}
		ok, k := st.arrived(r, op.seq)
		if !ok {
			return false
		}
		if k != 0 && k != op.kind {
			op.outOfOrder(st, r, k)
		}
	}
	for _, r := range st.local {
		if r != op.me {
			op.mergeFrom(st, r)
		}
	}
	return true
}

// barrierResult fails a barrier whose merged flags say mismatch.
func (op *collOp) barrierResult() {
	if op.bflags&barrierMismatch != 0 {
		op.fail(&Error{Op: "Barrier", Code: ErrCodeBarrierMism, Msg: "barrier mismatch: ranks passed different ids to a named barrier, or a rank passed GASNET_BARRIERFLAG_MISMATCH"})
	}
}

// canAdvanceShm reports, without side effects, whether op would advance.
func (op *collOp) canAdvanceShm(e *collEngine) bool {
	st := op.ts.shm
	if op.sub != nil && op.kind != kindBcast {
		return op.subEv.s.complete()
	}
	switch {
	case op.small && st.hier:
		return op.hierSmallReady(e, st)
	case op.small:
		return op.smallReady(st)
	case op.kind == kindBcast:
		return op.bcastReady(e, st)
	case st.hier && op.me != st.leader:
		return st.released(op.seq)
	}
	for _, r := range st.local {
		if ok, _ := st.arrived(r, op.seq); !ok {
			return false
		}
	}
	return true
}

// released reports whether my group's leader released barrier seq.
func (st *shmTeam) released(seq uint32) bool {
	v := st.lines[st.leader]
	return int32(uint32(v.release.Load())-(seq+1)) >= 0 || v.id.Load() != st.id
}

// advanceHier is the hierarchical barrier: the members of a neighbourhood
// announce themselves in their lines; their leader waits for them, merges
// their named-barrier records, runs the AM dissemination barrier among the
// leaders carrying the merged id and flags, then writes the result and the
// release in its line, which the members wait for. Messages: H*ceil(log2 H)
// for H neighbourhoods, none inside one.
func (op *collOp) advanceHier(e *collEngine, st *shmTeam) bool {
	if op.me != st.leader {
		if !st.released(op.seq) {
			return false
		}
		w := st.lines[st.leader].merged.Load()
		if st.lines[st.leader].id.Load() == st.id {
			op.id, op.bflags = int32(uint32(w)), uint32(w>>32)
		}
		op.barrierResult()
		return true
	}
	if op.step == 1 {
		if !op.gatherLocal(st) || !e.netTurn(op) {
			return false
		}
		op.step, op.hnet = 2, false
		// The network phase: a barrier of the leaders' team, whose result
		// (merged id and flags, error) lands back in op.
		e.mu.Lock()
		sub, _ := e.start(st.leaders, kindBarrier)
		sub.id, sub.bflags, sub.parent = op.id, op.bflags, op
		op.sub = sub
		ev := e.launch(sub)
		op.subEv = ev
	}
	if !op.subDone(e) {
		return false
	}
	v := st.lines[op.me]
	v.merged.Store(uint64(op.bflags)<<32 | uint64(uint32(op.id)))
	v.release.Store(uint64(op.seq + 1))
	st.wakeGroup(e, op.me)
	if op.err == nil {
		op.barrierResult()
	}
	return true
}

// ringTag names op in its root's ring: the root's line and the sequence
// number (unique among the collectives that use that ring).
func (op *collOp) ringTag(st *shmTeam, dist int) uint64 {
	return uint64(st.slots[dist]+1)<<32 | uint64(op.seq+1)
}

// advanceShmBcast is the broadcast through the root's ring (flat teams).
// The root claims its ring (a broadcast of another team from the same root
// may hold it), and then either names the offset of src in its segment,
// from which every member copies straight into dst while the root makes its
// own copy (one copy each, all at once), or streams src through the ring's chunks: it fills chunk k once
// every member has copied chunk k-ringSlots out of the same buffer, and
// the members copy each chunk as soon as it is filled (the root's copy in
// and the members' copies out overlap). Each member counts its copies in
// the chunk's counter; the root completes, and frees the ring, once every
// member has counted every chunk (src stays in use until then). No
// messages; a member waits on the root's fill word, the root on the
// counters.
func (op *collOp) advanceShmBcast(e *collEngine, st *shmTeam) bool {
	if !st.hier {
		return op.ringBcast(e, st, op.root, uint64(op.n-1))
	}
	return op.advanceHierBcast(e, st)
}

// ringBcast is the broadcast through the ring of dist (the root, or on a
// hierarchical team the member that distributes to its neighbourhood) to
// peers members.
func (op *collOp) ringBcast(e *collEngine, st *shmTeam, dist int, peers uint64) bool {
	rg := st.rings[dist]
	tag := op.ringTag(st, dist)
	nchunks := (op.nbytes + ringChunk - 1) / ringChunk
	if op.me != dist {
		if rg.tag.Load() != tag {
			if ok, k := st.arrived(dist, op.seq); ok && k != 0 && k != op.kind {
				op.outOfOrder(st, dist, k)
				return true
			}
			return false
		}
		fill := rg.fill.Load()
		size := int(rg.size.Load())
		if size != op.nbytes && op.err == nil {
			op.fail(badArg("BroadcastNB", "rank %d broadcasts %d bytes where this rank expects %d: arguments are not single-valued", dist, size, op.nbytes))
		}
		if fill&fillDirect != 0 {
			off := fill &^ fillDirect
			seg := e.c.cd.Segment(st.jobs[dist])
			if op.err == nil {
				if seg.Local == nil || off > seg.Size || uint64(op.nbytes) > seg.Size-off {
					op.fail(badArg("BroadcastNB", "rank %d named bytes [%d, +%d) of its segment, which this rank cannot read (segment of %d bytes)", dist, off, op.nbytes, seg.Size))
				} else {
					copyMapped(op.dst[:op.nbytes], seg.Local[off:off+uint64(op.nbytes)])
				}
			}
			rg.done[0].Add(1)
			e.shm.areas.WakeColl(st.jobs[dist])
			return true
		}
		n := max(size, 0)
		total := (n + ringChunk - 1) / ringChunk
		k := op.step - 1
		for ; k < total && int(fill) > k; k++ {
			lo := k * ringChunk
			hi := min(lo+ringChunk, n)
			if op.err == nil {
				b := k % ringSlots * ringChunk
				copyMapped(op.dst[lo:hi], rg.buf[b:b+hi-lo])
			}
			rg.done[k%ringSlots].Add(1)
		}
		if k > op.step-1 {
			op.step = k + 1
			e.shm.areas.WakeColl(st.jobs[dist])
		}
		return k >= total
	}
	// The root (distributor).
	if op.step == 1 {
		// Claim the ring with a value no member waits for, set it up,
		// then name the operation: members read fill and size only
		// after they see their tag.
		if !rg.tag.CompareAndSwap(0, tag|claiming) {
			return false
		}
		for i := range rg.done {
			rg.done[i].Store(0)
		}
		rg.size.Store(uint64(op.nbytes))
		if op.viaMap {
			rg.fill.Store(fillDirect | uint64(op.slots[slotDirect].segOff))
		} else {
			rg.fill.Store(0)
		}
		rg.tag.Store(tag)
		op.step = 2
		if op.viaMap {
			// The members copy from the segment now; the root's own copy
			// runs at the same time.
			st.wakeGroup(e, op.me)
			if op.dst != nil {
				copyMapped(op.dst, op.src)
			}
			return rg.done[0].Load() >= peers && rg.release()
		}
	}
	if op.viaMap {
		return rg.done[0].Load() >= peers && rg.release()
	}
	k := int(rg.fill.Load())
	filled := k
	for ; k < nchunks; k++ {
		i := k % ringSlots
		if k >= ringSlots {
			if rg.done[i].Load() < peers {
				break
			}
			rg.done[i].Store(0)
		}
		lo := k * ringChunk
		hi := min(lo+ringChunk, op.nbytes)
		memcopy.Copy(rg.buf[i*ringChunk:i*ringChunk+hi-lo], op.src[lo:hi]) // the members copy it out next (internal/memcopy)
		if op.dst != nil {
			copyMapped(op.dst[lo:hi], op.src[lo:hi])
		}
		rg.fill.Store(uint64(k + 1))
	}
	if k > filled {
		st.wakeGroup(e, op.me)
	}
	if k < nchunks {
		return false
	}
	for j := max(0, nchunks-ringSlots); j < nchunks; j++ {
		if rg.done[j%ringSlots].Load() < peers {
			return false
		}
	}
	rg.tag.Store(0)
	return true
}

// release gives the root's ring back once its broadcast is complete; it
// returns true (the broadcast is complete).
func (rg ringView) release() bool {
	rg.tag.Store(0)
	return true
}

// rootReady reports whether a broadcast root would advance: its ring is
// free to claim, or the members counted what it waits for.
func (op *collOp) rootReady(st *shmTeam, dist int, peers uint64) bool {
	rg := st.rings[dist]
	if op.step == 1 {
		return rg.tag.Load() == 0
	}
	if op.viaMap {
		return rg.done[0].Load() >= peers
	}
	nchunks := (op.nbytes + ringChunk - 1) / ringChunk
	k := int(rg.fill.Load())
	if k < nchunks {
		return k < ringSlots || rg.done[k%ringSlots].Load() >= peers
	}
	for j := max(0, nchunks-ringSlots); j < nchunks; j++ {
		if rg.done[j%ringSlots].Load() < peers {
			return false
		}
	}
	return true
}

// useShmBcast reports whether a broadcast of nbytes over tm goes through
// the ring.
func (tm *TM) useShmBcast(nbytes int) bool {
	st := tm.ts.shm
	return st != nil && (!st.hier && nbytes >= shmBcastMin || st.hier && nbytes >= hierBcastMin)
}

// shmWaitingOn is the job rank a shared-memory barrier waits for: the
// first member of my neighbourhood that has not arrived, my leader, or -1.
func (op *collOp) shmWaitingOn() int {
	st := op.ts.shm
	if st == nil || op.kind != kindBarrier {
		return -1
	}
	if st.hier && op.me != st.leader {
		return st.jobs[st.leader]
	}
	for _, r := range st.local {
		if ok, _ := st.arrived(r, op.seq); !ok && r != op.me {
			return st.jobs[r]
		}
	}
	return -1
}
