package gex

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/conduit"
)

// Path (b) of RMA: the AM-based reference protocol, for peers whose segment is
// not mapped here (and, unchanged, for the network conduits).
//
//	put: one Medium request per chunk of at most MaxRequestMedium bytes naming
//	     the remote address; the target's handler bounds-checks the range
//	     against its segment, copies the chunk in, and answers with a Short
//	     reply (ack) carrying a status, so a refused put fails instead of
//	     hanging.
//	get: one Short request per chunk of at most MaxReplyMedium bytes naming
//	     the remote range; the target bounds-checks it and answers with a
//	     Medium reply carrying the bytes (or a failure status).
//
//	To a peer whose Long limit exceeds its Medium one (another host, over
//	the tcp conduit) a put of more than a Medium goes as Long requests of up
//	to putLongChunk bytes (hPutLong: the conduit places the bytes in the
//	target's segment straight from the socket, the handler acks), and a get
//	into this rank's own segment as Short requests (hGetLongReq) answered by
//	Long replies written from the target's segment into ours (hGetLongRep).
//
// All chunks of an operation are injected back to back, so several are in
// flight at once (as many as the conduit's rings and payload buffers allow).
// The operation completes when every chunk was acknowledged. Operations in
// flight live in the client's op table; replies name them by (index,
// generation), and a reply naming a stale or foreign operation is dropped with
// a message.
//
// Messages per operation of n bytes with chunk size C: 2*ceil(n/C) AMs.

// Library handler indices (below AMIndexBase).
const (
	hPutReq AMIndex = 1 // Medium request; args: addr lo, addr hi, op, gen, chunk
	hPutAck AMIndex = 2 // Short reply; args: op, gen, status
	hGetReq AMIndex = 3 // Short request; args: addr lo, addr hi, nbytes, op, gen, chunk
	hGetRep AMIndex = 4 // Medium reply; args: op, gen, chunk, status
	// hAtomicReq is a remote atomic (ad.go); args: addr lo, addr hi, opcode,
	// data type, operand1 lo/hi, operand2 lo/hi, op, gen. Answered by hGetRep
	// with the fetched value (if any) as payload.
	hAtomicReq AMIndex = 5
	// hPutLong is a put chunk as a Long request (args: op, gen, chunk) to a
	// peer whose Long limit exceeds its Medium one (another host over tcp):
	// the bytes go from the initiator's memory to the target's segment
	// without a staging copy on either side; answered by hPutAck.
	hPutLong AMIndex = 9
	// hGetLongReq asks for a get chunk to be answered by a Long reply
	// (hGetLongRep: args op, gen, status 0) placed straight into the
	// initiator's segment, where the get's destination lies; args: addr lo,
	// addr hi, nbytes, op, gen, chunk, dest lo, dest hi. A refused range is
	// answered by hPutAck with a status.
	hGetLongReq AMIndex = 10
	hGetLongRep AMIndex = 11
)

// putLongChunk is the largest put chunk sent as a Long: a 4 MiB put is 4
// Longs in flight at once.
const putLongChunk = 1 << 20

// inflight is what the op tables know of an operation in flight: replies
// name it by (table index, generation) and must come from its target.
type inflight struct {
	gen    uint32
	target int
	left   atomic.Int32 // parts not yet answered
	ev     *eventState  // blocking/NB: the root event
	nbiEC  EC           // NBI: its category (0 if not NBI)
	region *eventState  // NBI inside an access region
	errMu  sync.Mutex
	err    error
}

// fail records the operation's first failure.
func (b *inflight) fail(err error) {
	b.errMu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.errMu.Unlock()
}

// rmaOp is a path-(b) operation in flight.
type rmaOp struct {
	inflight
	chunk int    // chunk size
	dst   []byte // get: where replies land
}

func (op *rmaOp) base() *inflight { return &op.inflight }

// reset drops what the finished operation referenced.
func (op *rmaOp) reset() { op.dst = nil }

// opEntry is a pointer to an operation an opTable holds.
type opEntry[T any] interface {
	*T
	base() *inflight
	reset() // drops what the finished operation referenced beyond inflight
}

// opTable holds the operations in flight (RMA and atomics, or VIS), indexed
// by a small integer that travels in the AM arguments.
type opTable[T any, P opEntry[T]] struct {
	mu   sync.Mutex
	ops  []P
	free []int32
}

func (t *opTable[T, P]) alloc() (int32, P) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.free); n > 0 {
		id := t.free[n-1]
		t.free = t.free[:n-1]
		return id, t.ops[id]
	}
	op := P(new(T))
	t.ops = append(t.ops, op)
	return int32(len(t.ops) - 1), op
}

func (t *opTable[T, P]) release(id int32, op P) {
	t.mu.Lock()
	b := op.base()
	b.gen++
	b.ev, b.region, b.err, b.nbiEC = nil, nil, nil, 0
	op.reset()
	t.free = append(t.free, id)
	t.mu.Unlock()
}

// lookup finds the live operation (id, gen) that targeted src, or nil.
func (t *opTable[T, P]) lookup(id, gen int32, src int) P {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id < 0 || int(id) >= len(t.ops) {
		return nil
	}
	op := t.ops[id]
	if b := op.base(); b.gen != uint32(gen) || b.target != src || b.left.Load() <= 0 {
		return nil
	}
	return op
}

var errRemoteRange = &Error{Op: "RMA", Code: ErrCodeBadArg, Msg: "the target refused the remote range (not inside its segment)"}

// rmaAM runs s (already validated) on path (b) to job rank j; raddr is the
// remote owner address.
func (c *Client) rmaAM(s *rmaSpec, j int, raddr uint64) (Event, error) {
	n := len(s.local)
	lim := c.cd.Limits(j)
	chunk := lim.MaxMedium
	// A put to a peer with larger Longs than Mediums goes as Longs, if the
	// range is inside the segment this rank knows of (else as Mediums,
	// which the target refuses with a status).
	// Longs are placed by the conduit in the primordial endpoint's segment
	// only (docs/mk.md): an RMA to another endpoint goes as Mediums.
	long := s.put && s.dstEP == 0 && lim.MaxLong > lim.MaxMedium && n > lim.MaxMedium
	if long {
		seg := c.cd.Segment(j)
		long = raddr >= seg.Owner && raddr-seg.Owner <= seg.Size && uint64(n) <= seg.Size-(raddr-seg.Owner)
	}
	// A get into this rank's own segment from such a peer is answered by
	// Long replies, streamed from the target's segment into ours.
	var ldest uint64
	if !s.put && s.dstEP == 0 && lim.MaxLong > lim.MaxMedium && n > lim.MaxMedium {
		if own := c.ep.seg.Load(); own != nil {
			base, p := addrOf(own.mem), addrOf(s.local)
			if p >= base && p-base <= uintptr(len(own.mem)) && uintptr(n) <= uintptr(len(own.mem))-(p-base) {
				seg := c.cd.Segment(j)
				if raddr >= seg.Owner && raddr-seg.Owner <= seg.Size && uint64(n) <= seg.Size-(raddr-seg.Owner) {
					ldest, long = uint64(own.addr)+uint64(p-base), true
				}
			}
		}
	}
	if long {
		chunk = min(lim.MaxLong, putLongChunk)
	}
	nchunks := (n + chunk - 1) / chunk
	ec, dst := ECGet, s.local
	if s.put {
		ec, dst = ECPut, nil
	}
	id, op := c.startOp(j, nchunks, chunk, dst, s.mode, ec)
	ev := op.ev
	gen := int32(op.gen)
	for i := 0; i < nchunks; i++ {
		lo, hi := i*chunk, min(n, (i+1)*chunk)
		var flags conduit.SendFlags
		if i == 0 && s.flags&FlagImmediate != 0 {
			flags = conduit.Immediate // only the first chunk: nothing initiated on ErrNoOp
		}
		var h conduit.Header
		var payload []byte
		a := raddr + uint64(lo)
		if long && !s.put {
			d := ldest + uint64(lo)
			h = conduit.Header{Cat: conduit.Short, IsReq: true, Handler: uint8(hGetLongReq), NArgs: 8}
			h.Args[0], h.Args[1], h.Args[2] = int32(uint32(a)), int32(uint32(a>>32)), int32(hi-lo)
			h.Args[3], h.Args[4], h.Args[5] = id, gen, int32(i)
			h.Args[6], h.Args[7] = int32(uint32(d)), int32(uint32(d>>32))
		} else if long {
			h = conduit.Header{Cat: conduit.Long, IsReq: true, Handler: uint8(hPutLong), NArgs: 3, Dest: a}
			h.Args[0], h.Args[1], h.Args[2] = id, gen, int32(i)
			payload = s.local[lo:hi]
		} else if s.put {
			h = conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: uint8(hPutReq), NArgs: 5}
			h.Args[0], h.Args[1] = int32(uint32(a)), int32(uint32(a>>32))
			h.Args[2], h.Args[3], h.Args[4] = id, gen, int32(i)
			payload = s.local[lo:hi]
		} else {
			h = conduit.Header{Cat: conduit.Short, IsReq: true, Handler: uint8(hGetReq), NArgs: 6}
			h.Args[0], h.Args[1], h.Args[2] = int32(uint32(a)), int32(uint32(a>>32)), int32(hi-lo)
			h.Args[3], h.Args[4], h.Args[5] = id, gen, int32(i)
		}
		h.EP = s.dstEP
		if err := c.cd.Send(j, h, payload, flags); err != nil {
			if i == 0 {
				return abandonOp(c, &c.ops, s.op, id, op, s.mode, err)
			}
			// A conduit failure mid-operation: account the unsent chunks as failed.
			ferr := resourceErr(s.op, "chunk %d of %d: %v", i, nchunks, err)
			for k := i; k < nchunks; k++ {
				c.chunkDone(id, op, ferr)
			}
			break
		}
	}
	switch s.mode {
	case modeBlocking:
		return EventInvalid, ev.handle().Wait()
	case modeNB:
		return ev.handle(), nil
	}
	return EventInvalid, nil
}

// startOp registers a path-(b) operation to job rank j of parts parts of at
// most chunk bytes (replies land in dst, if any).
func (c *Client) startOp(j, parts, chunk int, dst []byte, mode rmaMode, ec EC) (int32, *rmaOp) {
	id, op := startInflight(c, &c.ops, j, parts, mode, ec)
	op.chunk, op.dst = chunk, dst
	return id, op
}

// startInflight takes an operation to job rank j with parts parts
// outstanding from t and routes its completion: an NBI operation counts in
// the implicit set of category ec (or the open access region), any other gets
// a new root event (ev).
func startInflight[T any, P opEntry[T]](c *Client, t *opTable[T, P], j, parts int, mode rmaMode, ec EC) (int32, P) {
	id, op := t.alloc()
	b := op.base()
	b.target = j
	b.left.Store(int32(parts))
	if mode == modeNBI {
		b.nbiEC = ec
		b.region = c.nbiStart(ec)
	} else {
		b.ev = c.newEvent(1)
		b.ev.what, b.ev.peer = "an RMA operation", int32(j)
	}
	return id, op
}

// abandonOp undoes startInflight after the first injection failed, so
// nothing was initiated, and returns the call's result: ErrNoOp (with
// EventNoOp from the NB forms) for backpressure under FlagImmediate, a
// resource error otherwise.
func abandonOp[T any, P opEntry[T]](c *Client, t *opTable[T, P], name string, id int32, op P, mode rmaMode, err error) (Event, error) {
	b := op.base()
	if mode == modeNBI {
		c.nbiDone(b.nbiEC, b.region, nil)
	} else {
		b.ev.pending.Store(0)
		_ = b.ev.consume()
	}
	t.release(id, op)
	switch {
	case err != conduit.ErrWouldBlock:
		return EventInvalid, c.report(resourceErr(name, "%v", err))
	case mode == modeNB:
		return EventNoOp, ErrNoOp
	}
	return EventInvalid, ErrNoOp
}

// partDone retires one part of op; the last one completes the operation.
func partDone[T any, P opEntry[T]](c *Client, t *opTable[T, P], id int32, op P, err error) {
	b := op.base()
	if err != nil {
		b.fail(err)
	}
	if b.left.Add(-1) != 0 {
		return
	}
	b.errMu.Lock()
	ferr := b.err
	b.errMu.Unlock()
	ev, ec, region := b.ev, b.nbiEC, b.region
	t.release(id, op)
	if ev != nil {
		ev.done(ferr)
	} else {
		c.nbiDone(ec, region, ferr)
	}
}

// ackPart retires the part of an operation of table that an acknowledgement
// (args: op, gen, status) names; a non-zero status is the target's refusal
// of the remote range.
func ackPart[T any, P opEntry[T]](c *Client, table *opTable[T, P], what string, t *Token, a []AMArg) {
	op := table.lookup(a[0], a[1], t.src)
	if op == nil {
		c.logf("dropped a %s acknowledgement from rank %d for an operation not in flight (%d/%d)", what, t.src, a[0], a[1])
		return
	}
	var err error
	if a[2] != 0 {
		err = errRemoteRange
	}
	partDone(c, table, a[0], op, err)
}

// chunkDone retires one chunk of an RMA or atomic operation.
func (c *Client) chunkDone(id int32, op *rmaOp, err error) { partDone(c, &c.ops, id, op, err) }

// targetRange is the target's check of a path-(b) request: the bytes
// [addr, addr+n) of the bound segment of the endpoint t names, with addr in
// two AM args, or false (with a message naming the requester) if they are
// not all inside it.
func (c *Client) targetRange(what string, t *Token, lo, hi AMArg, n int64) ([]byte, bool) {
	addr := uint64(uint32(lo)) | uint64(uint32(hi))<<32
	if seg := t.ep.seg.Load(); seg != nil && n >= 0 {
		if off, ok := seg.offsetOf(Addr(addr), uint64(n)); ok {
			return seg.mem[off : off+uint64(n)], true
		}
	}
	c.logf("refused a %s from rank %d: [%#x, +%d) is not inside the segment of endpoint %d", what, t.src, addr, n, t.ep.index)
	return nil, false
}

// replyInternal sends a library Reply through t.
func (c *Client) replyInternal(t *Token, h conduit.Header, payload []byte) {
	t.replied = true
	if err := c.cd.Send(t.src, h, payload, 0); err != nil {
		c.logf("RMA reply to rank %d failed: %v", t.src, err)
	}
}

// rmaHandlers are the library's RMA handlers, installed by ClientInit.
func (c *Client) rmaHandlers() []AMEntry {
	return []AMEntry{
		{Index: hPutReq, Flags: FlagAMMedium | FlagAMRequest, NArgs: 5, Name: "gex-put", Fn: func(t *Token, p []byte, a []AMArg) {
			h := conduit.Header{Cat: conduit.Short, Handler: uint8(hPutAck), NArgs: 3}
			h.Args[0], h.Args[1] = a[2], a[3]
			if dst, ok := c.targetRange("put", t, a[0], a[1], int64(len(p))); ok {
				copy(dst, p)
			} else {
				h.Args[2] = 1
			}
			c.replyInternal(t, h, nil)
		}},
		{Index: hPutLong, Flags: FlagAMLong | FlagAMRequest, NArgs: 3, Name: "gex-put-long", Fn: func(t *Token, _ []byte, a []AMArg) {
			// The bytes are in place: the Long was checked against this
			// rank's segment before this handler ran.
			h := conduit.Header{Cat: conduit.Short, Handler: uint8(hPutAck), NArgs: 3}
			h.Args[0], h.Args[1] = a[0], a[1]
			c.replyInternal(t, h, nil)
		}},
		{Index: hGetLongReq, Flags: FlagAMShort | FlagAMRequest, NArgs: 8, Name: "gex-get-long", Fn: func(t *Token, _ []byte, a []AMArg) {
			n := int64(a[2])
			payload, ok := c.targetRange("get", t, a[0], a[1], n)
			if !ok || n > int64(c.cd.Limits(t.src).MaxLong) {
				h := conduit.Header{Cat: conduit.Short, Handler: uint8(hPutAck), NArgs: 3}
				h.Args[0], h.Args[1], h.Args[2] = a[3], a[4], 1
				c.replyInternal(t, h, nil)
				return
			}
			// Streamed from the segment: the conduit writes these bytes
			// with the header in one writev, no copy.
			h := conduit.Header{Cat: conduit.Long, Handler: uint8(hGetLongRep), NArgs: 3, Dest: uint64(uint32(a[6])) | uint64(uint32(a[7]))<<32}
			h.Args[0], h.Args[1] = a[3], a[4]
			c.replyInternal(t, h, payload)
		}},
		{Index: hGetLongRep, Flags: FlagAMLong | FlagAMReply, NArgs: 3, Name: "gex-get-long-reply", Fn: func(t *Token, _ []byte, a []AMArg) {
			ackPart(c, &c.ops, "get", t, a) // the bytes are in place
		}},
		{Index: hPutAck, Flags: FlagAMShort | FlagAMReply, NArgs: 3, Name: "gex-put-ack", Fn: func(t *Token, _ []byte, a []AMArg) {
			ackPart(c, &c.ops, "put", t, a)
		}},
		{Index: hGetReq, Flags: FlagAMShort | FlagAMRequest, NArgs: 6, Name: "gex-get", Fn: func(t *Token, _ []byte, a []AMArg) {
			h := conduit.Header{Cat: conduit.Medium, Handler: uint8(hGetRep), NArgs: 4}
			h.Args[0], h.Args[1], h.Args[2] = a[3], a[4], a[5]
			n := int64(a[2])
			payload, ok := c.targetRange("get", t, a[0], a[1], n)
			if !ok || n > int64(c.cd.Limits(t.src).MaxMedium) {
				payload, h.Args[3] = nil, 1
			}
			c.replyInternal(t, h, payload)
		}},
		{Index: hAtomicReq, Flags: FlagAMShort | FlagAMRequest, NArgs: 10, Name: "gex-atomic", Fn: func(t *Token, _ []byte, a []AMArg) {
			h := conduit.Header{Cat: conduit.Medium, Handler: uint8(hGetRep), NArgs: 4}
			h.Args[0], h.Args[1] = a[8], a[9]
			op, dt := OP(uint32(a[2])), DT(uint32(a[3]))
			size := int64(4)
			if dt&(DTI64|DTU64|DTDBL) != 0 {
				size = 8
			}
			addr := uint64(uint32(a[0])) | uint64(uint32(a[1]))<<32
			valid := dt&(dt-1) == 0 && dt&(DTI32|DTU32|DTI64|DTU64|DTFLT|DTDBL) != 0 &&
				op&(op-1) == 0 && op&opAtomic != 0 && (dt.isInteger() || op&(opBitwise|opFBitwise) == 0) &&
				addr%uint64(size) == 0
			mem, ok := c.targetRange("atomic", t, a[0], a[1], size)
			var payload []byte
			if !valid || !ok {
				h.Args[3] = 1
				if ok {
					c.logf("refused an atomic from rank %d: opcode %v on %v at %#x", t.src, op, dt, addr)
				}
			} else {
				b1 := uint64(uint32(a[4])) | uint64(uint32(a[5]))<<32
				b2 := uint64(uint32(a[6])) | uint64(uint32(a[7]))<<32
				old := applyBits(dt, mem, op, b1, b2)
				if op&opResult != 0 {
					// One request handler runs at a time per client, so one
					// scratch word serves every reply.
					if size == 4 {
						binary.NativeEndian.PutUint32(c.atomicScratch[:], uint32(old))
					} else {
						binary.NativeEndian.PutUint64(c.atomicScratch[:], old)
					}
					payload = c.atomicScratch[:size]
				}
			}
			c.replyInternal(t, h, payload)
		}},
		{Index: hGetRep, Flags: FlagAMMedium | FlagAMReply, NArgs: 4, Name: "gex-get-reply", Fn: func(t *Token, p []byte, a []AMArg) {
			op := c.ops.lookup(a[0], a[1], t.src)
			if op == nil {
				c.logf("dropped get data from rank %d for an operation not in flight (%d/%d)", t.src, a[0], a[1])
				return
			}
			var err error
			off := int64(a[2]) * int64(op.chunk)
			switch {
			case a[3] != 0:
				err = errRemoteRange
			case a[2] < 0 || off > int64(len(op.dst)) || int64(len(p)) != min(int64(op.chunk), int64(len(op.dst))-off):
				err = fmt.Errorf("rank %d answered chunk %d with %d bytes", t.src, a[2], len(p))
			default:
				copy(op.dst[off:], p)
			}
			c.chunkDone(a[0], op, err)
		}},
	}
}
