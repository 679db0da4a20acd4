package gex

import "math"

// ReduceFn is a user-defined reduction operator (gex_Coll_ReduceFn_t): it
// computes arg2AndOut[i] = arg1[i] (+) arg2AndOut[i] for count elements of the
// reduction's element size, arg1 holding the "left" operands (for USER_NC, the
// lower ranks). cdata is the value passed at initiation. It may be called any
// number of times, with any count, from whichever goroutine runs the
// collectives' progress; it must not block on GASNet progress or make calls
// prohibited in restricted context. arg1 must not be written.
type ReduceFn func(arg1, arg2AndOut []byte, count int, cdata any)

// maxCollBytes bounds a collective's payload: offsets travel as int32 AM
// arguments.
const maxCollBytes = math.MaxInt32

// collTM validates tm for a Coll call and returns its client.
func collTM(op string, tm *TM) (*Client, error) {
	c, err := teamTM(op, tm)
	if err == nil {
		c.releaseHeld(true) // AMs still without a handler are refused now
	}
	if err == nil && tm.ep.caps&EPCapabilityColl == 0 {
		err = tm.ep.needCap(op, EPCapabilityColl)
	}
	if err == nil && tm.noScratch {
		err = c.report(badArg(op, "tm was created with GEX_FLAG_TM_NO_SCRATCH: collectives over it are prohibited"))
	}
	if err == nil && op != "BarrierNamedNB" {
		err = tm.checkLegacyBarrier(op)
	}
	return c, err
}

// BarrierNB implements gex_Coll_BarrierNB: a split-phase barrier over tm. The
// event completes only after every member of tm has called BarrierNB for this
// barrier. Initiation is a release and completion an acquire (the messages
// travel through the conduit's atomically published queues). flags must be 0.
func (tm *TM) BarrierNB(flags Flags) (Event, error) {
	const opName = "BarrierNB"
	c, err := collTM(opName, tm)
	if err != nil {
		return EventInvalid, err
	}
	if flags != 0 {
		return EventInvalid, c.report(badArg(opName, "flags must be 0 (reserved), got %v", flags))
	}
	return c.coll.barrier(tm, 0, barrierAnonymous), nil
}

// barrier initiates a barrier with a GASNet-1 style id and flags word.
func (e *collEngine) barrier(tm *TM, id int32, bflags uint32) Event {
	e.mu.Lock()
	return e.barrierLocked(tm, id, bflags)
}

// barrierLocked is barrier with mu held (released here): through the
// collective areas where the team has them, else AMs.
func (e *collEngine) barrierLocked(tm *TM, id int32, bflags uint32) Event {
	if tm.ts.shm != nil {
		op := e.startShm(tm, kindBarrier)
		op.id, op.bflags = id, bflags
		op.hnet = tm.ts.shm.hier && op.me == tm.ts.shm.leader
		if e.barrierNow(op) {
			return EventInvalid
		}
		return e.launchShm(op)
	}
	op, _ := e.start(tm, kindBarrier)
	op.id, op.bflags = id, bflags
	return e.launch(op)
}

// BroadcastNB implements gex_Coll_BroadcastNB: nbytes bytes of src on rank
// root of tm are copied to dst on every member (root included, unless src and
// dst are the same memory). src is read only on root; dst must hold nbytes on
// every rank. Both must stay untouched until the event completes.
func (tm *TM) BroadcastNB(root Rank, dst, src []byte, nbytes int, flags Flags) (Event, error) {
	const opName = "BroadcastNB"
	c, err := collTM(opName, tm)
	if err != nil {
		return EventInvalid, err
	}
	switch {
	case flags != 0:
		return EventInvalid, c.report(badArg(opName, "flags must be 0, got %v", flags))
	case root >= tm.size:
		return EventInvalid, c.report(badArg(opName, "root %d out of range: team size is %d", root, tm.size))
	case nbytes < 0 || nbytes > maxCollBytes:
		return EventInvalid, c.report(badArg(opName, "nbytes %d out of range [0, %d]", nbytes, maxCollBytes))
	case len(dst) < nbytes:
		return EventInvalid, c.report(badArg(opName, "dst holds %d bytes, fewer than nbytes (%d)", len(dst), nbytes))
	case tm.rank == root && len(src) < nbytes:
		return EventInvalid, c.report(badArg(opName, "src holds %d bytes, fewer than nbytes (%d)", len(src), nbytes))
	}
	e := &c.coll
	e.mu.Lock()
	if tm.useShmBcast(nbytes) {
		op := e.startShm(tm, kindBcast)
		op.root, op.dst, op.nbytes = int(root), dst[:nbytes], nbytes
		if tm.rank == root {
			op.src = src[:nbytes]
			op.ringDirect(c)
			if &dst[0] == &src[0] {
				op.dst = nil // the root's own copy is done
			}
		}
		if st := tm.ts.shm; st.hier {
			op.hnet = int(tm.rank) == st.dist(int(root))
			st.nhier++
		}
		return e.launchShm(op), nil
	}
	return e.launch(e.bcastAMOp(tm, root, dst, src, nbytes)), nil
}

// bcastAMOp registers a broadcast on AMs (mu held), to be launched.
func (e *collEngine) bcastAMOp(tm *TM, root Rank, dst, src []byte, nbytes int) *collOp {
	c := e.c
	op, _ := e.start(tm, kindBcast)
	op.root, op.dst, op.nbytes = int(root), dst, nbytes
	if tm.rank == root {
		if nbytes > 0 && &dst[0] != &src[0] {
			copyMapped(dst[:nbytes], src[:nbytes])
		}
		op.slots[0].buf = dst[:nbytes]
		if off, ok := op.useDirect(c, src[:nbytes]); ok {
			op.viaMap = true
			op.slots[slotDirect].segOff = off
		} else if nbytes > 0 {
			op.spans = append(op.spans[:0], collSpan{0, nbytes})
		}
	} else if nbytes == 0 {
		op.slots[0].arrived = true
	}
	return op
}

// reduceArgs validates the arguments common to both reductions.
func reduceArgs(c *Client, opName string, dst, src []byte, dt DT, dtSize, dtCount int, op OP, fn ReduceFn, needDst bool) error {
	size := 4
	if dt&(DTI64|DTU64|DTDBL) != 0 {
		size = 8
	}
	switch {
	case dt&(dt-1) != 0 || dt == 0 || dt > DTUser:
		return badArg(opName, "dt %v is not a data type", dt)
	case dtSize <= 0:
		return badArg(opName, "dt_sz must be non-zero, got %d", dtSize)
	case dt != DTUser && dtSize != size:
		return badArg(opName, "dt_sz %d does not match %v (%d bytes)", dtSize, dt, size)
	case dtCount <= 0:
		return badArg(opName, "dt_cnt must be non-zero, got %d", dtCount)
	case dtCount > maxCollBytes/dtSize:
		return badArg(opName, "dt_sz*dt_cnt = %d*%d exceeds %d bytes", dtSize, dtCount, maxCollBytes)
	case op&(op-1) != 0 || op&(OPAdd|OPMult|OPMin|OPMax|OPAnd|OPOr|OPXor|OPUser|OPUserNC) == 0:
		return badArg(opName, "op %v is not a reduction operator (ADD, MULT, MIN, MAX, AND, OR, XOR, USER, USER_NC)", op)
	case dt == DTUser && op != OPUser && op != OPUserNC:
		return badArg(opName, "GEX_DT_USER needs GEX_OP_USER or GEX_OP_USER_NC, got %v", op)
	case !dt.isInteger() && op&(OPAnd|OPOr|OPXor) != 0:
		return badArg(opName, "bit-wise op %v is not valid for %v", op, dt)
	case (op == OPUser || op == OPUserNC) && fn == nil:
		return badArg(opName, "op %v needs a user_op function", op)
	case len(src) < dtSize*dtCount:
		return badArg(opName, "src holds %d bytes, fewer than dt_sz*dt_cnt (%d)", len(src), dtSize*dtCount)
	case needDst && len(dst) < dtSize*dtCount:
		return badArg(opName, "dst holds %d bytes, fewer than dt_sz*dt_cnt (%d)", len(dst), dtSize*dtCount)
	}
	return nil
}

// ReduceToOneNB implements gex_Coll_ReduceToOneNB: element-wise reduction of
// every member's dtCount elements of src with op; the result lands in dst on
// root only (dst is ignored elsewhere). For OPUser and OPUserNC, fn is the
// operator and cdata its client data; DTUser elements are opaque dtSize-byte
// values. The fold is src[0] (+) src[1] (+) ... (+) src[N-1] in rank order
// with a fixed bracketing (so OPUserNC, which the spec leaves unimplemented,
// works, and equal inputs give equal bits). flags must be 0.
func (tm *TM) ReduceToOneNB(root Rank, dst, src []byte, dt DT, dtSize, dtCount int, op OP, fn ReduceFn, cdata any, flags Flags) (Event, error) {
	const opName = "ReduceToOneNB"
	c, err := collTM(opName, tm)
	if err != nil {
		return EventInvalid, err
	}
	if flags != 0 {
		return EventInvalid, c.report(badArg(opName, "flags must be 0, got %v", flags))
	}
	if root >= tm.size {
		return EventInvalid, c.report(badArg(opName, "root %d out of range: team size is %d", root, tm.size))
	}
	if err := reduceArgs(c, opName, dst, src, dt, dtSize, dtCount, op, fn, tm.rank == root); err != nil {
		return EventInvalid, c.report(err)
	}
	return c.coll.reduce(tm, kindReduceOne, int(root), dst, src, dt, dtSize, dtCount, op, fn, cdata)
}

// ReduceToAllNB implements gex_Coll_ReduceToAllNB: as ReduceToOneNB, with the
// result written to dst on every member (the same bits everywhere: rank 0's
// result is broadcast). src and dst may be the same memory on every rank.
func (tm *TM) ReduceToAllNB(dst, src []byte, dt DT, dtSize, dtCount int, op OP, fn ReduceFn, cdata any, flags Flags) (Event, error) {
	const opName = "ReduceToAllNB"
	c, err := collTM(opName, tm)
	if err != nil {
		return EventInvalid, err
	}
	if flags != 0 {
		return EventInvalid, c.report(badArg(opName, "flags must be 0, got %v", flags))
	}
	if err := reduceArgs(c, opName, dst, src, dt, dtSize, dtCount, op, fn, true); err != nil {
		return EventInvalid, c.report(err)
	}
	return c.coll.reduce(tm, kindReduceAll, 0, dst, src, dt, dtSize, dtCount, op, fn, cdata)
}

func (e *collEngine) reduce(tm *TM, kind collKind, root int, dst, src []byte, dt DT, dtSize, dtCount int, op OP, fn ReduceFn, cdata any) (Event, error) {
	n := dtSize * dtCount
	if tm.useShmSmall(n, op) {
		if err := e.awaitSmallBuffer(tm); err != nil {
			return EventInvalid, err
		}
		e.mu.Lock()
		o := e.reduceShm(tm, kind, root, dst, src, n)
		o.dt, o.dtSize, o.op, o.fn, o.cdata = dt, dtSize, op, fn, cdata
		return e.launchShm(o), nil
	}
	e.mu.Lock()
	return e.launch(e.reduceAMOp(tm, kind, root, dst, src, n, dt, dtSize, op, fn, cdata)), nil
}

// reduceAMOp registers a reduction of n bytes on AMs (mu held), to be
// launched.
func (e *collEngine) reduceAMOp(tm *TM, kind collKind, root int, dst, src []byte, n int, dt DT, dtSize int, op OP, fn ReduceFn, cdata any) *collOp {
	o, _ := e.start(tm, kind)
	o.root, o.dst, o.nbytes = root, dst, n
	o.dt, o.dtSize, o.op, o.fn, o.cdata = dt, dtSize, op, fn, cdata
	o.nchild = reduceChildren(o.me, o.n)
	o.acc = e.getBuf(n)
	copyMapped(o.acc, src[:n])
	return o
}

// gather collects nbytes of src from every member into dst (n*nbytes) on rank
// 0 (team construction). Blocking.
func (e *collEngine) gather(tm *TM, dst, src []byte, nbytes int) error {
	e.mu.Lock()
	op, _ := e.start(tm, kindGather)
	op.dst, op.src, op.nbytes = dst, src, nbytes
	return e.launch(op).Wait()
}
