package gex

// Hooks for the GASNet-1 layer (package gasnet), which the GASNet-EX spec
// describes as "gasnet.h, which implements the GASNet-1 APIs in terms of the
// new GASNet-EX interfaces". They give that layer the few things the EX API
// itself does not offer: handler registration with GASNet-1 semantics, the
// named split-phase barrier, and a restricted-context query. Memset lives in
// memset.go.

// anyNArgs is the NArgs of a handler registered the GASNet-1 way: it may be
// invoked with any number of arguments in [0, MaxArgs].
const anyNArgs = -1

// legacyFlags is the category and request/reply set of a GASNet-1 handler:
// gasnet_handlerentry_t carries neither, so the handler accepts every
// category, as a Request or a Reply.
const legacyFlags = FlagAMShort | FlagAMMedLong | FlagAMReqRep

// RegisterHandlersGASNet1 registers handlers as gasnet_attach does (GASNet-1
// spec, "gasnet_attach"): each entry's Index is 0 ("don't care": assigned
// exactly as RegisterHandlers assigns it, and written back) or in
// [AMIndexBase, 255]; Flags and NArgs are ignored, because a GASNet-1 handler
// entry names only an index and a function: the handler accepts Short, Medium
// and Long AMs, as a Request or a Reply, with 0..MaxArgs arguments. Either
// every entry is registered or, on error, none. The GASNet-EX spec says the
// two entry types are "not interchangeable"; this is the gasnet_handlerentry_t
// path.
func (ep *EP) RegisterHandlersGASNet1(table []AMEntry) error {
	shaped := make([]AMEntry, len(table))
	for i, e := range table {
		e.Flags, e.NArgs = FlagAMShort|FlagAMRequest, 0 // placeholders that pass the EX checks
		shaped[i] = e
	}
	if err := ep.registerHandlers(shaped); err != nil {
		return ep.c.report(err)
	}
	ep.regMu.Lock()
	defer ep.regMu.Unlock()
	for i := range shaped {
		e := shaped[i]
		e.Flags, e.NArgs = legacyFlags, anyNArgs
		ep.handlers[e.Index].Store(&e)
		table[i].Index = e.Index
	}
	return nil
}

// CheckRestricted reports, as an error wrapping ErrRestricted, whether the
// calling goroutine is in restricted context (GASNet-EX "Calls from
// restricted context"): inside an AM handler, holding an HSL, or between an
// AM Prepare and its Commit. op names the caller's API in the message. The
// GASNet-1 layer uses it for its own rules (No-Interrupt Sections, barrier
// calls from handlers).
func (c *Client) CheckRestricted(op string) error { return c.checkRestricted(op) }

// Barrier flags of the GASNet-1 named barrier, as BarrierNamedNB takes them.
const (
	BarrierFlagAnonymous = barrierAnonymous // GASNET_BARRIERFLAG_ANONYMOUS
	BarrierFlagMismatch  = barrierMismatch  // GASNET_BARRIERFLAG_MISMATCH
)

// BarrierNamedNB initiates the GASNet-1 named split-phase barrier
// (gasnet_barrier_notify, GASNet-1 spec "Barriers") over tm, which must be
// the primordial team. flags is 0 (a named barrier carrying id),
// BarrierFlagAnonymous (id ignored) or BarrierFlagMismatch (forces a
// mismatch). The event completes once every rank has notified; it completes
// with an error wrapping ErrBarrierMismatch on every rank if any rank passed
// BarrierFlagMismatch or two ranks passed named ids that differ (the spec's
// matching rules; anonymous notifies match anything).
//
// The GASNet-EX spec ("Collectives"): "the gasnet_barrier*() family of calls
// may not operate concurrently with any gex_Coll_*() operation (including
// barriers) over the primordial team": BarrierNamedNB refuses while an EX
// collective over tm initiated here is incomplete, and EX collectives over tm
// are refused until the named barrier completes.
func (tm *TM) BarrierNamedNB(id int32, flags uint32) (Event, error) {
	const opName = "BarrierNamedNB"
	c, err := collTM(opName, tm)
	if err != nil {
		return EventInvalid, err
	}
	if tm != c.tm {
		return EventInvalid, c.report(badArg(opName, "tm must be the primordial team"))
	}
	if flags&^(barrierAnonymous|barrierMismatch) != 0 {
		return EventInvalid, c.report(badArg(opName, "flags %#x: only GASNET_BARRIERFLAG_ANONYMOUS (%d) and GASNET_BARRIERFLAG_MISMATCH (%d) are defined", flags, barrierAnonymous, barrierMismatch))
	}
	e := &c.coll
	e.mu.Lock()
	if tm.ts.active > 0 {
		n := tm.ts.active
		e.mu.Unlock()
		return EventInvalid, c.report(badArg(opName, "%d GASNet-EX collective(s) over the primordial team are not complete (GASNet-EX: they must be complete before a GASNet-1 barrier over the same team is initiated)", n))
	}
	tm.ts.legacy.Store(true)
	return e.barrierLocked(tm, id, flags), nil
}

// BarrierNamedEnd closes the GASNet-1 barrier phase that BarrierNamedNB
// opened on tm, once its event has completed and the GASNet-1 layer has
// consumed it (gasnet_barrier_wait, or a gasnet_barrier_try that succeeded):
// from then on EX collectives over tm may be initiated again. A phase is open
// from the notify until that point, not only while the library still moves
// the barrier's messages: the GASNet-EX spec forbids EX collectives between a
// gasnet_barrier_notify and its wait, however early the barrier completes.
func (tm *TM) BarrierNamedEnd() {
	if tm != nil && tm.ts != nil {
		tm.ts.legacy.Store(false)
	}
}

// checkLegacyBarrier refuses an EX collective over a team whose GASNet-1
// barrier is in progress.
func (tm *TM) checkLegacyBarrier(op string) error {
	if tm.ts != nil && tm.ts.legacy.Load() {
		return tm.c.report(badArg(op, "a GASNet-1 barrier over the primordial team is in progress (GASNet-EX: no collective may be initiated over that team between the barrier's notify and its completion)"))
	}
	return nil
}
