package gex

import (
	"fmt"

	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/conduit/smp"
	"github.com/gexgo/gexgo/internal/gctx"
)

// AMFn is an AM handler (gex_AM_Fn_t). payload is nil for a Short; for a
// Medium it is the payload, valid only until the handler returns; for a Long
// it is the payload already placed in this rank's segment at the address the
// initiator chose (t.Addr()). args holds exactly the registered number of
// arguments. The handler must not retain t, payload (Medium) or args.
//
// Handlers run inside library calls that poll (Poll, BlockUntil, Wait, and
// waits for send resources) or on the receive goroutine. Inside a handler only
// the calls the spec lists under "Calls from restricted context" are
// permitted; a Request handler may send at most one Reply through t.
type AMFn func(t *Token, payload []byte, args []AMArg)

// AMEntry describes one AM handler (gex_AM_Entry_t).
type AMEntry struct {
	// Index is 0 ("don't care": assigned by RegisterHandlers, which writes it
	// back) or in [AMIndexBase, 255].
	Index AMIndex
	Fn    AMFn
	// Flags must OR one category (FlagAMShort, FlagAMMedium, FlagAMLong,
	// FlagAMMedLong) with one of FlagAMRequest, FlagAMReply, FlagAMReqRep.
	Flags Flags
	// NArgs is the number of arguments every invocation carries, in [0, MaxArgs].
	NArgs int
	CData any    // available to the handler through Token.Info
	Name  string // used in messages
}

func (e *AMEntry) label() string {
	if e.Name != "" {
		return e.Name
	}
	return "handler " + itoa(int(e.Index))
}

// RegisterHandlers implements gex_EP_RegisterHandlers. Entries with a fixed
// Index are registered first; then entries with Index 0, in table order, get the
// highest index still free (255 downward) and Index is updated in the table.
// Fixed indices must be unique across the table and all earlier calls. Either
// every entry is registered or, on error, none.
func (ep *EP) RegisterHandlers(table []AMEntry) error {
	err := ep.registerHandlers(table)
	if err == nil {
		ep.c.releaseHeld(false) // AMs that arrived before their handler (refuse.go)
	}
	return ep.c.report(err)
}

func (ep *EP) registerHandlers(table []AMEntry) error {
	const op = "RegisterHandlers"
	if err := ep.c.checkRestricted(op); err != nil {
		return err
	}
	if ep.caps&EPCapabilityAM == 0 {
		return badArg(op, "endpoint %d was created without GEX_EP_CAPABILITY_AM (its capabilities: %v)", ep.index, ep.caps)
	}
	ep.regMu.Lock()
	defer ep.regMu.Unlock()
	var used [256]bool
	for i := AMIndexBase; i < 256; i++ {
		used[i] = ep.handlers[i].Load() != nil
	}
	free := 0
	for i := AMIndexBase; i < 256; i++ {
		if !used[i] {
			free++
		}
	}
	dontCare := 0
	for i := range table {
		e := &table[i]
		if e.Fn == nil {
			return badArg(op, "table[%d] (%s): Fn is nil", i, e.label())
		}
		if err := checkEntryFlags(e.Flags); err != nil {
			return badArg(op, "table[%d] (%s): %v", i, e.label(), err)
		}
		if e.NArgs < 0 || e.NArgs > MaxArgs {
			return badArg(op, "table[%d] (%s): NArgs %d out of range [0, %d]", i, e.label(), e.NArgs, MaxArgs)
		}
		if e.Index == 0 {
			dontCare++
			continue
		}
		if e.Index < AMIndexBase {
			return badArg(op, "table[%d] (%s): Index %d is below AMIndexBase (%d); use [%d, 255] or 0", i, e.label(), e.Index, AMIndexBase, AMIndexBase)
		}
		if used[e.Index] {
			return badArg(op, "table[%d] (%s): Index %d is already registered", i, e.label(), e.Index)
		}
		used[e.Index] = true
		free--
	}
	if dontCare > free {
		return resourceErr(op, "%d entries with Index 0 but only %d free indices in [%d, 255]", dontCare, free, AMIndexBase)
	}
	// All checks passed: assign and publish.
	next := 255
	for i := range table {
		e := &table[i]
		if e.Index == 0 {
			for used[next] {
				next--
			}
			used[next] = true
			e.Index = AMIndex(next)
		}
		cp := *e
		ep.handlers[e.Index].Store(&cp)
	}
	return nil
}

func checkEntryFlags(f Flags) error {
	cat, rr := f&amCategoryMask, f&amReqRepMask
	if f&^(amCategoryMask|amReqRepMask) != 0 {
		return fmt.Errorf("Flags %v include flags other than GEX_FLAG_AM_*", f&^(amCategoryMask|amReqRepMask))
	}
	if cat != FlagAMShort && cat != FlagAMMedium && cat != FlagAMLong && cat != FlagAMMedLong {
		return fmt.Errorf("Flags %v must include exactly one of GEX_FLAG_AM_SHORT, _MEDIUM, _LONG, _MEDLONG", f)
	}
	if rr == 0 {
		return fmt.Errorf("Flags %v must include GEX_FLAG_AM_REQUEST, _REPLY or _REQREP", f)
	}
	return nil
}

// Token names the AM being handled (gex_Token_t). It is valid only inside the
// handler it was passed to.
type Token struct {
	c       *Client
	ep      *EP    // the receiving endpoint
	srcEP   uint16 // the sending endpoint's index
	src     int
	entry   *AMEntry
	dest    Addr
	g       uintptr
	isReq   bool
	isLong  bool
	live    bool
	replied bool
}

// TI selects Token.Info fields (gex_TI_t).
type TI uint32

// Token info selectors. All are supported on every conduit.
const (
	TISrcRank TI = 1 << iota // GEX_TI_SRCRANK
	TIEP                     // GEX_TI_EP
	TIEntry                  // GEX_TI_ENTRY
	TIIsReq                  // GEX_TI_IS_REQ
	TIIsLong                 // GEX_TI_IS_LONG
	TIAll     = TISrcRank | TIEP | TIEntry | TIIsReq | TIIsLong
)

// TokenInfo is gex_Token_Info_t.
type TokenInfo struct {
	SrcRank Rank     // job rank of the sender
	EP      *EP      // receiving endpoint
	Entry   *AMEntry // the running handler's entry (library-owned: do not modify)
	IsReq   bool
	IsLong  bool
}

// Info implements gex_Token_Info. Every field is always filled in; the
// returned mask is TIAll.
func (t *Token) Info(mask TI) (TokenInfo, TI) {
	return TokenInfo{SrcRank: Rank(t.src), EP: t.ep, Entry: t.entry, IsReq: t.isReq, IsLong: t.isLong}, TIAll
}

// Addr is, for a Long, the destination address the initiator passed (also when
// the payload is empty), and 0 otherwise.
func (t *Token) Addr() Addr { return t.dest }

// deliver is the conduit's Delivery: it re-checks every incoming AM against
// the handler table and the segment bounds (nothing a peer sends may make this
// rank write outside its segment or crash), then runs the handler.
func (c *Client) deliver(in *conduit.Incoming) {
	c.deliverWith(in, nil)
}

// FlagAMShort and FlagAMMedium are the conduit's Short and Medium
// categories shifted left by 32 (deliverWith's fast test; this fails to
// compile if either moves).
const _ = -uint(FlagAMShort^Flags(conduit.Short)<<32) - uint(FlagAMMedium^Flags(conduit.Medium)<<32)

// deliverWith is deliver; a non-nil t is the token and context of AMs
// released from the hold (refuse.go).
//
// The common AM, a Short or Medium from a conduit to the primordial
// endpoint whose handler is registered and accepts it, takes the first
// branch: the same checks in one condition, and the handler runs. Anything
// else (another endpoint, a Long, a held AM, an unregistered handler or any
// mismatch, which the checks below hold or refuse with their reasons) goes
// the long way.
func (c *Client) deliverWith(in *conduit.Incoming, held *Token) {
	if held == nil && in.EP == 0 && (in.Cat == conduit.Short || in.Cat == conduit.Medium) {
		e := c.ep.handlers[in.Handler].Load()
		// The entry must have the category's flag (FlagAMShort or
		// FlagAMMedium: Cat << 32) and want (FlagAMRequest or FlagAMReply).
		want, q, t := FlagAMReply, 1, &c.repTok
		if in.IsReq {
			want, q, t = FlagAMRequest, 0, &c.reqTok
		}
		if e != nil && e.Flags&(Flags(in.Cat)<<32) != 0 && e.Flags&want != 0 && (e.NArgs == anyNArgs || int(in.NArgs) == e.NArgs) {
			payload := in.Payload
			if in.Cat == conduit.Short {
				payload = nil
			}
			g := in.G
			if g == 0 {
				g = gctx.ID()
			}
			t.ep = c.ep
			c.run(in, e, payload, t, q, g)
			return
		}
	}
	ep := c.ep
	if in.EP != 0 {
		// Memory Kinds, "gex_EP_Create": the destination endpoint index is
		// checked like any other field of the AM.
		if ep = c.epAt(in.EP); ep == nil {
			c.reject(in, "endpoint index %d does not exist in this process (%d endpoint(s); sent by endpoint %d of rank %d)", in.EP, len(*c.eps.all.Load()), in.SrcEP, in.Src)
			return
		}
		if in.Placed {
			c.reject(in, "a Long to endpoint %d arrived placed (only the primordial segment is placed by the conduit)", in.EP)
			return
		}
	}
	e := ep.handlers[in.Handler].Load()
	if e == nil {
		if in.Handler >= uint8(AMIndexBase) && c.hold(in) {
			// It may have arrived before its RegisterHandlers (refuse.go);
			// if that ran meanwhile, it missed this AM: deliver it now.
			if ep.handlers[in.Handler].Load() != nil {
				c.releaseHeld(false)
			}
			return
		}
		c.reject(in, "handler index %d is not registered", in.Handler)
		return
	}
	var want Flags
	switch in.Cat {
	case conduit.Short:
		want = FlagAMShort
	case conduit.Medium:
		want = FlagAMMedium
	case conduit.Long:
		want = FlagAMLong
	}
	if e.Flags&want == 0 {
		c.reject(in, "%s was registered with %v but arrived as a %v", e.label(), e.Flags&amCategoryMask, in.Cat)
		return
	}
	if in.IsReq && e.Flags&FlagAMRequest == 0 || !in.IsReq && e.Flags&FlagAMReply == 0 {
		c.reject(in, "%s was registered with %v but arrived as a %s", e.label(), e.Flags&amReqRepMask, reqRepWord(in.IsReq))
		return
	}
	if e.NArgs != anyNArgs && int(in.NArgs) != e.NArgs {
		c.reject(in, "%s takes %d args but the AM carries %d", e.label(), e.NArgs, in.NArgs)
		return
	}
	payload := in.Payload
	if in.Cat == conduit.Short {
		payload = nil
	} else if in.Cat == conduit.Long && len(in.Payload) > 0 {
		seg := ep.seg.Load()
		if seg == nil {
			c.reject(in, "Long of %d bytes to %#x but endpoint %d has no bound segment", len(in.Payload), in.Dest, ep.index)
			return
		}
		off, ok := seg.offsetOf(Addr(in.Dest), uint64(len(in.Payload)))
		if !ok {
			c.reject(in, "Long destination [%#x, +%d) is outside the segment [%#x, +%d)", in.Dest, len(in.Payload), seg.addr, len(seg.mem))
			return
		}
		dst := seg.mem[off : off+uint64(len(in.Payload))]
		if !in.Placed {
			copy(dst, in.Payload)
		}
		payload = dst
	}
	t, q := &c.repTok, 1
	if in.IsReq {
		t, q = &c.reqTok, 0
	}
	if held != nil {
		t, q = held, 2
	}
	t.ep = ep
	g := in.G
	if g == 0 || held != nil {
		g = gctx.ID()
	}
	c.run(in, e, payload, t, q, g)
}

// run runs handler e for in with token t, in handler context q (0 and 1:
// the inbound request and reply queues; 2: AMs released from the hold), on
// goroutine g (the caller: gctx.ID, or what the conduit says it is).
// When the conduit consuming queue q already names this goroutine in
// handlerG[q] (smp: its consumer lock is that word), nothing is stored.
func (c *Client) run(in *conduit.Incoming, e *AMEntry, payload []byte, t *Token, q int, g uintptr) {
	t.src, t.srcEP, t.entry, t.dest, t.g = in.Src, in.SrcEP, e, Addr(in.Dest), g
	t.isReq, t.isLong, t.replied, t.live = in.IsReq, in.Cat == conduit.Long, false, true
	if c.handlerG[q].Load() == g {
		e.Fn(t, payload, in.Args[:in.NArgs])
	} else {
		c.handlerG[q].Store(g)
		e.Fn(t, payload, in.Args[:in.NArgs])
		c.handlerG[q].Store(0)
	}
	t.live = false
}

func reqRepWord(isReq bool) string {
	if isReq {
		return "Request"
	}
	return "Reply"
}

// reject refuses an AM that fails the target's checks (refuse.go): one line
// naming the sender, this rank, the handler and the reason.
func (c *Client) reject(in *conduit.Incoming, format string, args ...any) {
	c.rejected.Add(1)
	c.refuse(fmt.Sprintf("refused an AM %v %s from rank %d to rank %d for handler %d: "+format,
		append([]any{in.Cat, reqRepWord(in.IsReq), in.Src, c.rank, in.Handler}, args...)...))
}

// offsetOf returns the offset of [a, a+n) in s, if it lies inside s.
func (s *Segment) offsetOf(a Addr, n uint64) (uint64, bool) {
	if a < s.addr {
		return 0, false
	}
	off := uint64(a - s.addr)
	size := uint64(len(s.mem))
	if off > size || n > size-off {
		return 0, false
	}
	return off, true
}

// amSpec is one AM injection as the API caller described it.
type amSpec struct {
	op      string
	cat     conduit.Category
	isReq   bool
	dst     int    // job rank
	dstEP   uint16 // destination endpoint index
	srcEP   uint16 // sending endpoint index
	h       AMIndex
	payload []byte
	dest    Addr
	lc      *Event
	flags   Flags
}

// RequestShort implements gex_AM_RequestShort[M]. With FlagImmediate it
// returns ErrNoOp, having initiated nothing, if it would have to wait.
func (tm *TM) RequestShort(rank Rank, h AMIndex, flags Flags, args ...AMArg) error {
	if err := tm.checkRank("RequestShort", rank); err != nil {
		return err
	}
	if c := tm.c; c.smp != nil && !tm.epPath && fixedOK(h, flags, args) && !c.mayBeRestricted() {
		// The common Request through shared memory, after the checks
		// sendAM and inject make (rank, restricted context, handler
		// index, nargs, flags), without an amSpec.
		dst := tm.jobrank(rank)
		if err := c.smp.SendShort(dst, true, uint8(h), 0, 0, args, shortFlags(flags)); err != nil {
			return c.shortErr("RequestShort", err)
		}
		if c.smp.IsRemote(dst) {
			c.watch.progress.Add(1) // through shared memory, SentTraffic counts it (watch.go)
		}
		return nil
	}
	return tm.sendAM(rank, &amSpec{op: "RequestShort", cat: conduit.Short, isReq: true, h: h, flags: flags}, args)
}

// fixedOK reports whether an AM to handler h with flags and args passes
// the initiator's checks of those (buildHeader's, for a Short all of them).
func fixedOK(h AMIndex, flags Flags, args []AMArg) bool {
	return h >= AMIndexBase && len(args) <= MaxArgs && flags&^amInjectAllowed == 0
}

// shortFlags are the conduit's send flags for an AM's flags.
func shortFlags(flags Flags) conduit.SendFlags {
	if flags&FlagImmediate != 0 {
		return conduit.Immediate
	}
	return 0
}

// shortErr is injected's error for a Short or Medium that smp.SendShort or
// SendMedium refused.
func (c *Client) shortErr(op string, err error) error {
	return c.report(c.injected(&amSpec{op: op}, err))
}

// RequestMedium implements gex_AM_RequestMedium[M]. lc is the local completion
// option: nil or EventNow, EventGroup, or a pointer to an Event that receives a
// local-completion event. The payload is copied before RequestMedium returns,
// so local completion is immediate and *lc receives EventInvalid.
func (tm *TM) RequestMedium(rank Rank, h AMIndex, payload []byte, lc *Event, flags Flags, args ...AMArg) error {
	if err := tm.checkRank("RequestMedium", rank); err != nil {
		return err
	}
	if c := tm.c; c.smp != nil && !tm.epPath && fixedOK(h, flags, args) && len(payload) <= smp.MaxMedium && lc != EventDefer && !c.mayBeRestricted() {
		// The common Medium Request through shared memory (in the ring
		// message up to smp.MaxInline bytes, in a pool buffer above),
		// after the checks sendAM and inject make (a peer on this host
		// takes any payload up to smp.MaxMedium, its Limits' MaxMedium:
		// a larger one goes the general way, which words the error),
		// without an amSpec or a conduit.Header.
		if dst := tm.jobrank(rank); !c.smp.IsRemote(dst) {
			if err := c.smp.SendMedium(dst, true, uint8(h), 0, 0, args, payload, shortFlags(flags)); err != nil {
				return c.shortErr("RequestMedium", err)
			}
			if lc != nil && !isLCSentinel(lc) {
				*lc = EventInvalid // payload copied during the call: locally complete
			}
			return nil
		}
	}
	return tm.sendAM(rank, &amSpec{op: "RequestMedium", cat: conduit.Medium, isReq: true, h: h, payload: payload, lc: lc, flags: flags}, args)
}

// RequestLong implements gex_AM_RequestLong[M]: payload is placed at dest in
// the target's bound segment (an owner address, or an offset with
// FlagPeerSegOffset) before the handler runs there. lc as for RequestMedium.
func (tm *TM) RequestLong(rank Rank, h AMIndex, payload []byte, dest Addr, lc *Event, flags Flags, args ...AMArg) error {
	if err := tm.checkRank("RequestLong", rank); err != nil {
		return err
	}
	if c := tm.c; c.smp != nil && !tm.epPath && len(payload) > 0 && fixedOK(h, flags&^FlagPeerSegOffset, args) && lc != EventDefer && !c.mayBeRestricted() {
		// The common Long Request to a mapped peer's segment, after the
		// checks sendAM and inject make (the bounds and the limit by
		// smp.LongView, the overlap here), without an amSpec or a
		// conduit.Header; where any of them fails, the general path
		// below words the error.
		dst := tm.jobrank(rank)
		if view, d := c.longView(dst, dest, flags, len(payload)); view != nil && !overlaps(payload, view) {
			if err := c.smp.SendLong(dst, true, uint8(h), 0, args, payload, view, d, shortFlags(flags)); err != nil {
				return c.shortErr("RequestLong", err)
			}
			if lc != nil && !isLCSentinel(lc) {
				*lc = EventInvalid
			}
			return nil
		}
	}
	return tm.sendAM(rank, &amSpec{op: "RequestLong", cat: conduit.Long, isReq: true, h: h, payload: payload, dest: dest, lc: lc, flags: flags}, args)
}

// longView is smp.Conduit.LongView for a Long of n bytes to dest (an
// offset with FlagPeerSegOffset) in rank dst's primordial segment, and the
// owner address it goes to.
func (c *Client) longView(dst int, dest Addr, flags Flags, n int) ([]byte, uint64) {
	d := uint64(dest)
	if flags&FlagPeerSegOffset != 0 {
		d += c.smp.Segment(dst).Owner
	}
	return c.smp.LongView(dst, d, n), d
}

// ReplyShort implements gex_AM_ReplyShort[M]: permitted once, inside the
// Request handler that received t, and not while holding an HSL.
func (t *Token) ReplyShort(h AMIndex, flags Flags, args ...AMArg) error {
	if t != nil && t.c.smp != nil && fixedOK(h, flags, args) && t.mayReply() && t.g == gctx.ID() {
		// The common Reply through shared memory, after the checks reply
		// (checkReply) and inject make, without an amSpec.
		c := t.c
		if err := c.smp.SendShort(t.src, false, uint8(h), t.srcEP, uint16(t.ep.index), args, shortFlags(flags)); err != nil {
			return c.shortErr("ReplyShort", err)
		}
		t.replied = true
		if c.smp.IsRemote(t.src) {
			c.watch.progress.Add(1)
		}
		return nil
	}
	return t.reply(&amSpec{op: "ReplyShort", cat: conduit.Short, h: h, flags: flags}, args)
}

// mayReply reports, with t.g == gctx.ID() (the caller tests it after),
// whether checkReply certainly passes (false: it may not; ask checkReply):
// t is live, a Request's, not yet replied to, with no Prepare under way and
// no HSL held anywhere in the process.
func (t *Token) mayReply() bool {
	return t.live && t.isReq && !t.replied && uint32(t.c.prepareG.n.Load())|uint32(hslHolders.n.Load()) == 0
}

// ReplyMedium implements gex_AM_ReplyMedium[M]. lc as for RequestMedium, except
// that EventGroup is not permitted.
func (t *Token) ReplyMedium(h AMIndex, payload []byte, lc *Event, flags Flags, args ...AMArg) error {
	if t != nil && t.c.smp != nil && fixedOK(h, flags, args) && len(payload) <= smp.MaxMedium && lc != EventDefer && lc != EventGroup &&
		t.mayReply() && t.g == gctx.ID() && !t.c.smp.IsRemote(t.src) {
		// The common Medium Reply through shared memory, after the checks
		// reply and inject make (as RequestMedium's; epLimits leaves
		// MaxMedium alone for a Reply to another endpoint).
		if err := t.c.smp.SendMedium(t.src, false, uint8(h), t.srcEP, uint16(t.ep.index), args, payload, shortFlags(flags)); err != nil {
			return t.c.shortErr("ReplyMedium", err)
		}
		t.replied = true
		if lc != nil && !isLCSentinel(lc) {
			*lc = EventInvalid
		}
		return nil
	}
	return t.reply(&amSpec{op: "ReplyMedium", cat: conduit.Medium, h: h, payload: payload, lc: lc, flags: flags}, args)
}

// ReplyLong implements gex_AM_ReplyLong[M]. lc as for ReplyMedium.
func (t *Token) ReplyLong(h AMIndex, payload []byte, dest Addr, lc *Event, flags Flags, args ...AMArg) error {
	if t != nil && t.c.smp != nil && t.srcEP == 0 && len(payload) > 0 && fixedOK(h, flags&^FlagPeerSegOffset, args) && lc != EventDefer && lc != EventGroup &&
		t.mayReply() && t.g == gctx.ID() {
		// The common Long Reply to a mapped peer's primordial segment,
		// after the checks reply and inject make (as RequestLong's).
		c := t.c
		if view, d := c.longView(t.src, dest, flags, len(payload)); view != nil && !overlaps(payload, view) {
			if err := c.smp.SendLong(t.src, false, uint8(h), uint16(t.ep.index), args, payload, view, d, shortFlags(flags)); err != nil {
				return c.shortErr("ReplyLong", err)
			}
			t.replied = true
			if lc != nil && !isLCSentinel(lc) {
				*lc = EventInvalid
			}
			return nil
		}
	}
	return t.reply(&amSpec{op: "ReplyLong", cat: conduit.Long, h: h, payload: payload, dest: dest, lc: lc, flags: flags}, args)
}

// checkReply checks that t may send a Reply from the calling goroutine now.
func (t *Token) checkReply(op string) error {
	if t == nil || !t.live || t.g != gctx.ID() {
		return &restrictedError{op: op, why: "outside the AM handler that received the token (Replies are only permitted inside a Request handler)"}
	}
	if !t.isReq {
		return &restrictedError{op: op, why: "in a Reply handler (Replies are only permitted inside a Request handler)"}
	}
	if t.replied {
		return badArg(op, "this Request handler already sent its Reply (at most one per Request)")
	}
	if hslHolders.has(t.g) {
		return &restrictedError{op: op, why: "while holding a handler-safe lock (HSL)"}
	}
	// "Negotiated-payload AM": between a Prepare and its Commit "all
	// communication calls are prohibited" and "Prepare/commit pairs do not
	// nest", so a PrepareReply* must be committed before any other Reply.
	if t.c.prepareG.has(t.g) {
		return &restrictedError{op: op, why: "between an AM Prepare and its Commit"}
	}
	return nil
}

func (t *Token) reply(s *amSpec, args []AMArg) error {
	if err := t.checkReply(s.op); err != nil {
		return t.c.report(err)
	}
	s.dst, s.dstEP, s.srcEP = t.src, t.srcEP, uint16(t.ep.index)
	err := t.c.inject(s, args)
	if err == nil {
		t.replied = true
	}
	return t.c.report(err)
}

// amEPs are the destination and source endpoint indices of an AM Request
// to (tm, rank), after the AM capability check.
func (tm *TM) amEPs(op string, rank Rank) (dstEP, srcEP uint16, err error) {
	if !tm.epPath {
		return 0, 0, nil
	}
	if err := tm.ep.needCap(op, EPCapabilityAM); err != nil {
		return 0, 0, err
	}
	return tm.epOf(rank), uint16(tm.ep.index), nil
}

// sendAM is the Request path: the endpoints of (tm, rank), restricted-context
// check, then inject.
func (tm *TM) sendAM(rank Rank, s *amSpec, args []AMArg) error {
	c := tm.c
	s.dst = tm.jobrank(rank)
	if tm.epPath {
		var err error
		if s.dstEP, s.srcEP, err = tm.amEPs(s.op, rank); err != nil {
			return err
		}
	}
	if err := c.checkRestricted(s.op); err != nil {
		return c.report(err)
	}
	return c.report(c.inject(s, args))
}

// inject validates an AM and hands it to the conduit. It does not allocate on
// success.
func (c *Client) inject(s *amSpec, args []AMArg) error {
	if s.cat == conduit.Short && c.smp != nil && s.h >= AMIndexBase && len(args) <= MaxArgs && s.flags&^amInjectAllowed == 0 {
		// A Short through the smp conduit, checked as buildHeader would
		// (a Short has no payload, lc_opt or limit to check): its fields
		// go straight into the ring message, with no conduit.Header.
		var cflags conduit.SendFlags
		if s.flags&FlagImmediate != 0 {
			cflags = conduit.Immediate
		}
		return c.injected(s, c.smp.SendShort(s.dst, s.isReq, uint8(s.h), s.dstEP, s.srcEP, args, cflags))
	}
	var hdr conduit.Header
	cflags, berr := c.buildHeader(s, len(args), &hdr)
	if berr != nil {
		return berr
	}
	copy(hdr.Args[:], args)
	var err error
	if c.smp != nil {
		err = c.smp.SendRef(s.dst, &hdr, s.payload, cflags) // a direct call: hdr stays on the stack
	} else {
		err = c.cd.Send(s.dst, hdr, s.payload, cflags)
	}
	return c.injected(s, err)
}

// injected finishes inject after the conduit's send returned err.
func (c *Client) injected(s *amSpec, err error) error {
	if err != nil {
		if err == conduit.ErrWouldBlock {
			return ErrNoOp
		}
		return resourceErr(s.op, "%v", err)
	}
	if s.lc != nil && !isLCSentinel(s.lc) {
		*s.lc = EventInvalid // payload copied during the call: locally complete
	}
	if c.smp == nil || c.smp.IsRemote(s.dst) {
		c.watch.progress.Add(1) // through shared memory, SentTraffic counts it (watch.go)
	}
	return nil
}

// buildHeader checks everything about an injection that the initiator can
// check, fills in the conduit header (except the args) and returns the send
// flags.
func (c *Client) buildHeader(s *amSpec, nargs int, hdr *conduit.Header) (conduit.SendFlags, error) {
	if s.h < AMIndexBase {
		return 0, badArg(s.op, "handler index %d is below AMIndexBase (%d): client handlers live in [%d, 255]", s.h, AMIndexBase, AMIndexBase)
	}
	if nargs > MaxArgs {
		return 0, badArg(s.op, "%d handler args exceed MaxArgs (%d)", nargs, MaxArgs)
	}
	allowed := amInjectAllowed
	if s.cat == conduit.Long {
		allowed |= FlagPeerSegOffset
	}
	if bad := s.flags &^ allowed; bad != 0 {
		return 0, badArg(s.op, "flags %v are not valid for AM injection", bad)
	}
	if s.cat != conduit.Short {
		if s.lc == EventDefer {
			return 0, badArg(s.op, "lc_opt EventDefer is not permitted for AMs (use EventNow, EventGroup or an *Event)")
		}
		if s.lc == EventGroup && !s.isReq {
			return 0, badArg(s.op, "lc_opt EventGroup is not permitted for Replies")
		}
	}
	n := len(s.payload)
	var lim conduit.Limits
	if s.cat != conduit.Short { // a Short has no payload limit to look up
		if c.smp != nil {
			lim = c.smp.Limits(s.dst) // a direct call
		} else {
			lim = c.cd.Limits(s.dst)
		}
		if s.dstEP != 0 {
			lim = epLimits(lim, s.dstEP)
		}
	}
	switch s.cat {
	case conduit.Medium:
		if n > lim.MaxMedium {
			return 0, badArg(s.op, "payload of %d bytes exceeds the max Medium payload %d to rank %d", n, lim.MaxMedium, s.dst)
		}
	case conduit.Long:
		if n > lim.MaxLong {
			return 0, badArg(s.op, "payload of %d bytes exceeds the max Long payload %d to rank %d", n, lim.MaxLong, s.dst)
		}
		var seg conduit.SegInfo
		if s.dstEP == 0 {
			seg = c.cd.Segment(s.dst)
		} else {
			seg = c.segOf(s.dst, s.dstEP)
		}
		dest := s.dest
		if s.flags&FlagPeerSegOffset != 0 {
			dest += Addr(seg.Owner)
		}
		if n > 0 && (seg.Size != 0 || s.dstEP == 0) {
			// A non-primordial endpoint's segment that was never published
			// here is checked by the receiver alone.
			if seg.Size == 0 {
				return 0, badArg(s.op, "rank %d has no bound segment for a Long of %d bytes", s.dst, n)
			}
			if dest < Addr(seg.Owner) || uint64(dest-Addr(seg.Owner)) > seg.Size || uint64(n) > seg.Size-uint64(dest-Addr(seg.Owner)) {
				return 0, badArg(s.op, "Long destination [%#x, +%d) is outside rank %d's segment [%#x, +%d)%s", uintptr(dest), n, s.dst, seg.Owner, seg.Size, c.ownSegHint(s.dst, uint64(dest)))
			}
			if seg.Local != nil {
				off := uint64(dest - Addr(seg.Owner))
				if overlaps(s.payload, seg.Local[off:off+uint64(n)]) {
					return 0, badArg(s.op, "Long source and destination overlap (GASNet-EX \"Fixed-payload AM\", NOTE 4)")
				}
			}
		}
		hdr.Dest = uint64(dest)
	}
	hdr.Cat, hdr.IsReq, hdr.Handler, hdr.NArgs = s.cat, s.isReq, uint8(s.h), uint8(nargs)
	hdr.EP, hdr.SrcEP = s.dstEP, s.srcEP
	var cflags conduit.SendFlags
	if s.flags&FlagImmediate != 0 {
		cflags |= conduit.Immediate
	}
	return cflags, nil
}
