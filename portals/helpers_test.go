package portals

import (
	"errors"
	"testing"
	"time"
)

type niKind struct {
	name string
	opts NIOptions
}

var niKinds = []niKind{
	{"ME-logical", NIMatching | NILogical},
	{"ME-physical", NIMatching | NIPhysical},
	{"LE-logical", NINoMatching | NILogical},
	{"LE-physical", NINoMatching | NIPhysical},
}

// env is one or two physical NIs of this process (interfaces 0 and 1, each with its own pid
// through the transport) with one logical NI of the same kind on each.
type env struct {
	t        *testing.T
	kind     niKind
	ni       []NIHandle
	ids      []ProcessID // target ids as the kind addresses them
	phys     []ProcessID
	matching bool
}

func newEnv(t *testing.T, kind niKind, n int, desired *Limits) *env {
	t.Helper()
	if err := Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(Fini)
	e := &env{t: t, kind: kind, matching: kind.opts&NIMatching != 0}
	for i := 0; i < n; i++ {
		ni, _, err := NIInit(Interface(i), kind.opts, PIDAny, desired)
		if err != nil {
			t.Fatalf("NIInit(iface %d): %v", i, err)
		}
		t.Cleanup(func() { ni.Fini() })
		id, err := ni.PhysID()
		if err != nil {
			t.Fatal(err)
		}
		e.ni = append(e.ni, ni)
		e.phys = append(e.phys, id)
	}
	for i := range e.ni {
		if kind.opts&NILogical != 0 {
			if err := e.ni[i].SetMap(e.phys); err != nil {
				t.Fatal(err)
			}
			e.ids = append(e.ids, RankID(Rank(i)))
		} else {
			e.ids = append(e.ids, e.phys[i])
		}
	}
	return e
}

// must returns v, panicking (which fails the test with a stack) on an error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, c Code) {
	t.Helper()
	if !errors.Is(err, c) {
		t.Fatalf("got error %v, want %v", err, c)
	}
}

// appendEntry appends an LE or ME (by the NI kind) to list.
func (e *env) appendEntry(i int, pt PTIndex, me ME, list List, userPtr uint64) Handle {
	e.t.Helper()
	if e.matching {
		return Handle(must(e.ni[i].MEAppend(pt, &me, list, userPtr)))
	}
	le := LE{Buf: me.Buf, Iov: me.Iov, CT: me.CT, UID: me.UID, Options: me.Options &^ meOnlyOptions}
	return Handle(must(e.ni[i].LEAppend(pt, &le, list, userPtr)))
}

func (e *env) search(i int, pt PTIndex, me ME, op SearchOp, userPtr uint64) {
	e.t.Helper()
	if e.matching {
		ok(e.t, e.ni[i].MESearch(pt, &me, op, userPtr))
		return
	}
	le := LE{Buf: me.Buf, CT: me.CT, UID: me.UID, Options: me.Options &^ meOnlyOptions}
	ok(e.t, e.ni[i].LESearch(pt, &le, op, userPtr))
}

func unlinkH(h Handle) error {
	if h.kind() == kindME {
		return MEHandle(h).Unlink()
	}
	return LEHandle(h).Unlink()
}

// anyME is an ME that matches every message (all bits ignored, any source) with full
// permissions.
func anyME(buf []byte, opts EntryOptions) ME {
	return ME{Buf: buf, UID: UIDAny, Options: OpPut | OpGet | opts, IgnoreBits: ^MatchBits(0), MatchID: ProcessID{NID: NIDAny, PID: PIDAny, Rank: RankAny}}
}

// nextEvent waits for an event on q with a generous limit.
func nextEvent(t *testing.T, q EQHandle) Event {
	t.Helper()
	ev, _, err := EQPoll([]EQHandle{q}, 20*time.Second)
	if err != nil && !errors.Is(err, ErrEQDropped) {
		t.Fatalf("EQPoll: %v", err)
	}
	return ev
}

func expectKind(t *testing.T, q EQHandle, k EventKind) Event {
	t.Helper()
	ev := nextEvent(t, q)
	if ev.Type != k {
		t.Fatalf("event %v (fail %v), want %v", ev.Type, ev.NIFail, k)
	}
	return ev
}

func expectEmpty(t *testing.T, q EQHandle) {
	t.Helper()
	if ev, err := q.Get(); !errors.Is(err, ErrEQEmpty) {
		t.Fatalf("EQ not empty: %v %+v", err, ev)
	}
}

func ctWait(t *testing.T, c CTHandle, n uint64) CTEvent {
	t.Helper()
	v, _, err := CTPoll([]CTHandle{c}, []uint64{n}, 20*time.Second)
	if err != nil {
		t.Fatalf("CTPoll(%d): %v", n, err)
	}
	return v
}
