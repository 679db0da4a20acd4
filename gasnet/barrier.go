package gasnet

import (
	"errors"
	"fmt"

	"github.com/gexgo/gexgo/gex"
)

// The split-phase named barrier (GASNet-1 spec, "Barriers"), on gex's
// dissemination barrier, whose messages carry an id and a flags word that are
// merged on the way: anonymous matches anything, two different named ids (or
// a MISMATCH flag anywhere) make a mismatch that every node's wait reports.

// Barrier flags (GASNET_BARRIERFLAG_*), with the values of GASNet's gasnet.h.
const (
	BarrierFlagAnonymous = int(gex.BarrierFlagAnonymous) // GASNET_BARRIERFLAG_ANONYMOUS
	BarrierFlagMismatch  = int(gex.BarrierFlagMismatch)  // GASNET_BARRIERFLAG_MISMATCH
)

// barrierSet is a node's barrier phase. The spec makes the client ensure
// that only one goroutine is inside a barrier call at a time (GASNet-1,
// "Barriers": the barrier calls of a node are not thread-safe with respect to
// each other), so the phase takes no lock: a lock cost two atomic operations
// per call, a sixth of the layer's whole budget over the EX barrier
// (docs/gasnet1.md, "Overhead").
type barrierSet struct {
	notified bool
	id       int32
	flags    int
	ev       gex.Event
	tm       *gex.TM // the primordial team, whose phase finish closes
}

// BarrierNotify implements gasnet_barrier_notify: it starts a barrier phase
// with id and flags (0: named, carrying id; BarrierFlagAnonymous: id
// ignored; BarrierFlagMismatch: force every node's wait to report a
// mismatch) and returns at once. A second notify before the phase's wait is
// an error (fatal in the spec). It may not run concurrently with a GASNet-EX
// collective over the primordial team (the EX spec's rule; refused).
func (j *Job) BarrierNotify(id int32, flags int) error {
	const op = "gasnet_barrier_notify"
	if err := j.syncCheck(op); err != nil {
		return err
	}
	if flags&^(BarrierFlagAnonymous|BarrierFlagMismatch) != 0 {
		return newErr(op, ErrCodeBadArg, fmt.Sprintf("flags %#x: must be 0, GASNET_BARRIERFLAG_ANONYMOUS (%d) or GASNET_BARRIERFLAG_MISMATCH (%d)", flags, BarrierFlagAnonymous, BarrierFlagMismatch))
	}
	b := &j.bar
	if b.notified {
		return newErr(op, ErrCodeBadArg, "gasnet_barrier_notify called twice without gasnet_barrier_wait (or a successful gasnet_barrier_try) in between")
	}
	ev, err := j.tm.BarrierNamedNB(id, uint32(flags))
	if err != nil {
		return newErr(op, ErrCodeBadArg, err.Error())
	}
	b.notified, b.id, b.flags, b.ev, b.tm = true, id, flags, ev, j.tm
	return nil
}

// BarrierWait implements gasnet_barrier_wait: it returns once every node has
// notified this phase. It returns an error wrapping ErrBarrierMismatch
// (GASNET_ERR_BARRIER_MISMATCH) if flags differs from this node's notify
// flags, if flags is 0 and id differs from this node's notify id, if any
// node notified with BarrierFlagMismatch, or if two nodes notified with
// different named ids; nil (GASNET_OK) otherwise. Without a preceding notify
// it is an error (fatal in the spec).
func (j *Job) BarrierWait(id int32, flags int) error {
	const op = "gasnet_barrier_wait"
	if err := j.syncCheck(op); err != nil {
		return err
	}
	b := &j.bar
	if !b.notified {
		return newErr(op, ErrCodeBadArg, "no gasnet_barrier_notify precedes this gasnet_barrier_wait")
	}
	err := b.ev.Wait()
	return b.finish(op, id, flags, err)
}

// BarrierTry implements gasnet_barrier_try: if every node has notified this
// phase it completes it exactly as BarrierWait(id, flags) would (nil or a
// mismatch); otherwise it returns an error wrapping ErrNotReady and the phase
// stays open. It polls once, so a loop of BarrierTry calls makes progress.
func (j *Job) BarrierTry(id int32, flags int) error {
	const op = "gasnet_barrier_try"
	if err := j.syncCheck(op); err != nil {
		return err
	}
	b := &j.bar
	if !b.notified {
		return newErr(op, ErrCodeBadArg, "no gasnet_barrier_notify precedes this gasnet_barrier_try")
	}
	err := b.ev.Test()
	if err == gex.ErrNotReady {
		_ = j.c.Poll()
		err = b.ev.Test()
	}
	if err == gex.ErrNotReady {
		return ErrNotReady
	}
	return b.finish(op, id, flags, err)
}

// finish closes the phase (under mu) and applies the matching rules.
func (b *barrierSet) finish(op string, id int32, flags int, err error) error {
	b.notified, b.ev = false, gex.EventInvalid
	b.tm.BarrierNamedEnd()
	switch {
	case errors.Is(err, gex.ErrBarrierMismatch):
		return newErr(op, ErrCodeBarrierMismatch, "nodes notified with different ids, or a node passed GASNET_BARRIERFLAG_MISMATCH")
	case err != nil:
		return newErr(op, ErrCodeResource, err.Error())
	case flags != b.flags:
		return newErr(op, ErrCodeBarrierMismatch, fmt.Sprintf("flags %d differ from the flags %d passed to this node's gasnet_barrier_notify", flags, b.flags))
	case flags == 0 && id != b.id:
		return newErr(op, ErrCodeBarrierMismatch, fmt.Sprintf("id %d differs from the id %d passed to this node's gasnet_barrier_notify", id, b.id))
	}
	return nil
}
