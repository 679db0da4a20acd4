package gex

import (
	"runtime"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/conduit/smp"
	"github.com/gexgo/gexgo/internal/shm"
)

// Polite waits for a flat shared-memory barrier or small reduction
// (docs/coll.md, "The 4-rank barrier on 2 CPUs").
//
// With more ranks on the host than CPUs, a waiting rank yields its CPU
// (sched_yield) between polls, since the member it waits for may need
// that CPU to arrive. Yielding helps only then: when every member still
// missing runs on another CPU, the rank the yield hands this CPU to has
// arrived already and yields straight back, two process switches (about
// 3 us on the 2-vCPU machines of perf-anchors.md) that delay the moment
// this CPU sees the barrier complete. So every rank records in its
// collective area the CPU it runs on (smp.CollAreaCPU, refreshed after
// each yield, when the scheduler may have moved it), and a polite wait for
// a flat barrier (or a small reduction, which waits for the same arrive
// words) keeps polling without yielding while each missing member last ran
// on another CPU. The record can be stale (a rank moved while it was not
// running), so such a spell lasts at most politeSpinMax polls. Several
// goroutines of a rank may wait at once, on different threads: the word
// then holds the CPU of whichever noted it last, a hint either way.

// testCPUs, if positive, replaces runtime.NumCPU in the polite rule
// (tests: export_polite_test.go).
var testCPUs int

// hostCPUs is how many CPUs the ranks of this host share, as far as the
// polite rule goes.
func hostCPUs() int {
	if testCPUs > 0 {
		return testCPUs
	}
	return runtime.NumCPU()
}

// politeSpinMax bounds the polls a polite wait spends without yielding
// (a few microseconds: about a process switch or two).
const politeSpinMax = 256

// cpuMates holds the CPU words of this rank's neighbourhood (nil outside
// it, or without collective areas); set once at ClientInit, when polite.
type cpuMates struct {
	words []*atomic.Uint32 // by job rank
	mine  *atomic.Uint32
}

// initCPUMates maps the CPU words of the collective areas (after the
// engine's initShm).
func (c *Client) initCPUMates() {
	a := c.coll.shm.areas
	if !c.polite || a == nil {
		return
	}
	m := &c.mates
	m.words = make([]*atomic.Uint32, c.size)
	for p := range m.words {
		if area := a.CollArea(p); area != nil {
			m.words[p] = shm.Uint32At(area, smp.CollAreaCPU)
		}
	}
	m.mine = m.words[c.rank]
	c.noteCPU()
}

// noteCPU records the CPU this thread runs on in this rank's CPU word (a
// store only when it changed).
func (c *Client) noteCPU() {
	if w := c.mates.mine; w != nil {
		if v := shm.CurrentCPU(); w.Load() != v {
			w.Store(v)
		}
	}
}

// cpuElsewhere reports whether a member whose CPU word holds w runs on
// another CPU than this rank (word mine); false when either is not known.
func cpuElsewhere(w, mine uint32) bool { return w != 0 && mine != 0 && w != mine }

// politeSpin reports whether a polite wait for ev should poll again
// rather than yield: ev is the oldest pending shared-memory operation, a
// barrier or small reduction of a flat team, and every member that has
// not arrived at it last ran on another CPU. *spins counts the wait's
// polls without a yield; after politeSpinMax of them it yields once (and
// starts over).
func (c *Client) politeSpin(ev *eventState, spins *int) bool {
	m := &c.mates
	if m.mine == nil || ev == nil || ev.coll == nil || *spins >= politeSpinMax {
		*spins = 0
		return false
	}
	if !c.coll.missingElsewhere(ev.coll, m) {
		*spins = 0
		return false
	}
	*spins++
	return true
}

// missingElsewhere reports whether op is the oldest pending shared-memory
// operation, a flat team's barrier or small reduction, and at least one
// member has not arrived at it, all of them last seen on another CPU than
// this rank.
func (e *collEngine) missingElsewhere(op *collOp, m *cpuMates) bool {
	s := &e.shm
	s.mu.Lock() // op's fields are written before it joins q and after it leaves
	defer s.mu.Unlock()
	if len(s.q) == 0 || s.q[0] != op || op.kind != kindBarrier && !op.small || op.ts.shm.hier {
		return false
	}
	st := op.ts.shm
	mine := m.mine.Load()
	missing := false
	for _, r := range st.local {
		if r == op.me {
			continue
		}
		if ok, _ := st.arrived(r, op.seq); ok {
			continue
		}
		w := m.words[st.jobs[r]]
		if w == nil || !cpuElsewhere(w.Load(), mine) {
			return false
		}
		missing = true
	}
	return missing
}
