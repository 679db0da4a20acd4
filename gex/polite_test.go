package gex

import (
	"sync/atomic"
	"testing"
)

// TestCPUElsewhere: a member counts as running elsewhere only when both
// CPU words are known and differ.
func TestCPUElsewhere(t *testing.T) {
	for _, tc := range []struct {
		w, mine uint32
		want    bool
	}{
		{2, 1, true}, {1, 2, true}, {1, 1, false}, {0, 1, false}, {1, 0, false}, {0, 0, false},
	} {
		if got := cpuElsewhere(tc.w, tc.mine); got != tc.want {
			t.Errorf("cpuElsewhere(%d, %d) = %v, want %v", tc.w, tc.mine, got, tc.want)
		}
	}
}

// politeFixture is a polite client of rank 0 in a flat 4-member team whose
// barrier (sequence 5) is its oldest pending shared-memory operation; the
// members' arrive words and CPU words are the test's to set.
type politeFixture struct {
	c    *Client
	op   *collOp
	ev   *eventState
	cpus []*atomic.Uint32
	st   *shmTeam
}

func newPoliteFixture() *politeFixture {
	const n, id, seq = 4, 77, 5
	st := &shmTeam{id: id, lines: make([]lineView, n), jobs: make([]int, n)}
	f := &politeFixture{c: &Client{polite: true, rank: 0, size: n}, st: st}
	for r := 0; r < n; r++ {
		area := make([]byte, collEnd)
		st.lines[r] = lineAt(area, 0)
		st.lines[r].id.Store(id)
		st.jobs[r] = r
		st.local = append(st.local, r)
		f.cpus = append(f.cpus, new(atomic.Uint32))
	}
	ts := &teamState{id: id, shm: st}
	f.op = &collOp{ts: ts, seq: seq, kind: kindBarrier, me: 0, n: n, shm: true}
	f.ev = &eventState{coll: f.op}
	f.op.ev = f.ev
	f.c.coll.c = f.c
	f.c.coll.shm.q = []*collOp{f.op}
	f.c.mates = cpuMates{words: f.cpus, mine: f.cpus[0]}
	f.arrive(0)
	return f
}

// arrive marks member r arrived at the fixture's barrier.
func (f *politeFixture) arrive(r int) {
	f.st.lines[r].arrive.Store(uint64(f.op.seq+1)<<8 | uint64(kindBarrier))
}

// setCPUs sets the members' CPU words (CPU + 1; 0 not known).
func (f *politeFixture) setCPUs(w ...uint32) {
	for r, v := range w {
		f.cpus[r].Store(v)
	}
}

// TestPoliteSpin: a polite wait for a flat barrier keeps polling while
// every member missing last ran on another CPU, and yields when one of
// them shares this rank's CPU, when a CPU is not known, when the barrier
// is not the oldest pending operation, a broadcast or hierarchical (a
// small reduction counts as a barrier), when the wait
// is not for a collective, and after politeSpinMax polls in a row.
func TestPoliteSpin(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(f *politeFixture) // after CPUs 1, 2, 2, 2 and only me arrived
		ev   func(f *politeFixture) *eventState
		want bool
	}{
		{name: "missing-elsewhere", want: true},
		{name: "missing-here", set: func(f *politeFixture) { f.setCPUs(1, 2, 2, 1) }},
		{name: "arrived-here", set: func(f *politeFixture) { f.setCPUs(1, 2, 2, 1); f.arrive(3) }, want: true},
		{name: "unknown-cpu", set: func(f *politeFixture) { f.setCPUs(1, 2, 0, 2) }},
		{name: "my-cpu-unknown", set: func(f *politeFixture) { f.setCPUs(0, 2, 2, 2) }},
		{name: "none-missing", set: func(f *politeFixture) { f.arrive(1); f.arrive(2); f.arrive(3) }},
		{name: "member-left", want: true, set: func(f *politeFixture) {
			f.setCPUs(1, 2, 1, 2)
			f.st.lines[2].id.Store(0) // destroyed the team: counts as arrived
		}},
		{name: "not-oldest", set: func(f *politeFixture) {
			f.c.coll.shm.q = []*collOp{{ts: f.op.ts, seq: 4, kind: kindBarrier, shm: true}, f.op}
		}},
		{name: "broadcast", set: func(f *politeFixture) { f.op.kind = kindBcast }},
		{name: "small-reduction", set: func(f *politeFixture) { f.op.kind, f.op.small = kindReduceAll, true }, want: true},
		{name: "hierarchical", set: func(f *politeFixture) { f.st.hier = true }},
		{name: "not-polite", set: func(f *politeFixture) { f.c.mates = cpuMates{} }},
		{name: "not-collective", ev: func(*politeFixture) *eventState { return &eventState{} }},
		{name: "no-event", ev: func(*politeFixture) *eventState { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPoliteFixture()
			f.setCPUs(1, 2, 2, 2)
			if tc.set != nil {
				tc.set(f)
			}
			ev := f.ev
			if tc.ev != nil {
				ev = tc.ev(f)
			}
			spins := 0
			if got := f.c.politeSpin(ev, &spins); got != tc.want {
				t.Fatalf("politeSpin = %v, want %v (true: poll again, false: yield)", got, tc.want)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		f := newPoliteFixture()
		f.setCPUs(1, 2, 2, 2)
		spins := 0
		for i := 0; i < politeSpinMax; i++ {
			if !f.c.politeSpin(f.ev, &spins) {
				t.Fatalf("poll %d: yielded, want a poll (bound %d)", i, politeSpinMax)
			}
		}
		if f.c.politeSpin(f.ev, &spins) {
			t.Fatalf("poll %d in a row: polled, want a yield", politeSpinMax+1)
		}
		if !f.c.politeSpin(f.ev, &spins) {
			t.Fatal("after the bound's yield: yielded, want polls again")
		}
	})
}
