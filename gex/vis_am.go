package gex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/gctx"
)

// Path (b) of VIS: pack/unpack over Medium AMs, for peers whose segment is
// not mapped here (GASNet-1 VIS proposal, "Implementation": the scattered
// data is gathered into a few large messages instead of one per chunk).
//
//	put:  Medium requests of at most MaxMedium bytes, each
//	      [data][run list][peer-completion payload]; the run list names the
//	      remote (addr, len) runs the data fills, in order. The target checks
//	      every run against its segment before writing any, writes the data,
//	      runs the peer-completion handler if the message carries one, and
//	      answers with a Short ack carrying a status.
//	get:  Medium requests carrying a run list whose data fits one Medium
//	      reply; the target checks the runs, gathers the bytes straight into a
//	      reply buffer (Prepare/Commit) and the initiator scatters the reply
//	      into the local regions from where that request's data starts.
//
// A run list is a sequence of (zigzag varint: address minus the end of the
// previous run, uvarint: length, uvarint: repeat) entries, so a regular
// pattern of chunks costs one entry of a few bytes per message (runEnc). All messages of an operation are injected back to back
// (as many in flight as the rings and payload buffers allow). One VIS op of
// n bytes costs about 2*ceil(n/MaxMedium) AMs, whatever its chunk sizes.

// Library handler indices of VIS (16..23; 6..15 are the collectives').
const (
	hVISPut    AMIndex = 16 // Medium request; args: op, gen, data len, run-list len, peer-completion handler
	hVISGetReq AMIndex = 17 // Medium request; args: op, gen, chunk, data len
	hVISGetRep AMIndex = 18 // Medium reply; args: op, gen, chunk, status
	hVISAck    AMIndex = 19 // Short reply; args: op, gen, status
	hVISPC     AMIndex = 20 // Medium request; args: peer-completion handler (path (a) notification)
)

// visChunk is where a get request's data lands: the local cursor and the
// rest of its current run when the request was packed, and the byte count.
type visChunk struct {
	cur  visCursor
	rest []byte
	n    int
	pair int // paired walk (visPairs): the first pair this request fetches
}

// visOp is a path-(b) VIS operation in flight.
type visOp struct {
	inflight // left: messages not yet answered, plus 1 while initiating

	mu     sync.Mutex // guards chunks (appended while replies arrive)
	local  visSide    // get: the destination (strided metadata copied here)
	chunks []visChunk
	npairs int // get: > 0 when the chunks are walked by pair (visPairs)
}

func (op *visOp) base() *inflight { return &op.inflight }

// reset drops what the finished operation referenced.
func (op *visOp) reset() {
	op.mu.Lock()
	op.local, op.npairs = visSide{}, 0
	clear(op.chunks)
	op.chunks = op.chunks[:0]
	op.mu.Unlock()
}

// visStart registers an operation to job rank j with one part outstanding:
// the initiation itself, retired by visPartDone once every message is out.
func (c *Client) visStart(j int, mode rmaMode, ec EC) (int32, *visOp) {
	return startInflight(c, &c.vis.ops, j, 1, mode, ec)
}

// visPartDone retires one part of op; the last completes the operation.
func (c *Client) visPartDone(id int32, op *visOp, err error) { partDone(c, &c.vis.ops, id, op, err) }

// visFinish retires the initiation part and returns the call's result.
func (c *Client) visFinish(id int32, op *visOp, mode rmaMode) (Event, error) {
	ev := op.ev
	c.visPartDone(id, op, nil)
	switch mode {
	case modeBlocking:
		return EventInvalid, ev.handle().Wait()
	case modeNB:
		return ev.handle(), nil
	}
	return EventInvalid, nil
}

// runEntryMax is the most bytes one run-list entry takes.
const runEntryMax = 3 * binary.MaxVarintLen64

// A run list is a sequence of entries (zigzag varint d, uvarint n, uvarint
// r): r runs of n bytes, each starting d bytes after the end of the previous
// run (the first after the end of the previous entry's last run; the list
// starts at address 0). The fine-grained patterns VIS exists for (a chunk
// every so many bytes) are one entry per message, so neither side does
// per-chunk header work. n and r are at least 1.

// runEnc builds a run list, merging consecutive runs of one length and gap
// into one entry. The zero value starts a list.
type runEnc struct {
	prevEnd uint64 // end of the last run added
	d       int64  // the pending entry (r == 0: none)
	n, r    uint64
}

// add appends the run (a, n), n > 0, to the list in b[:at] (which has room
// for 2*runEntryMax more bytes) and returns the new length.
func (e *runEnc) add(b []byte, at int, a uint64, n int) int {
	d := int64(a - e.prevEnd)
	if e.r > 0 && uint64(n) == e.n && d == e.d {
		e.r++
	} else {
		at = e.flush(b, at)
		e.d, e.n, e.r = d, uint64(n), 1
	}
	e.prevEnd = a + uint64(n)
	return at
}

// flush writes the pending entry (at most runEntryMax bytes).
func (e *runEnc) flush(b []byte, at int) int {
	if e.r == 0 {
		return at
	}
	at += binary.PutVarint(b[at:], e.d)
	at += binary.PutUvarint(b[at:], e.n)
	at += binary.PutUvarint(b[at:], e.r)
	e.r = 0
	return at
}

// putRun encodes the single run (a, n), n > 0, at b[at:] (which has room
// for runEntryMax bytes) after a run ending at *prevEnd, and returns the new
// length.
func putRun(b []byte, at int, prevEnd *uint64, a uint64, n int) int {
	e := runEnc{prevEnd: *prevEnd}
	at = e.add(b, at, a, n)
	*prevEnd = e.prevEnd
	return e.flush(b, at)
}

var errRunList = errors.New("malformed run list")

// runGroup is one checked run-list entry: r runs of n bytes, the first at
// offset off of the segment, each step bytes after the previous one's start.
type runGroup struct {
	off  int64
	n    int
	step int64
	r    int
}

// runDec is the target's decoder of a run list against its segment
// [base, base+size) (size < 2^62) and the left data bytes the runs must
// cover.
type runDec struct {
	b                   []byte
	prevEnd, base, size uint64
	left                uint64
}

// next decodes and checks the entry at the front of d.b: every run of it
// must lie in the segment and the runs must not exceed the data. Nothing in
// the list makes it panic, loop or allocate beyond the error.
func (d *runDec) next() (runGroup, error) {
	dd, k := binary.Varint(d.b)
	if k <= 0 {
		return runGroup{}, errRunList
	}
	n, k2 := binary.Uvarint(d.b[k:])
	if k2 <= 0 {
		return runGroup{}, errRunList
	}
	r, k3 := binary.Uvarint(d.b[k+k2:])
	if k3 <= 0 || n == 0 || r == 0 {
		return runGroup{}, errRunList
	}
	d.b = d.b[k+k2+k3:]
	if n > d.left || r > d.left/n {
		return runGroup{}, fmt.Errorf("runs exceed the data bytes (%d runs of %d bytes, %d bytes left)", r, n, d.left)
	}
	a := d.prevEnd + uint64(dd)
	off := a - d.base
	if a < d.base || off > d.size || n > d.size-off {
		return runGroup{}, fmt.Errorf("run [%#x, +%d) is not inside this rank's segment [%#x, +%d)", a, n, d.base, d.size)
	}
	step := int64(n + uint64(dd)) // the runs start at a + i*step (mod 2^64)
	if r > 1 {
		// Every run lies in [0, size-n] iff the first and the last do.
		abs := uint64(step)
		if step < 0 {
			abs = -abs
		}
		room := d.size - n
		if abs > room || abs > 0 && r-1 > room/abs {
			return runGroup{}, fmt.Errorf("%d runs of %d bytes %d bytes apart from %#x leave this rank's segment [%#x, +%d)", r, n, step, a, d.base, d.size)
		}
		span := (r - 1) * abs
		if step > 0 && off+span > room || step < 0 && span > off {
			return runGroup{}, fmt.Errorf("%d runs of %d bytes %d bytes apart from %#x leave this rank's segment [%#x, +%d)", r, n, step, a, d.base, d.size)
		}
	}
	d.left -= n * r
	d.prevEnd = a + (r-1)*uint64(step) + n
	return runGroup{off: int64(off), n: int(n), step: step, r: int(r)}, nil
}

// visCheckRuns checks a whole run list: every run inside the segment
// [base, base+size), the runs adding up to exactly total bytes.
func visCheckRuns(list []byte, base, size uint64, total int) error {
	if total < 0 || size >= 1<<62 {
		return errRunList
	}
	d := runDec{b: list, base: base, size: size, left: uint64(total)}
	for len(d.b) > 0 {
		if _, err := d.next(); err != nil {
			return err
		}
	}
	if d.left != 0 {
		return fmt.Errorf("runs cover %d of the %d data bytes", uint64(total)-d.left, total)
	}
	return nil
}

// visDecodeRuns checks a run list (visCheckRuns) and then calls visit for
// each run with its offset in the segment. Nothing a peer sends makes it
// panic or visit a run outside the segment.
func visDecodeRuns(list []byte, base, size uint64, total int, visit func(off uint64, n int)) error {
	if err := visCheckRuns(list, base, size, total); err != nil {
		return err
	}
	d := runDec{b: list, base: base, size: size, left: uint64(total)}
	for len(d.b) > 0 {
		g, _ := d.next()
		for i, off := 0, g.off; i < g.r; i, off = i+1, off+g.step {
			visit(uint64(off), g.n)
		}
	}
	return nil
}

// visScatter writes data to the runs of a checked list in mem (the
// segment) and visGather reads them from mem into data.
func visScatter(mem []byte, list []byte, base uint64, data []byte) {
	visMove(mem, list, base, data, true)
}

func visGather(data []byte, list []byte, base uint64, mem []byte) {
	visMove(mem, list, base, data, false)
}

// visMove copies between data and the runs of list in mem, towards mem if
// scatter. Runs of 8 bytes, the common small chunk, move as one word.
func visMove(mem []byte, list []byte, base uint64, data []byte, scatter bool) {
	d := runDec{b: list, base: base, size: uint64(len(mem)), left: uint64(len(data))}
	for len(d.b) > 0 {
		g, err := d.next()
		if err != nil {
			return // not reached: the list was checked
		}
		off, n := g.off, int64(g.n)
		switch {
		case n == 8 && scatter:
			for range g.r {
				*(*[8]byte)(mem[off : off+8]) = *(*[8]byte)(data)
				data, off = data[8:], off+g.step
			}
		case n == 8:
			for range g.r {
				*(*[8]byte)(data) = *(*[8]byte)(mem[off : off+8])
				data, off = data[8:], off+g.step
			}
		default:
			for range g.r {
				if scatter {
					copyRun(mem[off:off+n], data[:n])
				} else {
					copyRun(data[:n], mem[off:off+n])
				}
				data, off = data[n:], off+g.step
			}
		}
	}
}

// visPairs reports how many (local run, remote run) pairs a call's sides
// make when they pair up one to one with runs of at most maxRun bytes
// (paired vector lists, indexed lists of one length and count, strided
// patterns of the same shape with at most one level): path (b) then packs
// and unpacks by pair index in tight loops instead of walking two cursors.
// 0: they do not.
func visPairs(l, r *visSide, maxRun int) int {
	switch {
	case l.kind == visVector && l.paired && l.maxLen <= maxRun:
		return len(l.bufs)
	case l.kind == visIndexed && r.kind == visIndexed && l.ilen == r.ilen && len(l.bufs) == len(r.addrs) && l.ilen > 0 && l.ilen <= maxRun:
		return len(l.bufs)
	case l.kind == visStrided && l.st.nlev <= 1 && l.st.nlev == r.st.nlev && l.st.runLen == r.st.runLen && l.st.cnt == r.st.cnt && l.st.runLen <= maxRun:
		if l.st.nlev == 0 {
			return 1
		}
		return l.st.cnt[0]
	}
	return 0
}

// pairLocal is the local run of pair i (visPairs); it may be empty (vector).
func (s *visSide) pairLocal(i int) []byte {
	switch s.kind {
	case visVector:
		return s.bufs[i]
	case visIndexed:
		return s.bufs[i][:s.ilen]
	}
	off := s.base + int64(i)*int64(s.st.str[0]) // nlev 0: i is 0
	return s.buf[off : off+int64(s.st.runLen)]
}

// pairRemote is the owner address of the remote run of pair i.
func (s *visSide) pairRemote(i int) uint64 {
	switch s.kind {
	case visVector:
		return uint64(s.vecs[i].Addr) + s.adj
	case visIndexed:
		return uint64(s.addrs[i]) + s.adj
	}
	return uint64(s.base) + s.adj + uint64(int64(i)*int64(s.st.str[0]))
}

// hdrScratch returns a scratch buffer of at least n bytes for a run list.
func (s *visState) hdrScratch(n int) *[]byte {
	if p, ok := s.hdr.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	b := make([]byte, n)
	return &b
}

// visPutAM runs a validated put on path (b); pc, if not nil, is the armed
// peer-completion notification it consumed.
func (c *Client) visPutAM(v *visCall, j int, pc *visPC) (Event, error) {
	lim := c.cd.Limits(j).MaxMedium
	id, op := c.visStart(j, v.mode, ECPut)
	gen := int32(op.gen)
	hp := c.vis.hdrScratch(lim)
	defer c.vis.hdr.Put(hp)
	rc, lc := v.remote.cursor(), v.local.cursor()
	np, pi := visPairs(&v.local, &v.remote, lim/4), 0 // np > 0: pack by pair index
	var ra uint64                                     // current remote run: address and bytes left
	var rn int
	var lb []byte // rest of the current local run
	remaining := v.local.total
	pcLen, pcSent := 0, pc == nil
	if pc != nil {
		pcLen = len(pc.payload)
	}
	for first := true; remaining > 0; first = false {
		var sf conduit.SendFlags
		if first && v.flags&FlagImmediate != 0 {
			sf = conduit.Immediate // only the first message: nothing initiated on ErrNoOp
		}
		reserve := 0
		if first {
			reserve = pcLen
		}
		p, err := c.cd.Prepare(j, true, false, min(lim, reserve+2*runEntryMax+64), lim, sf)
		if err != nil {
			if first {
				return abandonOp(c, &c.vis.ops, v.op, id, op, v.mode, err)
			}
			op.fail(resourceErr(v.op, "%v", err)) // nothing more is sent; the op completes with the error
			break
		}
		buf, hdr := p.Buf, (*hp)[:lim]
		data, hl := 0, 0
		var enc runEnc
		for room := len(buf) - reserve - 2*runEntryMax; pi < np; pi++ { // paired: whole pairs per message
			lr := v.local.pairLocal(pi)
			n := len(lr)
			if n == 0 {
				continue
			}
			if data+hl+n > room {
				break
			}
			if ra := v.remote.pairRemote(pi); enc.r > 0 && uint64(n) == enc.n && ra-enc.prevEnd == uint64(enc.d) {
				enc.r, enc.prevEnd = enc.r+1, ra+uint64(n) // runEnc.add, extending the pending entry
			} else {
				hl = enc.add(hdr, hl, ra, n)
			}
			copyRun(buf[data:data+n], lr)
			data += n
		}
		if np > 0 {
			remaining -= data
		}
		for np == 0 && remaining > 0 {
			if rn == 0 {
				ra, rn, _ = rc.nextRun()
			}
			space := len(buf) - reserve - data - hl - 2*runEntryMax
			if space <= 0 {
				break
			}
			take := min(rn, space)
			hl = enc.add(hdr, hl, ra, take)
			for k := take; k > 0; {
				if len(lb) == 0 {
					lb = lc.next()
				}
				n := min(k, len(lb))
				copyRun(buf[data:data+n], lb[:n])
				lb, data, k = lb[n:], data+n, k-n
			}
			ra += uint64(take)
			rn -= take
			remaining -= take
		}
		hl = enc.flush(hdr, hl)
		copy(buf[data:], hdr[:hl])
		h := conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: uint8(hVISPut), NArgs: 5, EP: v.dstEP}
		h.Args[0], h.Args[1], h.Args[2], h.Args[3] = id, gen, int32(data), int32(hl)
		nbytes := data + hl
		if pc != nil && first && remaining == 0 {
			copy(buf[nbytes:], pc.payload)
			nbytes += pcLen
			h.Args[4] = int32(pc.handler)
			pcSent = true
		}
		op.left.Add(1)
		if err := c.cd.Commit(&p, h, nbytes); err != nil {
			c.visPartDone(id, op, resourceErr(v.op, "%v", err))
			break
		}
	}
	if !pcSent {
		// EX VIS, "VIS Put Peer Completion": the handler "is invoked after
		// the data movement associated with the VIS operation is complete
		// with respect to the peer process". The data took several messages:
		// wait for all of them to be acknowledged, then notify.
		if err := c.blockUntil(v.op, func() bool { return op.left.Load() == 1 }); err != nil {
			c.visPartDone(id, op, err)
			return EventInvalid, err
		}
		h := conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: uint8(hVISPut), NArgs: 5, EP: v.dstEP}
		h.Args[0], h.Args[1], h.Args[4] = id, gen, int32(pc.handler)
		op.left.Add(1)
		if err := c.cd.Send(j, h, pc.payload, 0); err != nil {
			c.visPartDone(id, op, resourceErr(v.op, "peer completion: %v", err))
		}
	}
	return c.visFinish(id, op, v.mode)
}

// visGetAM runs a validated get on path (b).
func (c *Client) visGetAM(v *visCall, j int) (Event, error) {
	lim := c.cd.Limits(j).MaxMedium
	id, op := c.visStart(j, v.mode, ECGet)
	gen := int32(op.gen)
	op.local = v.local // strided metadata is copied: consumed before return
	rc, lc := v.remote.cursor(), op.local.cursor()
	np, pi := visPairs(&v.local, &v.remote, lim/4), 0 // np > 0: request by pair index
	op.npairs = np
	var ra uint64
	var rn int
	var lb []byte
	remaining := v.local.total
	for first := true; remaining > 0; first = false {
		var sf conduit.SendFlags
		if first && v.flags&FlagImmediate != 0 {
			sf = conduit.Immediate
		}
		p, err := c.cd.Prepare(j, true, false, min(lim, 2*runEntryMax+64), lim, sf)
		if err != nil {
			if first {
				return abandonOp(c, &c.vis.ops, v.op, id, op, v.mode, err)
			}
			op.fail(resourceErr(v.op, "%v", err)) // nothing more is sent; the op completes with the error
			break
		}
		buf := p.Buf
		ch := visChunk{cur: lc, rest: lb, pair: pi}
		data, hl := 0, 0
		var enc runEnc
		for ; pi < np && hl+2*runEntryMax <= len(buf); pi++ { // paired: whole pairs per request
			n := len(v.local.pairLocal(pi))
			if n == 0 {
				continue
			}
			if data+n > lim {
				break
			}
			if ra := v.remote.pairRemote(pi); enc.r > 0 && uint64(n) == enc.n && ra-enc.prevEnd == uint64(enc.d) {
				enc.r, enc.prevEnd = enc.r+1, ra+uint64(n) // runEnc.add, extending the pending entry
			} else {
				hl = enc.add(buf, hl, ra, n)
			}
			data += n
		}
		if np > 0 {
			remaining -= data
		}
		for np == 0 && remaining > 0 && data < lim && hl+2*runEntryMax <= len(buf) {
			if rn == 0 {
				ra, rn, _ = rc.nextRun()
			}
			take := min(rn, lim-data)
			hl = enc.add(buf, hl, ra, take)
			for k := take; k > 0; { // advance the local side past the bytes this request fetches
				if len(lb) == 0 {
					lb = lc.next()
				}
				n := min(k, len(lb))
				lb, k = lb[n:], k-n
			}
			ra += uint64(take)
			rn -= take
			remaining -= take
			data += take
		}
		hl = enc.flush(buf, hl)
		ch.n = data
		op.mu.Lock()
		k := len(op.chunks)
		op.chunks = append(op.chunks, ch)
		op.mu.Unlock()
		h := conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: uint8(hVISGetReq), NArgs: 4, EP: v.dstEP}
		h.Args[0], h.Args[1], h.Args[2], h.Args[3] = id, gen, int32(k), int32(data)
		op.left.Add(1)
		if err := c.cd.Commit(&p, h, hl); err != nil {
			c.visPartDone(id, op, resourceErr(v.op, "%v", err))
			break
		}
	}
	return c.visFinish(id, op, v.mode)
}

// sendPC is path (a)'s peer-completion notification: the data is already in
// the target's segment (copied before this AM is published), so an AM now
// runs the handler there.
func (c *Client) sendPC(op string, j int, ep uint16, pc *visPC) error {
	h := conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: uint8(hVISPC), NArgs: 1, EP: ep}
	h.Args[0] = int32(pc.handler)
	if err := c.cd.Send(j, h, pc.payload, 0); err != nil {
		return resourceErr(op, "peer completion notification: %v", err)
	}
	return nil
}

// runPC runs the client's peer-completion handler h at this (target) rank
// with payload, inside the library request handler that delivered it. EX
// VIS: h must be registered "with gex_flags == GEX_FLAG_AM_MEDIUM |
// GEX_FLAG_AM_REPLY and gex_nargs == 0"; anything else is refused here.
func (c *Client) runPC(ep *EP, src int, h AMIndex, payload []byte) {
	e := ep.handlers[h].Load()
	if e == nil || e.Flags&FlagAMMedium == 0 || e.Flags&FlagAMReply == 0 || e.NArgs != 0 {
		c.rejected.Add(1)
		c.logf("refused a VIS peer completion from rank %d: handler %d is not a registered 0-argument Medium Reply handler", src, h)
		return
	}
	t := &c.vis.tok
	*t = Token{c: c, ep: ep, src: src, entry: e, g: gctx.ID(), live: true}
	e.Fn(t, payload, nil)
	t.live = false
}

// visHandlers are the library's VIS handlers, installed by ClientInit.
func (c *Client) visHandlers() []AMEntry {
	ack := func(t *Token, a []AMArg, status int32) {
		h := conduit.Header{Cat: conduit.Short, Handler: uint8(hVISAck), NArgs: 3}
		h.Args[0], h.Args[1], h.Args[2] = a[0], a[1], status
		c.replyInternal(t, h, nil)
	}
	return []AMEntry{
		{Index: hVISPut, Flags: FlagAMMedium | FlagAMRequest, NArgs: 5, Name: "gex-vis-put", Fn: func(t *Token, p []byte, a []AMArg) {
			dl, hl := int64(a[2]), int64(a[3])
			seg := t.ep.seg.Load()
			if dl < 0 || hl < 0 || dl+hl > int64(len(p)) || seg == nil {
				c.logf("refused a VIS put from rank %d: malformed message (%d data, %d run-list bytes of %d)", t.src, dl, hl, len(p))
				ack(t, a, 1)
				return
			}
			data, runs, pcp := p[:dl], p[dl:dl+hl], p[dl+hl:]
			if err := visCheckRuns(runs, uint64(seg.addr), uint64(len(seg.mem)), int(dl)); err != nil {
				c.logf("refused a VIS put from rank %d: %v", t.src, err)
				ack(t, a, 1)
				return
			}
			visScatter(seg.mem, runs, uint64(seg.addr), data)
			if a[4] != 0 {
				if a[4] < 0 || a[4] > 255 {
					c.logf("refused a VIS peer completion from rank %d: handler index %d", t.src, a[4])
				} else {
					c.runPC(t.ep, t.src, AMIndex(a[4]), pcp)
				}
			}
			ack(t, a, 0)
		}},
		{Index: hVISAck, Flags: FlagAMShort | FlagAMReply, NArgs: 3, Name: "gex-vis-ack", Fn: func(t *Token, _ []byte, a []AMArg) {
			ackPart(c, &c.vis.ops, "VIS", t, a)
		}},
		{Index: hVISGetReq, Flags: FlagAMMedium | FlagAMRequest, NArgs: 4, Name: "gex-vis-get", Fn: func(t *Token, p []byte, a []AMArg) {
			h := conduit.Header{Cat: conduit.Medium, Handler: uint8(hVISGetRep), NArgs: 4}
			h.Args[0], h.Args[1], h.Args[2] = a[0], a[1], a[2]
			n := int(a[3])
			seg := t.ep.seg.Load()
			var err error
			switch {
			case seg == nil:
				err = errors.New("no segment is attached")
			case n <= 0 || n > c.cd.Limits(t.src).MaxMedium:
				err = fmt.Errorf("reply of %d bytes", n)
			default:
				err = visCheckRuns(p, uint64(seg.addr), uint64(len(seg.mem)), n)
			}
			if err != nil {
				c.logf("refused a VIS get from rank %d: %v", t.src, err)
				h.Args[3] = 1
				c.replyInternal(t, h, nil)
				return
			}
			pr, perr := c.cd.Prepare(t.src, false, false, n, n, 0)
			if perr != nil || len(pr.Buf) < n {
				c.logf("VIS get reply to rank %d: %v", t.src, perr)
				return
			}
			visGather(pr.Buf[:n], p, uint64(seg.addr), seg.mem)
			t.replied = true
			if err := c.cd.Commit(&pr, h, n); err != nil {
				c.logf("VIS get reply to rank %d failed: %v", t.src, err)
			}
		}},
		{Index: hVISGetRep, Flags: FlagAMMedium | FlagAMReply, NArgs: 4, Name: "gex-vis-get-reply", Fn: func(t *Token, p []byte, a []AMArg) {
			op := c.vis.ops.lookup(a[0], a[1], t.src)
			if op == nil {
				c.logf("dropped VIS get data from rank %d for an operation not in flight (%d/%d)", t.src, a[0], a[1])
				return
			}
			if a[3] != 0 {
				c.visPartDone(a[0], op, errRemoteRange)
				return
			}
			op.mu.Lock()
			ok := a[2] >= 0 && int(a[2]) < len(op.chunks)
			var ch visChunk
			if ok {
				ch = op.chunks[a[2]]
			}
			op.mu.Unlock()
			if !ok || ch.n != len(p) {
				c.visPartDone(a[0], op, fmt.Errorf("rank %d answered VIS get chunk %d with %d bytes", t.src, a[2], len(p)))
				return
			}
			if np := op.npairs; np > 0 {
				for i := ch.pair; len(p) > 0 && i < np; i++ { // the request took whole pairs
					lr := op.local.pairLocal(i)
					n := len(lr)
					if n > len(p) {
						break
					}
					copyRun(lr, p[:n])
					p = p[n:]
				}
				c.visPartDone(a[0], op, nil)
				return
			}
			cur, lb := ch.cur, ch.rest
			for len(p) > 0 {
				if len(lb) == 0 {
					lb = cur.next()
				}
				n := min(len(lb), len(p))
				copyRun(lb[:n], p[:n])
				lb, p = lb[n:], p[n:]
			}
			c.visPartDone(a[0], op, nil)
		}},
		{Index: hVISPC, Flags: FlagAMMedium | FlagAMRequest, NArgs: 1, Name: "gex-vis-peer-completion", Fn: func(t *Token, p []byte, a []AMArg) {
			if a[0] <= 0 || a[0] > 255 {
				c.logf("refused a VIS peer completion from rank %d: handler index %d", t.src, a[0])
				return
			}
			c.runPC(t.ep, t.src, AMIndex(a[0]), p)
		}},
	}
}
