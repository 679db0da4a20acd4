package gex

import "encoding/binary"

// Hierarchical broadcast and reductions (GASNet-EX "Collectives (Coll)":
// gex_Coll_BroadcastNB, gex_Coll_ReduceToOneNB, gex_Coll_ReduceToAllNB;
// docs/coll.md, "Shared memory").
//
// A hierarchical team spans H neighbourhoods (hosts). Its members are
// grouped by neighbourhood, the groups numbered in order of their lowest
// team rank, which leads the group. Each collective combines a
// shared-memory phase inside every group with a network phase of AM
// collectives among one member per group:
//
//   - BroadcastNB: the root stands for its group. The network phase is an
//     AM broadcast over the team of the root and the other groups' leaders
//     (one such team per root, built on first use); the root streams src
//     through its ring to its own group meanwhile, and every other leader,
//     once the data arrived, streams it through its ring to its group.
//     Messages: those of an AM broadcast among H members, none inside a
//     group.
//   - ReduceToAllNB, ReduceToOneNB up to smallMax bytes: every member writes
//     its contribution in its contribution part; the leader folds its
//     group's, in rank order, then the leaders reduce their partial results
//     with the AM reduction over the leaders' team (ReduceToOne to the
//     leader of the root's group); the leader writes the result into its own
//     contribution buffer and raises its ready word, and the members that
//     need it copy it out. Messages: those of an AM reduction among H
//     members.
//
// The AM reductions fold rank-ordered contributions in a fixed bracketing,
// so where every group is a contiguous block of team ranks the result is
// the rank-ordered fold src[0] (+) ... (+) src[N-1] in one fixed bracketing
// (((src[0] (+) src[1]) (+) (src[2] (+) src[3])) for two groups of two):
// OPUserNC is exact and ReduceToAll gives the same bits on every member.
// Otherwise the fold is by group (still one fixed bracketing, the same
// bits everywhere), which reorders operands: allowed for the built-in
// operators and OPUser (commutative by definition), not for OPUserNC,
// which then keeps the AM algorithms over the whole team (useShmSmall).
//
// The network phases of a team's collectives are started on each rank in
// the order of the collectives (netTurn), so the AM collectives over the
// leaders' and broadcast teams are numbered alike on every member.

// hierBcastMin is the smallest broadcast over a hierarchical team that
// takes the hierarchical path. Measured on pretend hosts (loopback TCP, a
// loaded 2-core machine, 2 hosts of 2 ranks, root rotating): below it the
// AM tree was faster (8 B: 8-12 us against 13-21 us; 16 KiB: 12-16 against
// 18-23 us: the ring makes the distributor wait for its members, where an
// AM root runs ahead), at 64 KiB the two were at par, and the hierarchical
// path carries the payload across hosts once per host instead of up to
// N-1 times.
const hierBcastMin = 64 << 10

// groupTeam numbers the neighbourhoods of st's members (nbrhd: by job
// rank) and finds their leaders and whether they are contiguous.
func (st *shmTeam) groupTeam(nbrhd []int) {
	n := len(st.jobs)
	st.group = make([]int, n)
	idx := map[int]int{}
	st.contig = true
	for r := 0; r < n; r++ {
		nb := nbrhd[st.jobs[r]]
		g, ok := idx[nb]
		if !ok {
			g = len(st.glead)
			idx[nb] = g
			st.glead = append(st.glead, r)
		} else if st.group[r-1] != g {
			st.contig = false
		}
		st.group[r] = g
	}
}

// dist is the member that distributes a broadcast from root inside my
// group: root itself in root's group, else my group's leader.
func (st *shmTeam) dist(root int) int {
	if st.group[root] == st.group[st.leader] {
		return root
	}
	return st.leader
}

// subTeam builds the AM team of a network phase: members (job ranks), me
// my rank in it, id the id every member derives alike.
func (e *collEngine) subTeam(tm *TM, id uint64, me Rank, members []Rank) *TM {
	lt := &TM{c: e.c, ep: tm.ep, rank: me, size: Rank(len(members)), members: members, id: id}
	e.mu.Lock()
	lt.ts = e.team(id)
	lt.ts.tm = lt
	e.mu.Unlock()
	return lt
}

// bcastTeam is the team of a broadcast's network phase from root r: the
// leader of every group, root r standing for its own.
func (e *collEngine) bcastTeam(tm *TM, st *shmTeam, r int) *TM {
	if bt := st.bteams[r]; bt != nil {
		return bt
	}
	members := make([]Rank, len(st.glead))
	for g, l := range st.glead {
		members[g] = Rank(st.jobs[l])
	}
	members[st.group[r]] = Rank(st.jobs[r])
	bt := e.subTeam(tm, deriveID(tm.id, uint32(r), 'B', members, 0), Rank(st.group[int(tm.rank)]), members)
	st.bteams[r] = bt
	return bt
}

// netTurn reports whether op may start its network phase: no earlier
// pending operation of its team still has one to start (shm.mu held).
func (e *collEngine) netTurn(op *collOp) bool {
	for _, o := range e.shm.q {
		if o == op {
			return true
		}
		if o.hnet && o.ts == op.ts {
			return false
		}
	}
	return true
}

// subDone reports whether op's network phase, if any, is complete, and
// then takes its result.
func (op *collOp) subDone(e *collEngine) bool {
	if op.sub == nil {
		return true
	}
	if !op.subEv.s.complete() {
		return false
	}
	if err := op.subEv.s.consume(); err != nil && op.err == nil {
		op.err = err
	}
	e.mu.Lock()
	op.sub = nil // under mu: waitingOn reads it
	e.mu.Unlock()
	op.subEv = Event{}
	return true
}

// ringDirect makes a broadcast's distributor name src's offset in its
// segment, when src lies there, instead of streaming it through the ring.
func (op *collOp) ringDirect(c *Client) {
	var off int
	if op.nbytes >= directMin && op.segOffset(c, op.src, &off) {
		op.viaMap = true
		op.slots[slotDirect].segOff = off
	}
}

// advanceHierBcast is the hierarchical broadcast (see the file comment).
func (op *collOp) advanceHierBcast(e *collEngine, st *shmTeam) bool {
	dist := st.dist(op.root)
	if op.me == dist {
		if op.hnet {
			if !e.netTurn(op) {
				return false
			}
			op.hnet = false
			bt := e.bcastTeam(op.ts.tm, st, op.root)
			dst := op.dst
			if op.me == op.root && dst == nil {
				dst = op.src // src is dst: the root's copy is done
			}
			e.mu.Lock()
			sub := e.bcastAMOp(bt, Rank(st.group[op.root]), dst, op.src, op.nbytes)
			op.sub = sub
			op.subEv = e.launch(sub)
			if op.me == op.root {
				op.dst = nil // the AM phase made the root's own copy
			}
		}
		if op.me != op.root && op.src == nil {
			// Another group's leader: it distributes what the network
			// phase delivered into its dst.
			if !op.subDone(e) {
				return false
			}
			op.src, op.dst = op.dst, nil
			op.ringDirect(e.c)
		}
	}
	if !op.hring {
		if !op.ringBcast(e, st, dist, uint64(len(st.local)-1)) {
			return false
		}
		op.hring = true
	}
	return op.subDone(e)
}

// bcastReady reports, without side effects, whether a broadcast would
// advance.
func (op *collOp) bcastReady(e *collEngine, st *shmTeam) bool {
	dist, peers := op.root, uint64(op.n-1)
	if st.hier {
		dist, peers = st.dist(op.root), uint64(len(st.local)-1)
		switch {
		case op.sub != nil && op.subEv.s.complete():
			return true
		case op.hnet:
			return e.netTurn(op)
		case op.hring || op.me == dist && op.src == nil:
			return false // the network phase decides (above)
		}
	}
	if op.me == dist {
		return op.rootReady(st, dist, peers)
	}
	rg := st.rings[dist]
	return rg.tag.Load() == op.ringTag(st, dist) && (rg.fill.Load()&fillDirect != 0 || int(rg.fill.Load()) > op.step-1)
}

// advanceHierSmall is the hierarchical small reduction (see the file
// comment).
func (op *collOp) advanceHierSmall(e *collEngine, st *shmTeam) bool {
	me := st.small[op.me]
	if uint32(me.done.Load()) != op.ord {
		return false // an earlier small operation is not complete here yet
	}
	n, p := op.nbytes, op.ord&1
	if op.me != st.leader {
		if op.kind == kindReduceAll || op.me == op.root {
			lv := st.small[st.leader]
			switch {
			case int32(uint32(lv.ready.Load())-(op.ord+1)) < 0:
				if st.lines[st.leader].id.Load() == st.id {
					return false
				}
				op.fail(badArg("Coll", "%v: rank %d, the leader of this neighbourhood, left the team", op.kind, st.leader))
			case binary.LittleEndian.Uint64(lv.size[p]) != uint64(n):
				op.fail(badArg("Coll", "%v: the reduction failed on rank %d, the leader of this neighbourhood", op.kind, st.leader))
			default:
				copyMapped(op.dst[:n], lv.buf[p][:n])
			}
		}
		me.done.Store(uint64(op.ord + 1))
		e.shm.areas.WakeColl(st.jobs[st.leader])
		return true
	}
	if op.hnet {
		if !op.gatherLocal(st) || !e.netTurn(op) {
			return false
		}
		op.hnet = false
		part := op.fold(st)
		if part == nil {
			part = op.acc // (failed: the leaders' reduction still runs)
		}
		res := op.slots[0].buf
		if &part[0] == &res[0] {
			res = op.acc
		}
		op.src = res
		root := 0
		if op.kind == kindReduceOne {
			root = st.group[op.root]
		}
		e.mu.Lock()
		sub := e.reduceAMOp(st.leaders, op.kind, root, res, part, n, op.dt, op.dtSize, op.op, op.fn, op.cdata)
		op.sub = sub
		op.subEv = e.launch(sub)
	}
	if !op.subDone(e) {
		return false
	}
	if op.kind == kindReduceAll || st.group[op.root] == st.group[op.me] {
		sz := uint64(n)
		if op.err != nil {
			sz = ^uint64(0)
		} else {
			copy(me.buf[p][:n], op.src)
		}
		binary.LittleEndian.PutUint64(me.size[p], sz)
		me.ready.Store(uint64(op.ord + 1))
		if op.err == nil && (op.kind == kindReduceAll || op.me == op.root) {
			copyMapped(op.dst[:n], op.src)
		}
	}
	me.done.Store(uint64(op.ord + 1))
	st.wakeGroup(e, op.me)
	return true
}

// hierSmallReady reports, without side effects, whether a hierarchical
// small reduction would advance (a pending network phase: above, in
// canAdvanceShm).
func (op *collOp) hierSmallReady(e *collEngine, st *shmTeam) bool {
	if uint32(st.small[op.me].done.Load()) != op.ord {
		return true // the earlier operation decides
	}
	if op.me != st.leader {
		if op.kind == kindReduceOne && op.me != op.root {
			return true
		}
		lv := st.small[st.leader]
		return int32(uint32(lv.ready.Load())-(op.ord+1)) >= 0 || st.lines[st.leader].id.Load() != st.id
	}
	if !op.hnet {
		return true
	}
	for _, r := range st.local {
		if ok, _ := st.arrived(r, op.seq); !ok {
			return false
		}
	}
	return e.netTurn(op)
}
