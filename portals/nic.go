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
	case opReply:
		ni.recvReply(h, payload)
	default:
		ni.recvRequest(src, h, payload)
	}
}

// emit sends a message from the NIC; to oneself it is processed inline.
func (p *physNI) emit(dst ptlnet.PhysID, hdr, payload []byte) {
	if dst == p.self {
		p.recvLocked(ptlnet.Peer{ID: p.self, UID: uint32(p.uid)}, hdr, payload)
		return
	}
	p.net.Send(dst, hdr, payload) // a lost peer has no one left to tell
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
		r, ok := ni.rankOf[src.ID]
		if !ok {
			ni.sr[SRDropCount].Add(1) // not in this NI's map: no rank to report
			return
		}
		init.Rank = r
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
		ev := Event{Start: e.slice(off, ml), UserPtr: e.userPtr, RLength: rlen, MLength: ml, RemoteOffset: h.roff(),
			UID: UID(src.UID), Initiator: init, Type: targetKinds[op], List: e.list, PTIndex: idx, NIFail: NIOK}
		if ni.matching {
			ev.MatchBits = h.bits()
		}
		if op != opGet {
			ev.HdrData = h.hdrData()
		}
		if atomicOp {
			ev.AtomicOp, ev.AtomicType = h.aop(), h.dt()
		}
		pt.eq.post(&ev)
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
