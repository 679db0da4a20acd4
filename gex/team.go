package gex

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Team construction and destruction (GASNet-EX "Operations on gex_TM_t" and
// the Memory Kinds document's "Teams": gex_TM_Split, gex_TM_Create,
// gex_TM_Dup, gex_TM_Destroy, gex_TM_Pair).
//
// A team's id is a 64-bit hash of its parent's id, the sequence number the
// construction call has among the parent's collective calls, and what tells
// the new teams of one call apart (the color for Split, the member list for
// Create). Every member computes the same id without communicating; a peer's
// collective message may therefore reach a team before this rank has finished
// creating it, and waits there (coll.go).
//
// Scratch space: gexgo's collectives move everything in AMs and keep their
// state in process memory, so the scratch a client grants is validated (it
// must lie in the caller's bound segment), owned by the team until Destroy
// hands it back, and never written. The size queries answer one page, so
// clients that allocate what the query says keep working if a later version
// uses it.

// primordialTeamID is the id of the primordial team.
const primordialTeamID = 1

// ScratchSize is what the scratch-size queries answer (minimum and
// recommended).
const ScratchSize = PageSize

// ColorNone passed as Split's color takes part in the collective call without
// joining any new team (the spec's NULL new_tm_p).
const ColorNone = -1

const (
	splitQuery = FlagTMScratchSizeMin | FlagTMScratchSizeRecommended
	scratchSel = FlagTMSymmetricScratch | FlagTMLocalScratch | FlagTMGlobalScratch | FlagTMNoScratch
)

// deriveID hashes a new team's identity.
func deriveID(parent uint64, seq uint32, tag byte, extra []Rank, color int64) uint64 {
	h := fnv.New64a()
	var b [21]byte
	binary.LittleEndian.PutUint64(b[0:], parent)
	binary.LittleEndian.PutUint32(b[8:], seq)
	b[12] = tag
	binary.LittleEndian.PutUint64(b[13:], uint64(color))
	h.Write(b[:])
	for _, r := range extra {
		binary.LittleEndian.PutUint32(b[:4], uint32(r))
		h.Write(b[:4])
	}
	id := h.Sum64()
	if id <= primordialTeamID {
		id += 2
	}
	return id
}

// teamTM validates tm for a gex_TM_ or gex_Coll_ call: not a TM-pair, not
// destroyed, not in restricted context.
func teamTM(op string, tm *TM) (*Client, error) {
	if tm == nil {
		return nil, badArg(op, "tm is nil")
	}
	c := tm.c
	if err := c.checkRestricted(op); err != nil {
		return nil, err
	}
	switch {
	case tm.pair:
		return nil, c.report(badArg(op, "tm is a TM-pair (TMPair), which is not valid for team operations or collectives"))
	case tm.destroyed.Load():
		return nil, c.report(badArg(op, "tm was destroyed"))
	}
	return c, nil
}

// scratchQuery answers a scratch-size query.
func (c *Client) scratchQuery(op string, flags Flags, joining bool) (uintptr, error) {
	if flags&splitQuery == splitQuery {
		return 0, c.report(badArg(op, "GEX_FLAG_TM_SCRATCH_SIZE_MIN and _RECOMMENDED are mutually exclusive"))
	}
	if flags&FlagTMScratchSizeMin != 0 && c.warnedMin.CompareAndSwap(false, true) {
		c.logf("%s: GEX_FLAG_TM_SCRATCH_SIZE_MIN is deprecated (spec v0.11); use GEX_FLAG_TM_SCRATCH_SIZE_RECOMMENDED", op)
	}
	if !joining {
		return 0, nil
	}
	return ScratchSize, nil
}

// checkScratch validates a client's scratch grant: non-empty and inside the
// caller's bound segment.
func (c *Client) checkScratch(op string, scratch []byte) error {
	seg := c.ep.seg.Load()
	switch {
	case seg == nil:
		return badArg(op, "scratch must lie in the bound segment, but no segment is attached (pass GEX_FLAG_TM_NO_SCRATCH to create a team without scratch)")
	case len(scratch) == 0:
		return badArg(op, "scratch is empty: scratch_size must be non-zero (or pass GEX_FLAG_TM_NO_SCRATCH)")
	}
	base, p := addrOf(seg.mem), addrOf(scratch)
	if p < base || p-base > uintptr(len(seg.mem)) || uintptr(len(scratch)) > uintptr(len(seg.mem))-(p-base) {
		return badArg(op, "scratch [%#x, +%d) is not inside the bound segment [%#x, +%d)", p, len(scratch), base, len(seg.mem))
	}
	return nil
}

// newTeam builds a team over members (job ranks in team-rank order) and
// attaches its collective state, adopting messages that arrived early.
func (c *Client) newTeam(parent *TM, id uint64, members []Rank, me Rank) *TM {
	tm := &TM{c: c, ep: parent.ep, rank: me, size: Rank(len(members)), members: members, id: id}
	c.coll.mu.Lock()
	tm.ts = c.coll.team(id)
	tm.ts.tm = tm
	c.coll.mu.Unlock()
	return tm
}

// nextSeq consumes a collective sequence number of tm for a call that does
// not communicate (Dup, Create).
func (tm *TM) nextSeq() uint32 {
	tm.c.coll.mu.Lock()
	defer tm.c.coll.mu.Unlock()
	s := tm.ts.next
	tm.ts.next++
	return s
}

const splitRec = 32

// Split implements gex_TM_Split, collective over tm: callers passing the same
// non-negative color form a new team, ranked by key and then by their rank in
// tm. A caller passing ColorNone takes part without joining. scratch is the
// caller's grant of scratch space in its bound segment (ignored with
// FlagTMNoScratch, which must then be single-valued over the new team; so
// must len(scratch)). With FlagTMScratchSizeRecommended (or the deprecated
// FlagTMScratchSizeMin) the call is a query: it returns the size to grant and
// creates nothing. Otherwise it returns the caller's new team (nil for
// ColorNone). The arguments that must be single-valued over a new team are
// checked: every member gets the same error if they are not.
func (tm *TM) Split(color, key int, scratch []byte, flags Flags) (*TM, uintptr, error) {
	const op = "Split"
	c, err := teamTM(op, tm)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case flags&^(splitQuery|FlagTMNoScratch) != 0:
		return nil, 0, c.report(badArg(op, "flags %v not accepted (GEX_FLAG_TM_SCRATCH_SIZE_*, GEX_FLAG_TM_NO_SCRATCH)", flags&^(splitQuery|FlagTMNoScratch)))
	case tm.epPath:
		return nil, 0, c.report(badArg(op, "tm is a team over non-primordial endpoints: gexgo does not Split it (use Create)"))
	case color < 0 && color != ColorNone:
		return nil, 0, c.report(badArg(op, "color %d is negative (pass ColorNone to take part without joining)", color))
	}
	if flags&splitQuery != 0 {
		sz, err := c.scratchQuery(op, flags, color != ColorNone)
		return nil, sz, err
	}
	join := color != ColorNone
	if join && flags&FlagTMNoScratch == 0 {
		if err := c.checkScratch(op, scratch); err != nil {
			return nil, 0, c.report(err)
		}
	}
	if !join {
		scratch = nil
	}

	// Exchange (color, key, flags, scratch length): gather at rank 0 of tm,
	// then broadcast the table. Both are collectives of tm, and the id of the
	// new teams is derived from the gather's sequence number.
	n := int(tm.size)
	var mine [splitRec]byte
	binary.LittleEndian.PutUint64(mine[0:], uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	var fl uint32
	if join {
		fl |= 1
	}
	if flags&FlagTMNoScratch != 0 {
		fl |= 2
	}
	binary.LittleEndian.PutUint32(mine[16:], fl)
	binary.LittleEndian.PutUint64(mine[24:], uint64(len(scratch)))
	table := make([]byte, n*splitRec)
	c.coll.mu.Lock()
	seq := tm.ts.next
	c.coll.mu.Unlock()
	// A joining member offers a line of its collective area for the new
	// team (bytes 20-23: line+1, 0 for none): with every member's line
	// known, the team's collectives can run through shared memory
	// (coll_shm.go).
	id := deriveID(tm.id, seq, 's', nil, int64(color))
	line := -1
	if join {
		line = c.coll.claimLine(id)
		binary.LittleEndian.PutUint32(mine[20:], uint32(line+1))
	}
	ok := false
	defer func() {
		if !ok {
			c.coll.freeLine(line)
		}
	}()
	if err := c.coll.gather(tm, table, mine[:], splitRec); err != nil {
		return nil, 0, err
	}
	ev, err := tm.BroadcastNB(0, table, table, len(table), 0)
	if err != nil {
		return nil, 0, err
	}
	if err := ev.Wait(); err != nil {
		return nil, 0, err
	}
	if !join {
		return nil, 0, nil
	}

	type member struct {
		key    int64
		parent Rank
	}
	var ms []member
	var lines []int // by parent rank order, then permuted with ms
	var noScratch, scratchLen = fl & 2, uint64(len(scratch))
	for r := 0; r < n; r++ {
		rec := table[r*splitRec:]
		if binary.LittleEndian.Uint32(rec[16:])&1 == 0 || int64(binary.LittleEndian.Uint64(rec[0:])) != int64(color) {
			continue
		}
		if rfl := binary.LittleEndian.Uint32(rec[16:]); rfl&2 != noScratch {
			return nil, 0, c.report(badArg(op, "GEX_FLAG_TM_NO_SCRATCH must be single-valued over the new team: rank %d of the parent passed it differently", r))
		}
		if l := binary.LittleEndian.Uint64(rec[24:]); noScratch == 0 && l != scratchLen {
			return nil, 0, c.report(badArg(op, "scratch size must be single-valued over the new team: rank %d of the parent granted %d bytes, this rank %d", r, l, scratchLen))
		}
		ms = append(ms, member{int64(binary.LittleEndian.Uint64(rec[8:])), Rank(r)})
		lines = append(lines, int(binary.LittleEndian.Uint32(rec[20:]))-1)
	}
	lineOf := make(map[Rank]int, len(ms))
	for i, m := range ms {
		lineOf[m.parent] = lines[i]
	}
	slices.SortStableFunc(ms, func(a, b member) int {
		if a.key != b.key {
			if a.key < b.key {
				return -1
			}
			return 1
		}
		return int(a.parent) - int(b.parent)
	})
	members := make([]Rank, len(ms))
	me := RankInvalid
	for i, m := range ms {
		members[i] = Rank(tm.jobrank(m.parent))
		if m.parent == tm.rank {
			me = Rank(i)
		}
	}
	nt := c.newTeam(tm, id, members, me)
	slots := make([]int, len(ms))
	for i, m := range ms {
		slots[i] = lineOf[m.parent]
	}
	if st := c.coll.newShmTeam(nt, id, slots); st != nil {
		c.coll.mu.Lock()
		nt.ts.shm = st
		c.coll.mu.Unlock()
		ok = true
	}
	// GEX_FLAG_TM_NO_SCRATCH on Split is a hint: the team "will not perform
	// any significant collectives, and its use otherwise will most likely
	// degrade the performance of collectives" - collectives still work.
	nt.scratch = scratch
	return nt, 0, nil
}

// Dup implements gex_TM_Dup (Memory Kinds, "Teams"): a new team with tm's
// membership and rank order whose collectives are ordered independently of
// tm's. Collective over tm; it does not communicate. scratch and the flags
// (FlagTMNoScratch, the scratch-size queries) are as for Split.
func (tm *TM) Dup(scratch []byte, flags Flags) (*TM, uintptr, error) {
	const op = "Dup"
	c, err := teamTM(op, tm)
	if err != nil {
		return nil, 0, err
	}
	if flags&^(splitQuery|FlagTMNoScratch) != 0 {
		return nil, 0, c.report(badArg(op, "flags %v not accepted (GEX_FLAG_TM_SCRATCH_SIZE_*, GEX_FLAG_TM_NO_SCRATCH)", flags&^(splitQuery|FlagTMNoScratch)))
	}
	if tm.epPath {
		return nil, 0, c.report(badArg(op, "tm is a team over non-primordial endpoints: gexgo does not Dup it (use Create)"))
	}
	if flags&splitQuery != 0 {
		sz, err := c.scratchQuery(op, flags, true)
		return nil, sz, err
	}
	if flags&FlagTMNoScratch == 0 {
		if err := c.checkScratch(op, scratch); err != nil {
			return nil, 0, c.report(err)
		}
	} else {
		scratch = nil
	}
	members := make([]Rank, tm.size)
	for r := range members {
		members[r] = Rank(tm.jobrank(Rank(r)))
	}
	nt := c.newTeam(tm, deriveID(tm.id, tm.nextSeq(), 'd', nil, 0), members, tm.rank)
	nt.noScratch, nt.scratch = flags&FlagTMNoScratch != 0, scratch
	return nt, 0, nil
}

// Create implements gex_TM_Create (Memory Kinds, "gex_TM_Create"),
// collective over tm: each caller names the members of the team it creates,
// in rank order, in args: (rank of tm, or job rank with FlagRankIsJobrank;
// endpoint index) pairs, any endpoints of any processes, several per process
// if wanted. Callers naming the same list create the same team, and lists
// must be identical or disjoint. An empty args creates nothing. The result
// holds one TM per member of the new team that is an endpoint of this
// process, in rank order (empty if args names none).
//
// Exactly one of FlagTMSymmetricScratch (scratchAddrs[0] serves every
// member), FlagTMLocalScratch (scratchAddrs[k] is the k-th local member's),
// FlagTMGlobalScratch (scratchAddrs[i] is member i's) or FlagTMNoScratch must
// be given; with FlagScratchSegOffset the addresses are offsets into the
// members' bound segments. scratchSize must be single-valued over the new
// team. With a scratch-size query flag the call returns the size instead.
// With FlagTMLocalScratch the call ends with a barrier over the new team.
// Collectives over a team created with FlagTMNoScratch are refused, as the
// text of gex_TM_Create says.
func (tm *TM) Create(args []EPLocation, scratchAddrs []Addr, scratchSize uintptr, flags Flags) ([]*TM, uintptr, error) {
	const op = "Create"
	c, err := teamTM(op, tm)
	if err != nil {
		return nil, 0, err
	}
	allowed := splitQuery | scratchSel | FlagRankIsJobrank | FlagScratchSegOffset
	if flags&^allowed != 0 {
		return nil, 0, c.report(badArg(op, "flags %v not accepted", flags&^allowed))
	}
	// Members, as (job rank, endpoint index), and the local ones.
	members := make([]Rank, len(args))
	eps := make([]EPIndex, len(args))
	var local []Rank // team ranks of this process's members
	epPath := false
	seen := make(map[EPLocation]bool, len(args))
	for i, a := range args {
		j := a.Rank
		if flags&FlagRankIsJobrank != 0 {
			if int(j) >= c.size {
				return nil, 0, c.report(badArg(op, "args[%d].Rank %d out of range: job size is %d", i, j, c.size))
			}
			if r, _ := tm.TranslateJobrankToRank(j); r == RankInvalid {
				return nil, 0, c.report(badArg(op, "args[%d] names job rank %d, which is not a member of the parent team", i, j))
			}
		} else {
			if j >= tm.size {
				return nil, 0, c.report(badArg(op, "args[%d].Rank %d out of range: parent team size is %d", i, j, tm.size))
			}
			j = Rank(tm.jobrank(j))
		}
		if int(a.EPIndex) >= MaxEPs {
			return nil, 0, c.report(badArg(op, "args[%d].EPIndex %d out of range: at most %d endpoints per process", i, a.EPIndex, MaxEPs))
		}
		loc := EPLocation{Rank: j, EPIndex: a.EPIndex}
		if seen[loc] {
			return nil, 0, c.report(badArg(op, "args[%d] names job rank %d endpoint %d a second time: members must be distinct", i, j, a.EPIndex))
		}
		seen[loc] = true
		members[i], eps[i] = j, a.EPIndex
		if a.EPIndex != 0 {
			epPath = true
		}
		if int(j) == c.rank {
			if c.epAt(uint16(a.EPIndex)) == nil {
				return nil, 0, c.report(badArg(op, "args[%d] names endpoint %d of this process (job rank %d), which does not exist", i, a.EPIndex, j))
			}
			local = append(local, Rank(i))
		}
	}
	if flags&splitQuery != 0 {
		sz, err := c.scratchQuery(op, flags, len(local) > 0)
		return nil, sz, err
	}
	if sel := flags & scratchSel; sel == 0 || sel&(sel-1) != 0 {
		return nil, 0, c.report(badArg(op, "flags must hold exactly one of GEX_FLAG_TM_{SYMMETRIC,LOCAL,GLOBAL,NO}_SCRATCH, got %v", sel))
	}
	seq := tm.nextSeq()
	if len(local) == 0 {
		return nil, 0, nil
	}
	scratch := make([][]byte, len(local))
	if flags&FlagTMNoScratch == 0 {
		switch {
		case flags&FlagTMGlobalScratch != 0 && len(scratchAddrs) != len(args):
			return nil, 0, c.report(badArg(op, "GEX_FLAG_TM_GLOBAL_SCRATCH needs one scratch address per member (%d), got %d", len(args), len(scratchAddrs)))
		case flags&FlagTMLocalScratch != 0 && len(scratchAddrs) != len(local):
			return nil, 0, c.report(badArg(op, "GEX_FLAG_TM_LOCAL_SCRATCH needs one scratch address per local member (%d), got %d", len(local), len(scratchAddrs)))
		case flags&FlagTMSymmetricScratch != 0 && len(scratchAddrs) != 1:
			return nil, 0, c.report(badArg(op, "GEX_FLAG_TM_SYMMETRIC_SCRATCH needs exactly one scratch address, got %d", len(scratchAddrs)))
		}
		for k, me := range local {
			idx := 0
			switch {
			case flags&FlagTMGlobalScratch != 0:
				idx = int(me)
			case flags&FlagTMLocalScratch != 0:
				idx = k
			}
			seg := c.epAt(uint16(eps[me])).seg.Load()
			if seg == nil {
				return nil, 0, c.report(badArg(op, "scratch must lie in the bound segment, but endpoint %d has none", eps[me]))
			}
			a := scratchAddrs[idx]
			if flags&FlagScratchSegOffset != 0 {
				a += seg.addr
			}
			if a < seg.addr || uint64(a-seg.addr) > uint64(len(seg.mem)) || uint64(scratchSize) > uint64(len(seg.mem))-uint64(a-seg.addr) || scratchSize == 0 {
				return nil, 0, c.report(badArg(op, "scratch [%#x, +%d) is not a non-empty range inside the bound segment [%#x, +%d) of endpoint %d", uintptr(a), scratchSize, uintptr(seg.addr), len(seg.mem), eps[me]))
			}
			off := uintptr(a - seg.addr)
			scratch[k] = seg.mem[off : off+scratchSize : off+scratchSize]
		}
	}
	id := deriveID(tm.id, seq, 'c', members, 0)
	if epPath {
		id = deriveID(tm.id, seq, 'e', epMix(members, eps), 0)
	} else {
		eps = nil
	}
	out := make([]*TM, len(local))
	for k, me := range local {
		nt := &TM{c: c, ep: c.epAt(uint16(args[me].EPIndex)), rank: me, size: Rank(len(members)), members: members, eps: eps, epPath: epPath}
		nt.id = id
		c.coll.mu.Lock()
		if epPath {
			nt.ts = c.coll.team(memberID(id, int(me)))
			nt.ts.base, nt.ts.perMember = id, true
		} else {
			nt.ts = c.coll.team(id)
		}
		nt.ts.tm = nt
		c.coll.mu.Unlock()
		nt.noScratch, nt.scratch = flags&FlagTMNoScratch != 0, scratch[k]
		out[k] = nt
	}
	if flags&FlagTMLocalScratch != 0 {
		evs := make([]Event, len(out))
		for k, nt := range out {
			evs[k] = c.coll.barrier(nt, 0, barrierAnonymous)
		}
		for _, ev := range evs {
			if err := ev.Wait(); err != nil {
				return nil, 0, err
			}
		}
	}
	return out, 0, nil
}

// epMix folds endpoint indices into the member list that names a team.
func epMix(members []Rank, eps []EPIndex) []Rank {
	m := make([]Rank, 2*len(members))
	for i := range members {
		m[2*i], m[2*i+1] = members[i], Rank(eps[i])
	}
	return m
}

// memberID is the id under which member r of a team over non-primordial
// endpoints keeps its collective state: its messages name the member, since
// one process may hold several members of the team.
func memberID(base uint64, r int) uint64 {
	id := base ^ (uint64(r)+1)*0x9e3779b97f4a7c15
	if id <= primordialTeamID {
		id += 2
	}
	return id
}

// Destroy implements gex_TM_Destroy, collective over tm: it releases the team
// and returns the scratch the client granted at creation (nil if none). The
// team must be locally quiesced: every collective over it complete and every
// atomic domain created over it destroyed; gexgo checks both and refuses
// otherwise. It also refuses if a peer has already started a collective over
// the team that this rank never called. FlagGloballyQuiesced is accepted (no
// synchronization is needed either way); FlagScratchSegOffset has no effect
// (the scratch comes back as a slice). The primordial team cannot be
// destroyed; tm must not be used afterwards.
func (tm *TM) Destroy(flags Flags) ([]byte, error) {
	const op = "Destroy"
	c, err := teamTM(op, tm)
	if err != nil {
		return nil, err
	}
	if flags&^(FlagGloballyQuiesced|FlagScratchSegOffset) != 0 {
		return nil, c.report(badArg(op, "flags %v not accepted (GEX_FLAG_GLOBALLY_QUIESCED, GEX_FLAG_SCRATCH_SEG_OFFSET)", flags&^(FlagGloballyQuiesced|FlagScratchSegOffset)))
	}
	if tm.id == primordialTeamID {
		return nil, c.report(badArg(op, "the primordial team cannot be destroyed"))
	}
	if n := tm.ads.Load(); n > 0 {
		return nil, c.report(badArg(op, "team is not quiesced: %d atomic domain(s) created over it are not destroyed", n))
	}
	if err := c.quiesceShm(tm); err != nil { // coll_shm_small.go
		return nil, err
	}
	e := &c.coll
	e.mu.Lock()
	ts := tm.ts
	if ts.active > 0 {
		e.mu.Unlock()
		return nil, c.report(badArg(op, "team is not quiesced: %d collective(s) over it are not complete", ts.active))
	}
	if len(ts.ops) > 0 {
		e.mu.Unlock()
		return nil, c.report(badArg(op, "a peer started %d collective(s) over the team that this rank did not call", len(ts.ops)))
	}
	if !tm.destroyed.CompareAndSwap(false, true) {
		e.mu.Unlock()
		return nil, c.report(badArg(op, "tm was destroyed"))
	}
	e.dropShmTeam(ts)
	delete(e.teams, ts.id)
	e.mu.Unlock()
	return tm.scratch, nil
}

// TMPair implements gex_TM_Pair (Memory Kinds, "gex_TM_Pair"): an ad hoc TM
// naming the local endpoint ep and the endpoint of index remoteIndex in
// whichever process a point-to-point call names by job rank. It does not
// communicate; calling it again with the same arguments returns the same
// value (TM-pairs compare equal exactly then). It is valid for AM, RMA, VIS
// and AM limit queries, not for team operations, atomic domains or
// collectives. Whether remoteIndex exists in the target process is checked
// there: an AM naming an endpoint that does not exist is refused by the
// receiver with a message naming the sender.
func TMPair(ep *EP, remoteIndex EPIndex) (*TM, error) {
	if ep == nil {
		return nil, badArg("TMPair", "ep is nil")
	}
	if int(remoteIndex) >= MaxEPs {
		return nil, ep.c.report(badArg("TMPair", "remote endpoint index %d out of range: at most %d endpoints per process", remoteIndex, MaxEPs))
	}
	ep.pairMu.Lock()
	defer ep.pairMu.Unlock()
	if p := ep.pairs[remoteIndex]; p != nil {
		return p, nil
	}
	c := ep.c
	epPath := ep != c.ep || remoteIndex != 0
	p := &TM{c: c, ep: ep, rank: Rank(c.rank), size: Rank(c.size), pair: true, pairEP: remoteIndex,
		epPath: epPath, direct: !epPath}
	if ep.pairs == nil {
		ep.pairs = make(map[EPIndex]*TM)
	}
	ep.pairs[remoteIndex] = p
	return p, nil
}
