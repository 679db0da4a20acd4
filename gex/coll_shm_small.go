package gex

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/shm"
)

// Small reductions through shared memory (GASNet-EX "Collectives (Coll)":
// gex_Coll_ReduceToAllNB, gex_Coll_ReduceToOneNB; docs/coll.md, "Shared
// memory").
//
// Each of the first smallLines team lines of a rank's collective area has
// a contribution part: two buffers, each a size word followed by up to
// smallMax bytes (an 8-byte contribution shares the size's cache line).
// The count of the team's small operations the owner has completed
// ("done") is the team line's release word, which only hierarchical teams
// use otherwise (and they have no small operations): a member reading a
// peer's arrive word reads its done count in the same line. A member
// writes its contribution into buffer ord&1 (ord: the operation's number
// among the team's small operations, the same on every member), then
// announces the call in its team line; the members that need the result
// read every contribution in place and fold them in rank order.
//
// A buffer is written again two small operations later; before that, the
// writer waits until every member of the team has completed the operation
// that last used it (done >= ord-1): then nobody reads it any more. Small
// operations complete in order on each member, so done is a count of a
// prefix. Destroy waits until every member has completed every small
// operation of the team (or left it) before the line can serve another
// team.

const (
	smallLines  = 16
	smallMax    = 1 << 10
	smallPart   = (8 + smallMax + lineBytes - 1) / lineBytes * lineBytes // size word, then the bytes
	smallStride = 2 * smallPart
)

// smallView is one member's contribution part. The size words are plain
// memory, not atomics: the owner writes them before its arrive word (an
// atomic store) and readers read them after loading it, which orders them
// (an atomic store here would stall until the line is owned).
type smallView struct {
	done  *atomic.Uint64
	ready *atomic.Uint64 // hierarchical teams: a leader's result of ord is in buffer ord&1 once ready > ord
	size  [2][]byte      // 8 bytes, little-endian
	buf   [2][]byte
}

// smallAt is the contribution part of line slot. On hierarchical teams,
// whose line's release word is the barrier's, the done count and the
// leader's ready word are the spare words after each buffer.
func smallAt(area []byte, slot int, hier bool) smallView {
	o := offSmall + slot*smallStride
	v := smallView{done: shm.Uint64At(area, offSlots+slot*lineBytes+lineRelease)}
	if hier {
		v.done = shm.Uint64At(area, o+8+smallMax)
		v.ready = shm.Uint64At(area, o+smallPart+8+smallMax)
	}
	for p := 0; p < 2; p++ {
		b := o + p*smallPart
		v.size[p] = area[b : b+8 : b+8]
		v.buf[p] = area[b+8 : b+8+smallMax : b+8+smallMax]
	}
	return v
}

// useShmSmall reports whether a reduction of nbytes with op over tm goes
// through the contribution buffers: a team whose members all have one and,
// on a hierarchical team, one whose neighbourhoods are contiguous blocks of
// team ranks or an op other than OPUserNC (coll_shm_hier.go).
func (tm *TM) useShmSmall(nbytes int, op OP) bool {
	st := tm.ts.shm
	return st != nil && st.small != nil && nbytes <= smallMax && (!st.hier || st.contig || op != OPUserNC)
}

// reduceShm initiates a small reduction (mu held, released here).
func (e *collEngine) reduceShm(tm *TM, kind collKind, root int, dst, src []byte, n int) *collOp {
	st := tm.ts.shm
	op := e.startShm(tm, kind)
	op.small, op.ord = true, st.nsmall
	st.nsmall++
	op.root, op.dst, op.nbytes = root, dst, n
	if st.hier {
		op.hnet = op.me == st.leader
		st.nhier++
	}
	op.acc = e.getBuf(n)
	copyMapped(op.acc, src[:n])
	s := &op.slots[0]
	s.buf, s.pooled = e.getBuf(n), true
	return op
}

// writeSmall writes op's contribution into its buffer (before op is
// announced).
func (op *collOp) writeSmall(st *shmTeam) {
	p := op.ord & 1
	v := st.small[op.me]
	copy(v.buf[p][:op.nbytes], op.acc)
	binary.LittleEndian.PutUint64(v.size[p], uint64(op.nbytes))
}

// awaitSmallBuffer waits, before a small operation of tm is initiated,
// until the buffer it will write is free: every member, this one included,
// has completed the small operation that last used it (or left the team).
// The wait progresses the client, so the operations it waits for complete.
// Calls of one team are made in order, so the operation's number is the
// team's count of small operations now.
func (e *collEngine) awaitSmallBuffer(tm *TM) error {
	e.mu.Lock()
	st, ord := tm.ts.shm, tm.ts.shm.nsmall
	e.mu.Unlock()
	if ord < 2 || st.bufferFree(ord) {
		return nil
	}
	return e.c.blockUntil("Coll", func() bool { return st.bufferFree(ord) })
}

// bufferFree reports whether every member has completed the small
// operation before ord-1, the last one to use ord's buffer, or left the
// team.
func (st *shmTeam) bufferFree(ord uint32) bool {
	if ord < 2 {
		return true
	}
	for _, r := range st.local {
		if st.small[r].done.Load() < uint64(ord-1) && st.lines[r].id.Load() == st.id {
			return false
		}
	}
	return true
}

// advanceSmall runs a small reduction, once every member has written its
// contribution and announced the call (its initiation waited until the
// buffer was free, launchShm wrote it): the members that need
// the result (all for ReduceToAll, the root for ReduceToOne) wait for
// every announcement and fold the contributions, read in place, in rank
// order: src[0] (+) src[1] (+) ... (+) src[N-1], left to right - one fixed
// bracketing, so every member computes the same bits. No messages.
func (op *collOp) advanceSmall(e *collEngine, st *shmTeam) bool {
	if st.hier {
		return op.advanceHierSmall(e, st)
	}
	me := st.small[op.me]
	if uint32(me.done.Load()) != op.ord {
		return false // an earlier small operation is not complete here yet
	}
	if op.kind == kindReduceAll || op.me == op.root {
		if !op.gatherLocal(st) {
			return false
		}
		if res := op.fold(st); res != nil {
			copyMapped(op.dst[:op.nbytes], res)
		}
	}
	me.done.Store(uint64(op.ord + 1))
	st.wakeGroup(e, op.me) // a member may wait for its next buffer
	return true
}

// fold combines the contributions of my neighbourhood's members (every
// member, on a flat team) in rank order; it returns the buffer holding the
// result (op.acc or op.slots[0].buf), or nil when a size disagrees.
func (op *collOp) fold(st *shmTeam) []byte {
	p := op.ord & 1
	n := op.nbytes
	left, right := op.acc, op.slots[0].buf
	for i, r := range st.local {
		v := st.small[r]
		if sz := binary.LittleEndian.Uint64(v.size[p]); sz != uint64(n) {
			op.fail(badArg("Coll", "%v: rank %d contributes %d bytes where this rank expects %d: arguments are not single-valued", op.kind, r, sz, n))
			return nil
		}
		if i == 0 {
			copy(left, v.buf[p][:n])
			continue
		}
		copy(right, v.buf[p][:n])
		op.combine(left, right) // right = left (+) right
		left, right = right, left
	}
	return left
}

// smallReady reports, without side effects, whether a small reduction
// would advance.
func (op *collOp) smallReady(st *shmTeam) bool {
	if uint32(st.small[op.me].done.Load()) != op.ord {
		return true // the earlier operation decides
	}
	if op.kind == kindReduceOne && op.me != op.root {
		return true
	}
	for _, r := range st.local {
		if ok, _ := st.arrived(r, op.seq); !ok {
			return false
		}
	}
	return true
}

// quiesceShm waits, before tm is destroyed, until every member of its
// neighbourhood has completed every small operation of the team or left
// it: then nobody reads this rank's buffers any more and the line may
// serve another team.
func (c *Client) quiesceShm(tm *TM) error {
	c.coll.mu.Lock()
	st := tm.ts.shm
	active := tm.ts.active
	c.coll.mu.Unlock()
	if st == nil || st.small == nil || st.nsmall == 0 || active > 0 {
		return nil
	}
	return c.blockUntil("Destroy", func() bool {
		for _, r := range st.local {
			if st.small[r].done.Load() < uint64(st.nsmall) && st.lines[r].id.Load() == st.id {
				return false
			}
		}
		return true
	})
}
