package portals

import (
	"strconv"
	"sync"

	"github.com/gexgo/gexgo/internal/ptlnet"
)

// hdrPool holds request headers of the initiator path, which builds them without the NI
// lock held across the transport's Send.
var hdrPool = sync.Pool{New: func() any { return new([hdrLen]byte) }}

// bufPool holds staging buffers for iovec MDs and Swap's data+operand payloads.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// Put implements PtlPut (Portals 4.3 §3.15.2): length bytes of md from localOffset to the
// target's portal table entry pt. Events: PTL_EVENT_SEND, and PTL_EVENT_ACK (or a counted
// ack) as ack asks. Errors found at the target come back in the ACK's ni_fail_type.
func Put(md MDHandle, localOffset, length uint64, ack AckReq, target ProcessID, pt PTIndex,
	matchBits MatchBits, remoteOffset, userPtr, hdrData uint64) error {
	return initiate(&opArgs{op: opPut, fn: "PtlPut", putMD: md, putOff: localOffset, length: length, ack: ack,
		target: target, pt: pt, bits: matchBits, roff: remoteOffset, userPtr: userPtr, hdrData: hdrData})
}

// Get implements PtlGet (Portals 4.3 §3.15.3): length bytes from the target into md at
// localOffset; PTL_EVENT_REPLY when they are there.
func Get(md MDHandle, localOffset, length uint64, target ProcessID, pt PTIndex, matchBits MatchBits,
	remoteOffset, userPtr uint64) error {
	return initiate(&opArgs{op: opGet, fn: "PtlGet", getMD: md, getOff: localOffset, length: length,
		target: target, pt: pt, bits: matchBits, roff: remoteOffset, userPtr: userPtr})
}

// Atomic implements PtlAtomic (Portals 4.3 §3.15.5): target ← op(target, md data) item by
// item; length ≤ max_atomic_size and a multiple of the datatype's size.
func Atomic(md MDHandle, localOffset, length uint64, ack AckReq, target ProcessID, pt PTIndex,
	matchBits MatchBits, remoteOffset, userPtr, hdrData uint64, op AtomicOp, dt Datatype) error {
	return initiate(&opArgs{op: opAtomic, fn: "PtlAtomic", putMD: md, putOff: localOffset, length: length, ack: ack,
		target: target, pt: pt, bits: matchBits, roff: remoteOffset, userPtr: userPtr, hdrData: hdrData, aop: op, dt: dt})
}

// FetchAtomic implements PtlFetchAtomic (Portals 4.3 §3.15.6): as Atomic, and the target's
// previous contents come back into getMD (PTL_EVENT_REPLY); length ≤ max_fetch_atomic_size.
func FetchAtomic(getMD MDHandle, localGetOffset uint64, putMD MDHandle, localPutOffset, length uint64,
	target ProcessID, pt PTIndex, matchBits MatchBits, remoteOffset, userPtr, hdrData uint64, op AtomicOp, dt Datatype) error {
	return initiate(&opArgs{op: opFetch, fn: "PtlFetchAtomic", getMD: getMD, getOff: localGetOffset, putMD: putMD,
		putOff: localPutOffset, length: length, target: target, pt: pt, bits: matchBits, roff: remoteOffset,
		userPtr: userPtr, hdrData: hdrData, aop: op, dt: dt})
}

// Swap implements PtlSwap (Portals 4.3 §3.15.7): PTL_SWAP, the conditional swaps and
// PTL_MSWAP, with operand (one item: the comparand or the mask); the conditional swaps and
// MSWAP take exactly one item.
func Swap(getMD MDHandle, localGetOffset uint64, putMD MDHandle, localPutOffset, length uint64,
	target ProcessID, pt PTIndex, matchBits MatchBits, remoteOffset, userPtr, hdrData uint64, operand []byte,
	op AtomicOp, dt Datatype) error {
	return initiate(&opArgs{op: opSwap, fn: "PtlSwap", getMD: getMD, getOff: localGetOffset, putMD: putMD,
		putOff: localPutOffset, length: length, target: target, pt: pt, bits: matchBits, roff: remoteOffset,
		userPtr: userPtr, hdrData: hdrData, aop: op, dt: dt, operand: operand})
}

// AtomicSync implements PtlAtomicSync (Portals 4.3 §3.15.8): when it returns, the results of
// every Portals atomic already applied at this process are visible to the host. Atomics are
// applied under each NI's lock, so taking and releasing the locks is the barrier.
func AtomicSync() error {
	if !initialized() {
		return errf(ErrNoInit, "PtlAtomicSync", "")
	}
	for i := range lib.phys {
		if p := lib.phys[i].Load(); p != nil {
			p.mu.Lock()
			p.mu.Unlock() //nolint:staticcheck // the lock is the memory barrier
		}
	}
	return nil
}

type opArgs struct {
	op             byte
	fn             string
	putMD, getMD   MDHandle
	putOff, getOff uint64
	length         uint64
	ack            AckReq
	target         ProcessID
	pt             PTIndex
	bits           MatchBits
	roff           uint64
	userPtr        uint64
	hdrData        uint64
	aop            AtomicOp
	dt             Datatype
	operand        []byte
}

func mdBound(m *mdObj, off, length uint64) bool { return off <= m.length && length <= m.length-off }

func argErr(fn, what string) error { return errf(ErrArgInvalid, fn, what) }

// initiate is the initiator half of every data movement call (§3.15): it checks the
// arguments, builds the request and hands it to the transport (or, for this process's own
// physical ID, to the NIC directly), then posts PTL_EVENT_SEND.
func initiate(a *opArgs) error {
	if quietPut(a) {
		return nil
	}
	fn := a.fn
	if !initialized() {
		return errf(ErrNoInit, fn, "")
	}
	hasPut := a.op != opGet
	hasGet := a.op == opGet || a.op == opFetch || a.op == opSwap
	first := Handle(a.putMD)
	arg := "md_handle"
	if !hasPut {
		first = Handle(a.getMD)
	} else if hasGet {
		arg = "put_md_handle"
	}
	ni, p, err := lockObj(first, kindMD, fn, arg)
	if err != nil {
		return err
	}
	var pm, gm *mdObj
	if hasPut {
		if pm = ni.md(a.putMD); pm == nil {
			p.mu.Unlock()
			return argErr(fn, arg+" names a released MD")
		}
	}
	if hasGet {
		if Handle(a.getMD).iface() != p.iface || Handle(a.getMD).niIndex() != ni.idx {
			p.mu.Unlock()
			return argErr(fn, "get_md_handle belongs to another NI than put_md_handle")
		}
		if gm = ni.md(a.getMD); gm == nil {
			p.mu.Unlock()
			return argErr(fn, "get_md_handle names a released MD")
		}
	}
	if msg := ni.checkOp(a, pm, gm); msg != "" {
		p.mu.Unlock()
		return argErr(fn, msg)
	}
	dst, ok := ni.resolve(a.target)
	if !ok {
		p.mu.Unlock()
		if ni.mapping == nil {
			return argErr(fn, "the logical NI has no map (PtlSetMap)")
		}
		return argErr(fn, "target_id rank "+strconv.FormatUint(uint64(a.target.Rank), 10)+" is not below the map size "+strconv.Itoa(len(ni.mapping)))
	}
	hb := hdrPool.Get().(*[hdrLen]byte)
	h := wireHdr(hb[:])
	replyMD, localOff := a.putMD, uint64(0)
	if hasGet {
		replyMD, localOff = a.getMD, a.getOff
	}
	h.request(a.op, ni.idx, a.ack, a.aop, a.dt, a.pt, a.bits, a.roff, a.length, replyMD, a.userPtr, a.hdrData, localOff)
	// A put to another process whose SEND posts no event and no count is quiet: it ends
	// without the lock and is not counted as pending (its payload is consumed before Put
	// returns, and nothing of the MD is touched after that but through its generation-
	// checked handle).
	quiet := dst != p.self && gm == nil && pm.eq == nil && pm.opts&MDEventCTSend == 0
	var payload []byte
	var staged *[]byte
	if hasPut {
		if pm.iov == nil && a.op != opSwap {
			payload = pm.buf[a.putOff : a.putOff+a.length]
		} else {
			staged = bufPool.Get().(*[]byte)
			n := a.length
			if a.op == opSwap {
				n += uint64(a.dt.Size())
			}
			payload = grow(staged, n)
			if pm.iov == nil {
				copy(payload, pm.buf[a.putOff:a.putOff+a.length])
			} else {
				pm.gather(a.putOff, payload[:a.length])
			}
			if a.op == opSwap {
				copy(payload[a.length:], a.operand)
			}
		}
		if !quiet {
			pm.sends.Add(1)
		}
	}
	if hasGet {
		gm.gets++
	}
	var sendErr error
	if dst == p.self {
		// Own physical ID: the NIC runs inline. SEND first: the payload is consumed before
		// this call returns, and nobody can see the event before the lock is released.
		if pm != nil {
			pm.sendDone(a, nil)
		}
		p.recvLocked(ptlnet.Peer{ID: p.self, UID: uint32(p.uid)}, h, payload)
	} else {
		p.mu.Unlock()
		sendErr = p.net.Send(dst, h, payload)
		if quiet { // its SEND, failed or not, posts nothing
			hdrPool.Put(hb)
			if staged != nil {
				bufPool.Put(staged)
			}
			return nil
		}
		p.mu.Lock()
		if pm != nil {
			pm.sendDone(a, sendErr)
		}
		if sendErr != nil && gm != nil {
			gm.replyDone(a.userPtr, 0, 0, PriorityList, NIUndeliverable)
		}
	}
	p.unlockWake()
	hdrPool.Put(hb)
	if staged != nil {
		bufPool.Put(staged)
	}
	return nil
}

// checkOp validates the arguments of a data movement call; "" when they are fine.
func (ni *logicalNI) checkOp(a *opArgs, pm, gm *mdObj) string {
	if a.length > ni.lim.MaxMsgSize {
		return "length " + strconv.FormatUint(a.length, 10) + " is above max_msg_size " + strconv.FormatUint(ni.lim.MaxMsgSize, 10)
	}
	if pm != nil && !mdBound(pm, a.putOff, a.length) {
		return "local offset " + strconv.FormatUint(a.putOff, 10) + " + length " + strconv.FormatUint(a.length, 10) +
			" is beyond the MD's " + strconv.FormatUint(pm.length, 10) + " bytes"
	}
	if gm != nil && !mdBound(gm, a.getOff, a.length) {
		return "local get offset " + strconv.FormatUint(a.getOff, 10) + " + length " + strconv.FormatUint(a.length, 10) +
			" is beyond the get MD's " + strconv.FormatUint(gm.length, 10) + " bytes"
	}
	if a.pt == PTAny {
		return "pt_index is PTL_PT_ANY"
	}
	if a.op == opPut || a.op == opAtomic {
		if a.ack > OCAckReq {
			return "ack_req " + a.ack.String() + " is not an ack request type"
		}
	}
	if pm != nil && pm.opts&MDUnreliable != 0 && (a.op != opPut || a.ack != NoAckReq) {
		return "a PTL_MD_UNRELIABLE MD allows only PtlPut with PTL_NO_ACK_REQ (§3.10.1)"
	}
	if a.op == opAtomic || a.op == opFetch || a.op == opSwap {
		if a.dt >= numDatatypes {
			return "datatype " + a.dt.String() + " is not a datatype"
		}
		if a.aop >= numAtomicOps {
			return "operation " + a.aop.String() + " is not an operation"
		}
		if !legalAtomic(a.aop, a.dt, a.op) {
			fn := "PtlAtomic and PtlFetchAtomic"
			if isSwapOp(a.aop) {
				fn = "PtlSwap"
			}
			if !Legal(a.aop, a.dt) {
				return "operation " + a.aop.String() + " is not defined on " + a.dt.String() + " (Table 3-4)"
			}
			return "operation " + a.aop.String() + " is only carried by " + fn
		}
		sz := uint64(a.dt.Size())
		if a.length%sz != 0 {
			return "length " + strconv.FormatUint(a.length, 10) + " is not a multiple of the " + a.dt.String() + " size " + strconv.FormatUint(sz, 10)
		}
		lim, name := ni.lim.MaxAtomicSize, "max_atomic_size"
		if a.op != opAtomic {
			lim, name = ni.lim.MaxFetchAtomicSize, "max_fetch_atomic_size"
		}
		if a.length > lim {
			return "length " + strconv.FormatUint(a.length, 10) + " is above " + name + " " + strconv.FormatUint(lim, 10)
		}
		if a.op == opSwap {
			if a.aop != OpSwap && a.length != sz {
				return "operation " + a.aop.String() + " takes exactly one item (length " + strconv.FormatUint(sz, 10) + ")"
			}
			if uint64(len(a.operand)) < sz && a.aop != OpSwap {
				return "operand holds " + strconv.Itoa(len(a.operand)) + " bytes, less than one " + a.dt.String()
			}
		}
	}
	return ""
}

// sendDone posts PTL_EVENT_SEND and its count (§3.13.1: the buffer may be reused), ending
// the put half of the operation. With p.mu held.
func (m *mdObj) sendDone(a *opArgs, err error) {
	m.sends.Add(-1)
	fail := NIOK
	if err != nil {
		fail = NIUndeliverable
	}
	if m.eq != nil && m.opts&MDEventSendDisable == 0 && !(fail == NIOK && m.opts&MDEventSuccessDisable != 0) {
		m.eq.post(&Event{Type: EventSend, UserPtr: a.userPtr, MLength: a.length, NIFail: fail})
	}
	if m.opts&MDEventCTSend != 0 {
		m.countSuccess(fail, a.length)
	}
}

func (m *mdObj) countSuccess(fail NIFail, mlength uint64) {
	if fail != NIOK {
		m.ct.add(0, 1)
	} else if m.opts&MDEventCTBytes != 0 {
		m.ct.add(mlength, 0)
	} else {
		m.ct.add(1, 0)
	}
}

// replyDone posts PTL_EVENT_REPLY (§3.13.1) and ends the get half of the operation.
func (m *mdObj) replyDone(userPtr, off, mlength uint64, list List, fail NIFail) {
	if m.gets > 0 {
		m.gets--
	}
	if m.eq != nil && !(fail == NIOK && m.opts&MDEventSuccessDisable != 0) {
		m.eq.post(&Event{Type: EventReply, UserPtr: userPtr, MLength: mlength, RemoteOffset: off, List: list, NIFail: fail})
	}
	if m.opts&MDEventCTReply != 0 {
		m.countSuccess(fail, mlength)
	}
}
