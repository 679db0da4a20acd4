package portals

import "github.com/gexgo/gexgo/internal/ptlnet"

// This file is the software NIC: the target side of every operation and the initiator side
// of acks and replies (Portals 4.3 §2.5, §4.2.2). It runs in the transport's progress
// goroutine (handleLocked, for runs of shared-memory messages; handle, for TCP ones), in Poll
// calls made by waits, and inline for messages to oneself, always with the physical NI's
// lock held, so a target that never calls Portals again after setting
// up its entries still receives puts, serves gets and applies atomics.

// handle is the ptlnet.Handler of the physical NI.
func (p *physNI) handle(src ptlnet.Peer, hdr, payload []byte) {
	p.mu.Lock()
	if !p.closed {
		p.recvLocked(src, hdr, payload)
	}
	p.unlockWake()
}

// handleLocked is the ptlnet.Batch handler: shared-memory messages come in runs, the NI lock
// taken once per run (Batch.Begin, Batch.End) rather than once per message.
func (p *physNI) handleLocked(src ptlnet.Peer, hdr, payload []byte) {
	if !p.closed {
		p.recvLocked(src, hdr, payload)
	}
}

// recvLocked processes one message. Nothing in hdr or payload is trusted before
// wireHdr.check; a message that fails it is dropped and counted (PTL_SR_MALFORMED of the
// logical NI it names, or the physical NI's count when it names none).
func (p *physNI) recvLocked(src ptlnet.Peer, hdr, payload []byte) {
	if len(hdr) == shortPutLen && expandShortPut(&p.rxHdr, hdr, len(payload)) {
		hdr = p.rxHdr[:]
	}
	h := wireHdr(hdr)
	var ni *logicalNI
	if len(h) > 2 && h[2] <= 3 {
		ni = p.nis[h[2]]
	}
	if ni == nil {
		p.unknown++
		return
	}
	if !h.check(payload) {
		ni.sr[SRMalformed].Add(1)
		return
	}
	switch h.op() {
	case opAck:
		ni.recvAck(h)
	case opCTAcks:
		ni.recvCTAcks(h)
	case opReply:
		ni.recvReply(h, payload)
	default:
		ni.recvRequest(src, h, payload)
	}
}

// emit sends a message from the NIC; to oneself it is processed inline. Coalesced counting
// acks not yet sent go first, so every peer sees the NIC's messages in the order made.
func (p *physNI) emit(dst ptlnet.PhysID, hdr, payload []byte) {
	if p.ctAcks.n() != 0 {
		p.flushCTAcks()
	}
	if dst == p.self {
		p.recvLocked(ptlnet.Peer{ID: p.self, UID: uint32(p.uid)}, hdr, payload)
		return
	}
	p.net.SendNoWait(dst, hdr, payload) // a lost peer has no one left to tell
}

// Counting acks (PTL_CT_ACK_REQ) only add to the initiator MD's counting event (§3.15.1:
// no full event, a success adds 1, or the manipulated length with PTL_MD_EVENT_CT_BYTES; a
// failure adds 1 to failure). Within a Batch run the NIC therefore sends consecutive ones
// to the same MD as one opCTAcks message carrying the successes, their bytes and the
// failures: a counter may rise by several at once, as it may whenever acks arrive together,
// and nothing else the initiator observes changes. The run is sent before any other
// message of the NIC (emit) and at the end of the run (batchEnd), so acks, full acks and
// replies to a peer keep their order. Outside a run (TCP messages, oneself) acks go singly.
type ctAckRun struct {
	dst             ptlnet.PhysID
	ni              byte
	md              MDHandle
	ok, fail, bytes uint64
}

func (r *ctAckRun) n() uint64 { return r.ok + r.fail }

// batchBegin and batchEnd are the ptlnet.Batch bracket: the NI lock for the whole run, and
// the coalesced counting acks sent before it is released.
func (p *physNI) batchBegin() {
	p.mu.Lock()
	p.batching = true
}

func (p *physNI) batchEnd() {
	p.batching = false
	if p.ctAcks.n() != 0 {
		p.flushCTAcks()
	}
	p.unlockWake()
}

// queueCTAck adds the counting ack of request h (result fail, manipulated length ml) to the
// run, sending the run first if it is for another peer, NI or MD.
func (p *physNI) queueCTAck(dst ptlnet.PhysID, h wireHdr, fail NIFail, ml uint64) {
	r := &p.ctAcks
	if r.n() != 0 && (r.dst != dst || r.ni != h[2] || r.md != h.md() || r.n() >= maxCTAcks) {
		p.flushCTAcks()
	}
	r.dst, r.ni, r.md = dst, h[2], h.md()
	if fail != NIOK {
		r.fail++
	} else {
		r.ok++
		r.bytes += ml
	}
}

func (p *physNI) flushCTAcks() {
	r := &p.ctAcks
	h := wireHdr(p.ackHdr[:])
	h.ctAcks(r.ni, r.md, r.ok, r.fail, r.bytes)
	dst := r.dst
	*r = ctAckRun{}
	p.net.SendNoWait(dst, h, nil) // a lost peer has no one left to tell
}

// recvCTAcks completes the counting acks of an opCTAcks message, as recvAck would one by one.
func (ni *logicalNI) recvCTAcks(h wireHdr) {
	ok, fail, bytes := h.ackCounts()
	m := ni.mdFor(h.md())
	if m == nil {
		ni.sr[SRDropCount].Add(int64(ok + fail))
		return
	}
	if m.opts&MDEventCTAck != 0 {
		if m.opts&MDEventCTBytes == 0 {
			bytes = ok
		}
		m.ct.add(bytes, fail)
	}
}

// recvAck completes an ack at the initiator (§3.13.1 PTL_EVENT_ACK, §3.15.1). Acks bypass
// matching and permissions; one for an MD that is gone is dropped and counted (§4.2.2).
func (ni *logicalNI) recvAck(h wireHdr) {
	m := ni.mdFor(h.md())
	if m == nil {
		ni.sr[SRDropCount].Add(1)
		return
	}
	fail, ml := h.fail(), h.mlength()
	if h.ackReq() == AckReqFull && m.eq != nil && !(fail == NIOK && m.opts&MDEventSuccessDisable != 0) {
		m.eq.post(&Event{Type: EventAck, UserPtr: h.userPtr(), MLength: ml, RemoteOffset: h.roff(), List: h.list(), NIFail: fail})
	}
	if m.opts&MDEventCTAck != 0 {
		if h.ackReq() == OCAckReq && fail == NIOK {
			m.ct.add(1, 0) // §3.15.1: PTL_OC_ACK_REQ does not count bytes
		} else {
			m.countSuccess(fail, ml)
		}
	}
}

func (ni *logicalNI) mdFor(h MDHandle) *mdObj {
	if Handle(h).iface() != ni.p.iface {
		return nil
	}
	return ni.md(h)
}

// recvReply places reply data in the MD (every MD accepts and truncates replies, §4.2.2)
// and posts PTL_EVENT_REPLY.
func (ni *logicalNI) recvReply(h wireHdr, payload []byte) {
	m := ni.mdFor(h.md())
	if m == nil || m.gets == 0 {
		ni.sr[SRDropCount].Add(1)
		return
	}
	off := h.localOff()
	if off < m.length {
		n := min(uint64(len(payload)), m.length-off)
		m.write(off, payload[:n])
	}
	m.replyDone(h.userPtr(), h.roff(), h.mlength(), h.list(), h.fail())
}

// respond sends the ack (put, atomic) or reply (get, fetch, swap) of a request; with
// NoAckReq a put or atomic gets none.
func (ni *logicalNI) respond(src ptlnet.Peer, h wireHdr, fail NIFail, list List, off, ml uint64, data []byte) {
	p := ni.p
	op := byte(opReply)
	if h.op() == opPut || h.op() == opAtomic {
		if h.ackReq() == NoAckReq {
			return
		}
		if h.ackReq() == OCAckReq && (fail == NIPermViolation || fail == NIOpViolation) {
			// §3.15.1: for PTL_OC_ACK_REQ a permission violation is not an operational
			// failure: the operation completed at the target.
			fail = NIOK
		}
		if h.ackReq() == CTAckReq && p.batching && src.ID != p.self {
			if fail != NIOK {
				ml = 0
			}
			p.queueCTAck(src.ID, h, fail, ml)
			return
		}
		op, data = opAck, nil
	}
	if fail != NIOK {
		ml, data = 0, nil
	}
	r := wireHdr(p.txHdr[:])
	r.response(op, h, list, fail, off, ml)
	p.emit(src.ID, r, data)
}

// dropped handles a request dropped for want of a matching entry or of unexpected-header
// space on a PT without flow control (§2.8, §3.13.3): counted, and no ack or reply at all;
// except that PTL_OC_ACK_REQ reports completion (docs/portals.md).
func (ni *logicalNI) dropped(src ptlnet.Peer, h wireHdr) {
	ni.sr[SRDropCount].Add(1)
	if h.op() == opPut || h.op() == opAtomic {
		if h.ackReq() == OCAckReq {
			ni.respond(src, h, NIOK, PriorityList, 0, 0, nil)
		}
	}
}

// flowControl disables the PT (§2.8, §3.13.5) and posts PTL_EVENT_PT_DISABLED, unless the
// entry that caused it suppresses the event (a no-match always posts it).
func (ni *logicalNI) flowControl(pt *ptEntry, idx PTIndex, e *entry) {
	pt.enabled = false
	if e == nil || e.opts&EventFlowCtrlDisable == 0 {
		pt.eq.post(&Event{Type: EventPTDisabled, PTIndex: idx, NIFail: NIOK})
	}
}

// needPerm is the entry permission a request needs (§3.11.1, §3.12.1): put and atomic need
// OP_PUT, get OP_GET, fetching atomics and swaps both.
func needPerm(op byte) EntryOptions {
	switch op {
	case opGet:
		return OpGet
	case opFetch, opSwap:
		return OpPut | OpGet
	}
	return OpPut
}

var targetKinds = [...]EventKind{opPut: EventPut, opGet: EventGet, opAtomic: EventAtomic, opFetch: EventFetchAtomic, opSwap: EventFetchAtomic}

// recvRequest is address translation, matching, access control and delivery (§4.2.2).
func (ni *logicalNI) recvRequest(src ptlnet.Peer, h wireHdr, payload []byte) {
	op := h.op()
	var init ProcessID
	if ni.logical {
		if ni.mapping == nil {
			ni.holdEarly(src, h, payload)
			return
		}
		if ni.lastOK && src.ID == ni.lastSrc {
			init.Rank = ni.lastRank
		} else {
			r, ok := ni.rankOf[src.ID]
			if !ok {
				ni.sr[SRDropCount].Add(1) // not in this NI's map: no rank to report
				return
			}
			init.Rank = r
			ni.lastSrc, ni.lastRank, ni.lastOK = src.ID, r, true
		}
	} else {
		init.NID, init.PID = NID(src.ID.NID), PID(src.ID.PID)
	}
	idx := h.pt()
	if int64(idx) > int64(ni.lim.MaxPTIndex) || !ni.pts[idx].alloc {
		ni.sr[SRDropCount].Add(1)
		ni.respond(src, h, NIDropped, PriorityList, 0, 0, nil)
		return
	}
	pt := &ni.pts[idx]
	if !pt.enabled {
		ni.sr[SRDropCount].Add(1)
		ni.respond(src, h, NIPTDisabled, PriorityList, 0, 0, nil)
		return
	}
	rlen := h.length()
	if rlen > ni.lim.MaxMsgSize || (op == opAtomic && rlen > ni.lim.MaxAtomicSize) ||
		((op == opFetch || op == opSwap) && rlen > ni.lim.MaxFetchAtomicSize) {
		ni.sr[SRDropCount].Add(1)
		ni.respond(src, h, NIDropped, PriorityList, 0, 0, nil)
		return
	}
	bits, roff := h.bits(), h.roff()
	var e *entry
	for l := range pt.lists {
		for x := pt.lists[l].head; x != nil; x = x.next {
			if x.matches(bits, init, rlen, roff) {
				e = x
				break
			}
		}
		if e != nil {
			break
		}
	}
	if e == nil {
		if pt.opts&PTFlowCtrl != 0 {
			ni.flowControl(pt, idx, nil)
			ni.sr[SRDropCount].Add(1)
			ni.respond(src, h, NIPTDisabled, PriorityList, 0, 0, nil)
			return
		}
		ni.dropped(src, h)
		return
	}
	// §2.5.2: permissions are checked after matching; a failure drops the message without
	// changing the list, and matching does not go on to the next entry.
	if e.uid != UIDAny && e.uid != UID(src.UID) {
		ni.sr[SRPermissionViolations].Add(1)
		ni.respond(src, h, NIPermViolation, e.list, 0, 0, nil)
		return
	}
	if need := needPerm(op); e.opts&need != need {
		ni.sr[SROperationViolations].Add(1)
		ni.respond(src, h, NIOpViolation, e.list, 0, 0, nil)
		return
	}
	wantEvent := pt.eq != nil && e.opts&(EventCommDisable|EventSuccessDisable) == 0
	if pt.opts&PTFlowCtrl != 0 && wantEvent && pt.eq.full() {
		ni.flowControl(pt, idx, e)
		ni.sr[SRDropCount].Add(1)
		ni.respond(src, h, NIPTDisabled, e.list, 0, 0, nil)
		return
	}
	keepHdr := e.list == OverflowList && e.opts&UnexpectedHdrDisable == 0
	if keepHdr && ni.nUH >= ni.lim.MaxUnexpectedHeaders {
		if pt.opts&PTFlowCtrl != 0 {
			ni.flowControl(pt, idx, e)
			ni.sr[SRDropCount].Add(1)
			ni.respond(src, h, NIPTDisabled, e.list, 0, 0, nil)
			return
		}
		ni.dropped(src, h)
		return
	}
	ni.deliver(src, h, payload, pt, idx, e, init, wantEvent, keepHdr)
}

// deliver applies an accepted request to entry e (§2.5.1, §3.15): offsets and truncation,
// data placement, atomics, the target event and count, the unexpected header of an overflow
// delivery, the ack or reply, and auto-unlink.
func (ni *logicalNI) deliver(src ptlnet.Peer, h wireHdr, payload []byte, pt *ptEntry, idx PTIndex, e *entry,
	init ProcessID, wantEvent, keepHdr bool) {
	p := ni.p
	op, rlen := h.op(), h.length()
	off := h.roff()
	if e.opts&ManageLocal != 0 {
		off = e.localOff
	}
	ml := min(rlen, e.avail(off))
	atomicOp := op == opAtomic || op == opFetch || op == opSwap
	if atomicOp {
		ml -= ml % uint64(h.dt().Size())
	}
	overflow := e.list == OverflowList
	var data []byte
	switch op {
	case opPut:
		e.write(off, payload[:ml])
	case opGet:
		data = e.read(off, ml, &p.scratch)
	case opAtomic:
		if overflow {
			e.write(off, payload[:ml]) // §4.4: not applied; the user applies it from the event
		} else {
			ni.applyOn(e, off, h, payload[:ml], nil, nil)
		}
	case opFetch, opSwap:
		var operand []byte
		if op == opSwap {
			operand = payload[rlen:]
		}
		data = grow(&p.scratch, ml)
		if overflow {
			e.gatherTo(off, data)
			e.write(off, payload[:ml])
		} else {
			ni.applyOn(e, off, h, payload[:ml], operand, data)
		}
	}
	if e.opts&ManageLocal != 0 {
		e.localOff = off + ml
	}
	if wantEvent {
		if ev := pt.eq.slot(); ev != nil {
			// Filled in place, every field (§3.13.1: those not defined for the event
			// kind are 0), then published by commit.
			ev.Start, ev.UserPtr, ev.RLength, ev.MLength, ev.RemoteOffset = e.slice(off, ml), e.userPtr, rlen, ml, h.roff()
			ev.UID, ev.Initiator, ev.Type, ev.List, ev.PTIndex, ev.NIFail = UID(src.UID), init, targetKinds[op], e.list, idx, NIOK
			ev.MatchBits, ev.HdrData, ev.AtomicOp, ev.AtomicType = 0, 0, 0, 0
			if ni.matching {
				ev.MatchBits = h.bits()
			}
			if op != opGet {
				ev.HdrData = h.hdrData()
			}
			if atomicOp {
				ev.AtomicOp, ev.AtomicType = h.aop(), h.dt()
			}
			pt.eq.commit()
		}
	}
	if e.opts&EventCTComm != 0 {
		e.ct.add(e.ctAmount(ml), 0)
	}
	if keepHdr {
		u := ni.uhFree
		if u != nil {
			ni.uhFree = u.next
		} else {
			u = new(uhdr)
		}
		*u = uhdr{op: op, initiator: init, uid: UID(src.UID), rlength: rlen, mlength: ml, roff: h.roff(),
			hdrData: h.hdrData(), ent: e, start: e.slice(off, ml)}
		if ni.matching {
			u.bits = h.bits()
		}
		if atomicOp {
			u.aop, u.dt = h.aop(), h.dt()
		}
		e.uhRefs++
		pt.uh.push(u)
		ni.nUH++
	}
	ni.respond(src, h, NIOK, e.list, off, ml, data)
	if e.opts&UseOnce != 0 || (e.opts&ManageLocal != 0 && e.minFree > 0 && e.avail(e.localOff) < e.minFree) {
		ni.autoUnlink(pt, e)
	}
}

func (r *region) gatherTo(off uint64, b []byte) {
	if len(b) == 0 {
		return
	}
	if r.iov == nil {
		copy(b, r.buf[off:])
		return
	}
	r.gather(off, b)
}

// applyOn applies an atomic to n bytes of e at off; iovec entries are gathered, updated and
// scattered back (all under the NI lock, so still atomic per item).
func (ni *logicalNI) applyOn(e *entry, off uint64, h wireHdr, src, operand, old []byte) {
	n := uint64(len(src))
	if n == 0 {
		return
	}
	if e.iov == nil {
		applyAtomic(h.aop(), h.dt(), e.buf[off:off+n], src, operand, old)
		return
	}
	t := grow(&ni.atomicTmp, n)
	e.gather(off, t)
	applyAtomic(h.aop(), h.dt(), t, src, operand, old)
	e.write(off, t)
}

// Requests that reach a logical NI before its PtlSetMap are held (copied) and processed when
// the map arrives: peers that learned the map first may send before this process installed
// it. At most maxEarly messages or maxEarlyBytes are held; beyond that they are dropped and
// counted.
const (
	maxEarly      = 4096
	maxEarlyBytes = 64 << 20
)

type earlyMsg struct {
	src          ptlnet.Peer
	hdr, payload []byte
}

func (ni *logicalNI) holdEarly(src ptlnet.Peer, h wireHdr, payload []byte) {
	if len(ni.early) >= maxEarly || ni.earlyBytes+len(payload) > maxEarlyBytes {
		ni.sr[SRDropCount].Add(1)
		return
	}
	ni.earlyBytes += len(payload)
	ni.early = append(ni.early, earlyMsg{src, append([]byte(nil), h...), append([]byte(nil), payload...)})
}

// replayEarly processes the held requests once the map is set; with p.mu held.
func (ni *logicalNI) replayEarly() {
	msgs := ni.early
	ni.early, ni.earlyBytes = nil, 0
	for _, m := range msgs {
		ni.recvRequest(m.src, wireHdr(m.hdr), m.payload)
	}
}
