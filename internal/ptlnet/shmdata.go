package ptlnet

import (
	"time"

	"github.com/gexgo/gexgo/internal/shm"
)

// The shared-memory data path: eager frames in one ring slot, bulk frames
// naming pool buffers, a pending queue when the ring or the pool is full.

// send is Send over shared memory. When the ring or the pool is full, a
// Handler's Send (or any Send while a Handler of this Net runs) queues a copy
// and returns; any other Send waits for the peer's progress goroutine to make
// room (it never waits for the peer's application), so a flood from the
// application is paced by the receiver instead of piling up in memory.
func (c *shmConn) send(hdr, payload []byte, noWait bool) error {
	n := c.n
	c.txMu.Lock()
	off, started := 0, false
	var waitFrom time.Time
	for spins := 0; ; spins++ {
		if c.dead || (c.gone.Load() && !started) {
			if started {
				c.partial = false
			}
			c.txMu.Unlock()
			return ErrUnreachable
		}
		if !started && c.pendH < len(c.pend) {
			c.flushLocked()
		}
		// Only the Send that owns a half-sent message (started) may put frames
		// in the ring until it is complete; the others queue or wait behind it.
		if started || (!c.partial && c.pendH == len(c.pend)) {
			consumed, st, done := c.trySend(hdr, payload[off:], len(payload), started)
			c.kick()
			off, started = off+consumed, st
			if done {
				if c.partial {
					c.partial = false
					c.flushLocked() // what Handlers queued meanwhile
				}
				c.sentN++
				c.txMu.Unlock()
				return nil
			}
		}
		// The owner of a half-sent message has waited before, so it is no
		// Handler's Send: it keeps waiting. Any other Send queues (behind the
		// half-sent message) when a Handler may be running, and never waits
		// then: it may be the Handler's.
		owner := started && c.partial
		if ((noWait || n.inHandler.Load()) && !owner) || n.closed.Load() {
			c.enqueue(hdr, payload[off:], len(payload), started, owner)
			if owner {
				c.partial = false
			}
			n.st.queued.Add(1)
			c.blockLocked()
			c.sentN++
			c.txMu.Unlock()
			return nil
		}
		// Wait for room, letting Handlers queue behind a half-sent message.
		if started {
			c.partial = true
		}
		c.txBlocked.Store(1)
		c.txMu.Unlock()
		if spins == 0 {
			waitFrom = time.Now()
		}
		if spins%16 != 15 || time.Since(waitFrom) < spinFor {
			yield(spins)
		} else {
			if n.enterBell() {
				n.bell.Sleep(func() bool { return c.txBlocked.Load() == 0 || c.gone.Load() || n.closed.Load() }, time.Millisecond)
				// A timed-out fenced Sleep leaves its announcement standing
				// (shm.Bell.Sleep): take it back, or peers would ring us on
				// every Send until our progress next delivers something.
				n.bell.Withdraw()
				n.bellUsers.Add(-1)
			}
		}
		c.txMu.Lock()
	}
}

// commit publishes ticket t; kick rings the peer's Bell after it.
func (c *shmConn) commit(t shm.Ticket) {
	c.tx.Commit(t)
	c.kickDue = true
}

// kick wakes the peer's progress goroutine after commits, if someone sleeps
// on its Bell (shm.Bell.Ring: a load of the sleeper count when nobody does).
// The commit before it is sequentially consistent, or a release store where
// the peer's Sleep issues the asymmetric fence (shm.Bell.Sleep gives the
// argument that no wake-up is lost either way). txMu held.
//
// (Version 1 also skipped the wake-up when the receiver had older frames to
// take, read from the ring's consumer position; the message ring publishes
// that position once per drain, so it says little, and a sleeper withdraws
// its announcement as soon as it finds work.)
func (c *shmConn) kick() {
	if c.kickDue {
		c.kickDue = false
		c.peerBell.Ring()
	}
}

// trySend writes as much of one message as the ring and pool take: rest is
// the payload not yet sent (total bytes in all), started whether its first
// frame went out. It returns the bytes of rest consumed, whether the first
// frame is out now, and whether the message is complete. txMu held.
func (c *shmConn) trySend(hdr, rest []byte, total int, started bool) (consumed int, startedOut, done bool) {
	if !started && eagerFits(txEagerMax, len(hdr), total) {
		fl := sOffEager + len(hdr) + total
		if fl <= shm.MailData && c.mailInOrder() {
			if d, ok := c.tx.ReserveMail(); ok {
				putEager(d, hdr, rest)
				c.tx.CommitMail()
				c.kickDue = true
				c.lastMail = true
				return len(rest), true, true
			}
		}
		d, t, ok := c.tx.ReserveOne(fl)
		if !ok {
			return 0, false, false
		}
		putEager(d, hdr, rest)
		c.commit(t)
		c.lastMail = false
		return len(rest), true, true
	}
	c.lastMail = false
	for !started || consumed < len(rest) {
		idx, buf, ok := c.txPool.TryAlloc()
		if !ok {
			return consumed, started, false
		}
		fl := sOffBulkH
		if !started {
			fl += len(hdr)
		}
		d, t, ok := c.tx.ReserveOne(fl)
		if !ok {
			c.txPool.Free(idx)
			return consumed, started, false
		}
		k := min(len(rest)-consumed, len(buf))
		copy(buf, rest[consumed:consumed+k])
		putBulk(d, !started, hdr, uint64(total), idx, k)
		c.commit(t)
		started = true
		consumed += k
	}
	return consumed, true, true
}

// mailInOrder reports whether a frame put in the ring's mailbox now
// (shm.MsgRing.ReserveMail, outside the ring's order) would still be
// delivered after every frame sent before it, as Portals needs: messages
// from one initiator to one target are matched and delivered in the order
// sent (Portals 4.3 section 2.7, Ordering, 2.7.1-2.7.2: matching in arrival order, the
// max_waw_ordered_size guarantees; puts to one ME with a locally
// managed offset, use-once MEs and the event order all depend on it). It
// holds when every earlier frame has been delivered: the last frame went
// to the mailbox (whose ReserveMail succeeds only once the receiver has
// released it, after its Handler ran, and that frame was itself sent
// with nothing earlier outstanding), or the receiver's published position
// has caught up with every ring frame reserved. Frames later than a
// mailbox frame may go to the ring while it is outstanding: the receiver
// takes the mailbox before any ring frame (drain). A stale position only
// sends a frame to the ring. After a look at the position that found
// frames outstanding, mailSkipAfterRing frames skip the look (a flood
// keeps the ring busy, and the position's line is the receiver's). txMu
// held.
func (c *shmConn) mailInOrder() bool {
	if c.lastMail {
		return true
	}
	if c.mailSkip > 0 {
		c.mailSkip--
		return false
	}
	if c.tx.Released() == c.tx.Reserved() {
		return true
	}
	c.mailSkip = mailSkipAfterRing
	return false
}

// mailSkipAfterRing: see mailInOrder.
const mailSkipAfterRing = 16

// enqueue copies a message (or its unsent rest) to the pending queue, at its
// head when front (the rest of a half-sent message others queued behind).
// txMu held.
func (c *shmConn) enqueue(hdr, rest []byte, total int, started, front bool) {
	if c.pendH == len(c.pend) {
		c.pend, c.pendH, c.arena = c.pend[:0], 0, c.arena[:0]
		c.hasPend.Store(true)
		c.n.pending.Add(1)
	}
	it := pendItem{n: len(hdr) + len(rest), hl: len(hdr), pos: len(hdr), total: total, started: started}
	if it.n >= pendBig {
		it.big = append(append(make([]byte, 0, it.n), hdr...), rest...)
	} else {
		it.off = len(c.arena)
		c.arena = append(append(c.arena, hdr...), rest...)
	}
	switch {
	case !front:
		c.pend = append(c.pend, it)
	case c.pendH > 0:
		c.pendH--
		c.pend[c.pendH] = it
	default:
		c.pend = append(c.pend, pendItem{})
		copy(c.pend[1:], c.pend)
		c.pend[0] = it
	}
}

// bytes returns a queued message's bytes.
func (c *shmConn) bytesOf(it *pendItem) []byte {
	if it.big != nil {
		return it.big
	}
	return c.arena[it.off : it.off+it.n]
}

// flushLocked sends queued messages in order while there is room, unless a
// Send is half-way through a message (partial). txMu held.
func (c *shmConn) flushLocked() {
	if c.partial {
		return
	}
	sent := false
	for c.pendH < len(c.pend) {
		it := &c.pend[c.pendH]
		b := c.bytesOf(it)
		consumed, started, done := c.trySend(b[:it.hl], b[it.pos:], it.total, it.started)
		sent = sent || started != it.started || consumed > 0
		it.pos += consumed
		it.started = started
		if !done {
			break
		}
		*it = pendItem{}
		c.pendH++
	}
	if sent {
		c.kick()
	}
	switch {
	case c.pendH == len(c.pend) && c.hasPend.Load():
		c.pend, c.pendH, c.arena = c.pend[:0], 0, c.arena[:0]
		c.hasPend.Store(false)
		c.n.pending.Add(-1)
	case c.pendH >= 1024 && 2*c.pendH >= len(c.pend):
		// Compact: drop the sent prefix of the queue and of the arena.
		live := c.pend[c.pendH:]
		base := -1
		for i := range live {
			if live[i].big == nil {
				if base < 0 {
					base = live[i].off
				}
				live[i].off -= base
			}
		}
		if base > 0 {
			c.arena = c.arena[:copy(c.arena, c.arena[base:])]
		} else if base < 0 {
			c.arena = c.arena[:0]
		}
		c.pend = c.pend[:copy(c.pend, live)]
		c.pendH = 0
	}
}

// blockLocked asks the receiver to ring our doorbell when it frees room, then
// tries once more (the receiver may have freed room before it could see the
// request). txMu held.
func (c *shmConn) blockLocked() {
	c.txBlocked.Store(1)
	c.flushLocked()
}

// flush is flushLocked for the progress goroutine. A sender that holds txMu
// flushes the queue itself before it sends, so a busy lock is skipped.
func (c *shmConn) flush() {
	if !c.txMu.TryLock() {
		return
	}
	if !c.dead && c.pendH < len(c.pend) {
		c.flushLocked()
		if c.pendH < len(c.pend) {
			c.blockLocked()
		}
	}
	c.txMu.Unlock()
}

// dropPending discards the queue (the peer is gone). txMu held.
func (c *shmConn) dropPending() {
	if c.pendH < len(c.pend) {
		c.n.st.dropped.Add(uint64(len(c.pend) - c.pendH))
	}
	if c.hasPend.Load() {
		c.hasPend.Store(false)
		c.n.pending.Add(-1)
	}
	c.pend, c.pendH, c.arena = nil, 0, nil
}

// drain runs the Handler for up to max messages of the peer's ring. Net.rxMu held.
func (c *shmConn) drain(n *Net, max int) int {
	if c.rx == nil {
		return 0
	}
	k, got := 0, 0
	var f slotFrame
	lookMail := true
	for k < max {
		// The mailbox's frame, if any, comes before every frame in the ring:
		// the sender uses it only once all its earlier frames were delivered
		// (mailInOrder), so any ring frame still here was sent after it. It
		// is looked at after the ring (a ring frame seen implies that a
		// mailbox frame committed before it is visible too). Once a ring
		// frame was seen with the mailbox empty, no frame can enter the
		// mailbox before this drain publishes its releases (the sender needs
		// that frame delivered and published first), so the rest of the
		// drain skips the look: a load less per frame in a flood.
		d, ok := c.rx.Peek()
		mail := false
		if lookMail {
			var dm []byte
			if dm, mail = c.rx.PeekMail(); mail {
				d = dm
			} else {
				lookMail = false
			}
		}
		if !ok && !mail {
			break
		}
		if err := decodeSlotInto(d, c.rxPool.NumBufs(), c.rxPool.BufSize(), &f); err != nil {
			n.st.malformed.Add(1)
			c.asmOn = false
			c.releaseRx(mail)
			k++
			continue
		}
		switch f.kind {
		case slotEager:
			if c.asmOn {
				n.st.malformed.Add(1)
				c.asmOn = false
			}
			hl := copy(n.hdrBuf[:], f.hdr)
			got++
			n.hb(c.peer, n.hdrBuf[:hl:hl], f.payload)
			c.releaseRx(mail)
		case slotBulkFirst:
			if c.asmOn {
				n.st.malformed.Add(1)
				c.asmOn = false
			}
			buf, _ := c.rxPool.Buf(f.buf)
			chunk := buf[:f.n:f.n]
			if f.total == uint64(f.n) {
				hl := copy(n.hdrBuf[:], f.hdr)
				got++
				n.hb(c.peer, n.hdrBuf[:hl:hl], chunk)
			} else {
				c.asmHL = copy(c.asmHdr[:], f.hdr)
				c.asmTotal = int(f.total)
				if cap(c.asm) < c.asmTotal {
					c.asm = make([]byte, c.asmTotal)
				}
				c.asmOff = copy(c.asm[:c.asmTotal], chunk)
				c.asmOn = true
			}
			c.releaseRx(mail)
			c.freeBuf(f.buf)
		case slotBulkCont:
			buf, _ := c.rxPool.Buf(f.buf)
			if !c.asmOn || f.n > c.asmTotal-c.asmOff {
				n.st.malformed.Add(1)
				c.asmOn = false
			} else {
				c.asmOff += copy(c.asm[c.asmOff:c.asmTotal], buf[:f.n])
				if c.asmOff == c.asmTotal {
					c.asmOn = false
					got++
					n.hb(c.peer, c.asmHdr[:c.asmHL:c.asmHL], c.asm[:c.asmTotal:c.asmTotal])
					if cap(c.asm) > 64<<20 {
						c.asm = nil
					}
				}
			}
			c.releaseRx(mail)
			c.freeBuf(f.buf)
		}
		k++
	}
	// The slots are free for the sender from here: one store per drain, none
	// when nothing was released (a pad skipped alone is published too).
	c.rx.Publish()
	if k == 0 {
		return 0
	}
	if got > 0 {
		n.st.recv.Add(uint64(got))
	}
	if c.rxBlocked.Load() != 0 && c.rxBlocked.Swap(0) != 0 {
		c.peerBell.Ring()
	}
	return k
}

// releaseRx frees the frame drain took: the mailbox's if mail, else the
// ring's.
func (c *shmConn) releaseRx(mail bool) {
	if mail {
		c.rx.ReleaseMail()
	} else {
		c.rx.Release()
	}
}

// freeBuf returns a pool buffer of the peer's; a double free is the peer's
// doing and is counted.
func (c *shmConn) freeBuf(idx int) {
	if c.rxPool.Free(idx) != nil {
		c.n.st.malformed.Add(1)
	}
}

// reapGone retires connections whose peer is gone once their ring is drained.
func (n *Net) reapGone() {
	n.anyGone.Store(false)
	for _, c := range *n.rxConns.Load() {
		if !c.gone.Load() {
			continue
		}
		n.rxMu.Lock()
		if n.stopped {
			n.rxMu.Unlock()
			return
		}
		n.progressLocked()
		if !c.rx.Empty() {
			n.anyGone.Store(true) // again next time
			n.rxMu.Unlock()
			continue
		}
		n.dropConn(c.peer.ID, c, c)
		n.st.lost.Add(1)
		c.sock.Close()
		c.release()
		c.rx = nil
		n.rxMu.Unlock()
	}
}
