package shm

import (
	"encoding/binary"
	"strconv"
	"sync/atomic"
	"unsafe"
)

// MsgRing header: magic and version.
const (
	MsgRingMagic   = 0x324d5847 // "GXM2" little-endian
	MsgRingVersion = 2          // 2: the mailbox line at offset 64
)

// MsgRing layout: byte offsets from the start of the ring's byte range, which
// is 64-byte aligned. The producers' word and the consumer's word each have a
// 128-byte block of their own (the adjacent-line prefetcher fetches lines in
// pairs), so a producer reserving never takes the line the consumer publishes
// to, and the reverse.
const (
	mrOffMagic   = 0   // uint32, MsgRingMagic; written last by InitMsgRing
	mrOffVersion = 4   // uint32, MsgRingVersion
	mrOffNSlots  = 8   // uint32, power of two in [mrMinSlots, mrMaxSlots]
	mrOffMail    = 64  // the mailbox: a message word (0 empty, 1 claimed, else committed) and MailData bytes
	mrOffTail    = 128 // uint64 atomic: next ticket to reserve (producers)
	mrOffHead    = 256 // uint64 atomic: first ticket not yet released (published by the consumer)
	mrOffSlots   = 384 // slot 0

	// MsgSlotSize is the size of one slot: a cache line.
	MsgSlotSize = 64

	// Every message starts with an 8-byte word in its first slot, stored
	// last and at once (the commit: the producer's first store to the
	// slot's line is the header, its last this word, so a consumer polling
	// the line takes it from the producer once):
	//	0  uint32 tag: uint32(ticket) | mrTagBit
	//	4  uint16 number of slots the message occupies, >= 1
	//	6  uint16 flags (mrFlagPad: filler up to the end of the ring)
	// and its data follows, contiguous, up to the end of its last slot.
	mrMsgHeader = 8
	mrTagBit    = 1 << 31
	mrFlagPad   = 1

	// mrMailFull is the mailbox's committed word (mrTagBit: any word with
	// it set reads as committed) and mrMailClaimed its word between
	// ReserveMail and CommitMail.
	mrMailFull    = mrTagBit | 1<<32
	mrMailClaimed = 1

	// mailSkipAfterBusy is how many ReserveMail calls skip the mailbox
	// after one found it taken.
	mailSkipAfterBusy = 16

	// MailData is the data length of the mailbox, one slot less its word.
	MailData = MsgSlotSize - mrMsgHeader

	mrMinSlots    = 2
	mrMaxSlots    = 1 << 24 // tags of the same slot one lap apart must differ: nslots < 2^31
	mrMaxMsgSlots = 1<<16 - 1
)

// MsgRing is a view of a bounded multi-producer single-consumer queue of
// variable-length messages in shared memory. A message occupies one or more
// consecutive 64-byte slots (never wrapping around the end: a producer whose
// message would wrap pads the rest of the ring first), so its data is one
// contiguous slice the consumer reads in place.
//
// Compared with Ring it moves fewer cache lines per message: a producer
// never reads a slot before writing it (it learns which slots are free from
// the consumer's head, which it caches and re-reads only when the ring looks
// full), and the consumer writes nothing into a slot of a one-slot message.
// A message of one slot therefore costs one transfer of its line to the
// consumer, plus taking it back exclusive for the next lap.
//
// Beside the slots, a mailbox line holds at most one message of up to
// MailData bytes outside the ring's order (ReserveMail, PeekMail): with one
// message in flight it is reused, where the ring walks a fresh line per
// message.
//
// Any number of producers in any number of processes may call Reserve and
// Commit concurrently. At most one goroutine in all processes consumes
// (Peek, Release, Publish) at a time; consumers that take turns must be
// ordered by a lock of their own, and must all use the same view (the
// consumer's position between Publish calls lives in the view).
//
// A MsgRing value keeps the geometry it validated when it was made: a peer
// that rewrites the header, a tag, a slot count or the head word cannot make
// the view index outside its slots or panic.
type MsgRing struct {
	b      []byte
	slots  unsafe.Pointer // &b[mrOffSlots]
	tail   *atomic.Uint64
	head   *atomic.Uint64
	mail   *atomic.Uint64 // the mailbox word
	mask   uint64
	nslots uint64
	// maxData is MaxData(), computed once (Reserve checks it on every call).
	maxData int

	// relCommit: this producer's view commits with a release store
	// (SetReleaseCommit).
	relCommit bool

	// seenHead is a head value this process has read: every ticket below it
	// is free for producers. Producers re-read head only when seenHead says
	// the ring is full.
	seenHead atomic.Uint64

	// mailSkip: ReserveMail calls left that skip the mailbox after one
	// found it taken (a hint for this process's producers; see ReserveMail).
	mailSkip atomic.Uint32

	// The consumer's state, guarded by the consumer's lock: chead is the
	// first ticket not yet released (head lags behind it until Publish), cur
	// the slots of the message the last Peek returned.
	chead uint64
	cur   uint64
}

func checkMsgRingGeometry(nslots uint64) error {
	if nslots < mrMinSlots || nslots > mrMaxSlots || nslots&(nslots-1) != 0 {
		return formatErr("msgring", "nslots", strconv.FormatUint(nslots, 10)+": not a power of two in [2, 2^24]")
	}
	return nil
}

// MsgRingBytes returns the bytes a MsgRing of nslots slots occupies (header
// included). It panics if nslots is not a power of two in [2, 2^24]: the
// argument is the caller's constant.
func MsgRingBytes(nslots int) int {
	if nslots < 0 {
		panic(formatErr("msgring", "nslots", "negative"))
	}
	if err := checkMsgRingGeometry(uint64(nslots)); err != nil {
		panic(err)
	}
	return mrOffSlots + nslots*MsgSlotSize
}

// InitMsgRing formats b as an empty MsgRing of nslots slots and returns the
// owner's view. b must be 64-byte aligned and at least MsgRingBytes(nslots)
// long. No other party may use b while it is being formatted; the magic word
// is stored last.
func InitMsgRing(b []byte, nslots int) (*MsgRing, error) {
	if nslots < 0 {
		return nil, formatErr("msgring", "nslots", "negative")
	}
	if err := checkMsgRingGeometry(uint64(nslots)); err != nil {
		return nil, err
	}
	if need := mrOffSlots + nslots*MsgSlotSize; len(b) < need {
		return nil, formatErr("msgring", "length", strconv.Itoa(len(b))+" bytes, need "+strconv.Itoa(need))
	}
	if err := checkBase("msgring", b); err != nil {
		return nil, err
	}
	Uint32At(b, mrOffMagic).Store(0)
	binary.LittleEndian.PutUint32(b[mrOffVersion:], MsgRingVersion)
	binary.LittleEndian.PutUint32(b[mrOffNSlots:], uint32(nslots))
	clear(b[12:mrOffSlots])
	for i := range nslots {
		clear(b[mrOffSlots+i*MsgSlotSize : mrOffSlots+i*MsgSlotSize+mrMsgHeader])
	}
	q := newMsgRing(b, uint64(nslots))
	Uint32At(b, mrOffMagic).Store(MsgRingMagic)
	return q, nil
}

// AttachMsgRing returns a view of the MsgRing a peer formatted at the start
// of b, after validating magic, version and geometry against len(b) and b's
// alignment; the error names the offending field. Whatever the bytes, it
// does not panic, and neither do the methods of the view it returns.
func AttachMsgRing(b []byte) (*MsgRing, error) {
	if len(b) < mrOffSlots {
		return nil, formatErr("msgring", "length", strconv.Itoa(len(b))+" bytes, less than the "+
			strconv.Itoa(mrOffSlots)+"-byte header")
	}
	if err := checkBase("msgring", b); err != nil {
		return nil, err
	}
	if m := Uint32At(b, mrOffMagic).Load(); m != MsgRingMagic {
		return nil, formatErr("msgring", "magic", "0x"+strconv.FormatUint(uint64(m), 16)+", want 0x324d5847 (GXM2)")
	}
	if v := binary.LittleEndian.Uint32(b[mrOffVersion:]); v != MsgRingVersion {
		return nil, formatErr("msgring", "version", strconv.FormatUint(uint64(v), 10)+", want "+strconv.Itoa(MsgRingVersion))
	}
	nslots := uint64(binary.LittleEndian.Uint32(b[mrOffNSlots:]))
	if err := checkMsgRingGeometry(nslots); err != nil {
		return nil, err
	}
	if need := mrOffSlots + nslots*MsgSlotSize; uint64(len(b)) < need {
		return nil, formatErr("msgring", "nslots", strconv.FormatUint(nslots, 10)+" slots need "+
			strconv.FormatUint(need, 10)+" bytes, have "+strconv.Itoa(len(b)))
	}
	return newMsgRing(b, nslots), nil
}

func newMsgRing(b []byte, nslots uint64) *MsgRing {
	n := mrOffSlots + int(nslots*MsgSlotSize)
	b = b[:n:n]
	q := &MsgRing{
		b:      b,
		slots:  unsafe.Pointer(unsafe.SliceData(b[mrOffSlots:])),
		tail:   Uint64At(b, mrOffTail),
		head:   Uint64At(b, mrOffHead),
		mail:   Uint64At(b, mrOffMail),
		mask:   nslots - 1,
		nslots: nslots,
	}
	q.maxData = int(min(nslots/2, mrMaxMsgSlots))*MsgSlotSize - mrMsgHeader
	h := q.head.Load()
	q.seenHead.Store(h)
	q.chead = h
	return q
}

// Cap returns the number of slots.
func (q *MsgRing) Cap() int { return int(q.nslots) }

// Released returns the consumer's published position: the slots released
// so far, a number that only grows (a snapshot).
func (q *MsgRing) Released() uint64 { return q.head.Load() }

// Reserved returns the producers' position: the slots reserved so far by
// every producer, a number that only grows (a snapshot).
func (q *MsgRing) Reserved() uint64 { return q.tail.Load() }

// MaxData returns the largest data length of one message: half the ring
// (so that a message and the pad before it always fit once the ring has
// drained), or 65535 slots, less the message word.
func (q *MsgRing) MaxData() int { return q.maxData }

// A Ticket names a message between Reserve and Commit.
type Ticket struct {
	pos, k uint64
	w      *atomic.Uint64 // the message word at pos (so that Commit inlines)
}

// commitWord is the message word of a k-slot message at pos.
func commitWord(pos, k uint64, flags uint16) uint64 {
	return uint64(uint32(pos)|mrTagBit) | k<<32 | uint64(flags)<<48
}

// MsgSlots returns the number of slots a message of n data bytes occupies.
func MsgSlots(n int) int { return (n + mrMsgHeader + MsgSlotSize - 1) / MsgSlotSize }

// Reserve claims room for a message of n data bytes (0 <= n <= MaxData())
// and returns its data, at least n bytes (the rest of its last slot
// included, with whatever an earlier message left there), and the ticket to
// pass to Commit; ok == false if the ring has no room now (or n is out of
// range). It never waits. A reserved message blocks the consumer at its
// position until it is committed, so Commit must follow promptly, on every
// path.
//
// Cost: a load of tail and of the cached head, and a CAS on tail; the head
// word is read only when the cached value says the ring is full.
func (q *MsgRing) Reserve(n int) (data []byte, ticket Ticket, ok bool) {
	if uint(n) > uint(q.maxData) {
		return nil, Ticket{}, false
	}
	k := uint64(MsgSlots(n))
	for {
		pos := q.tail.Load()
		end, room := q.span(pos, k)
		if !room {
			return nil, Ticket{}, false
		}
		if q.tail.CompareAndSwap(pos, end) {
			start := end - k
			if start != pos {
				q.pad(pos, start-pos)
			}
			return q.data(start, k), Ticket{start, k, q.wordAt(start)}, true
		}
	}
}

// span returns where a k-slot message reserved at tail position pos ends
// (after a pad to the end of the ring where it would wrap), and whether the
// ring has room for it: the cached head is re-read only when it says the
// ring is full.
func (q *MsgRing) span(pos, k uint64) (end uint64, room bool) {
	total := k
	if off := pos & q.mask; off+k > q.nslots {
		total = q.nslots - off + k // pad to the end of the ring, start at slot 0
	}
	end = pos + total
	if end-q.seenHead.Load() > q.nslots {
		h := q.head.Load()
		if end-h > q.nslots {
			return 0, false
		}
		q.seenHead.Store(h)
	}
	return end, true
}

// pad writes, at pos, a pad of k slots to the end of the ring (a message
// that would wrap starts at slot 0 after it; rare, so out of line).
func (q *MsgRing) pad(pos, k uint64) {
	storeRelease64(q.wordAt(pos), commitWord(pos, k, mrFlagPad))
}

// ReserveOne is Reserve for a ring whose producers are ordered by a lock of
// their own (one producer at a time, in any process): tail is advanced with
// a release store instead of a compare-and-swap, a locked instruction less
// per message. Every producer of the ring must then use ReserveOne under
// that lock; mixing it with Reserve loses messages.
func (q *MsgRing) ReserveOne(n int) (data []byte, ticket Ticket, ok bool) {
	if uint(n) > uint(q.maxData) {
		return nil, Ticket{}, false
	}
	k := uint64(MsgSlots(n))
	pos := q.tail.Load()
	end, room := q.span(pos, k)
	if !room {
		return nil, Ticket{}, false
	}
	storeRelease64(q.tail, end)
	start := end - k
	if start != pos {
		q.pad(pos, start-pos)
	}
	return q.data(start, k), Ticket{start, k, q.wordAt(start)}, true
}

// Commit publishes the message of ticket: every write to its data made
// before Commit is visible to the consumer that Peeks it. Commit does not
// wake a sleeping consumer: ring its Bell after committing.
//
// By default the store is sequentially consistent (on amd64 an XCHG, which
// waits for the slot's cache line), not merely a release: Bell.Ring then
// loads the consumer's sleeper count, and that load must not be satisfied
// before the commit is visible, or a consumer announcing itself as a
// sleeper at that moment would check the ring, miss the message, and sleep
// with nobody to wake it (the store-load order that Bell.Sleep's argument
// needs). After SetReleaseCommit it is a release store (a plain store on
// amd64), and the consumer's membarrier supplies that order (Bell.Sleep).
// Commit inlines into the sender: its one call is the store itself
// (commitStore, which must stay a call to be a release store).
func (q *MsgRing) Commit(t Ticket) {
	commitStore(t.w, uint64(uint32(t.pos)|mrTagBit)|t.k<<32, q.relCommit)
}

// SetReleaseCommit makes this view's Commit a release store. Only for a
// producer whose process registered with EnableHeavyFence, committing to a
// consumer that sleeps on a Bell made by WithHeavyFence (and rings that Bell
// after each Commit); otherwise a sleeping consumer may miss a message until
// its timeout. Call it before the view is shared among goroutines.
func (q *MsgRing) SetReleaseCommit() { q.relCommit = true }

// ReleaseCommit reports whether this view commits with a release store.
func (q *MsgRing) ReleaseCommit() bool { return q.relCommit }

// Peek returns the data of the oldest committed message (all of its slots
// less the message word; the caller decodes its own length), or ok == false
// if there is none yet. Consumer only. The data stays valid, and stays in
// the ring, until Release.
func (q *MsgRing) Peek() (data []byte, ok bool) {
	h := q.chead
	w := q.wordAt(h).Load()
	// The common message inline: this lap's tag, no flags, a slot count in
	// [1, the slots left before the end of the ring]. Anything else (no
	// message yet, a pad, a corrupt count) out of line.
	if k := w >> 32; w&^(0xffff<<32) == uint64(uint32(h)|mrTagBit) && k-1 < q.nslots-h&q.mask {
		q.cur = k
		return q.data(h, k), true
	}
	return q.peekSlow(w)
}

// peekSlow is Peek for the message word w read at chead when it is not a
// plain message: none yet, a pad (skipped), or a corrupt slot count.
func (q *MsgRing) peekSlow(w uint64) (data []byte, ok bool) {
	for {
		h := q.chead
		if uint32(w) != uint32(h)|mrTagBit {
			return nil, false
		}
		k, flags := w>>32&0xffff, uint16(w>>48)
		if off := h & q.mask; k == 0 || off+k > q.nslots {
			// A corrupt slot count (only a misbehaving peer writes one):
			// take the message as one slot, so the position stays inside
			// the ring; the caller's decoder sees whatever it holds.
			k = 1
		}
		q.cur = k
		if flags&mrFlagPad == 0 {
			return q.data(h, k), true
		}
		q.Release()
		w = q.wordAt(q.chead).Load()
	}
}

// Release frees the message the last successful Peek returned. Consumer
// only, after a successful Peek. The slots become free for producers at
// the next Publish.
//
// A later message may start at any slot after the first of this one, where
// a producer may not yet have written anything when the consumer gets
// there: the slot's first word, payload bytes now, must not read as that
// message's tag. Every slot is released once per lap (as a message's first
// slot, which holds this lap's tag, or as a later slot of a message or a
// pad), and the only tag the consumer can expect at slot s before it is
// released again is next lap's. So Release loads the first word of each
// later slot and clears it only if it is that tag: a load (in the cache
// when the handler read the payload) rather than a store per slot, which
// would leave the line modified here for the producer to fetch back.
func (q *MsgRing) Release() {
	if q.cur == 1 { // a one-slot message: nothing to look at (inlined)
		q.chead++
		q.cur = 0
		return
	}
	q.releaseSlots()
}

// releaseSlots is Release for a message of several slots.
func (q *MsgRing) releaseSlots() {
	h := q.chead
	for i := uint64(1); i < q.cur; i++ {
		s := h + i
		if uint32(q.wordAt(s).Load()) == uint32(s+q.nslots)|mrTagBit {
			q.clearWord(s)
		}
	}
	q.chead = h + q.cur
	q.cur = 0
}

// Publish makes the messages released since the last Publish free for the
// producers (one release store, none if nothing was released; the loads and
// any clearing stores of Release are ordered before it). Consumer only; call it once a
// batch of Peek/Release is done, before waiting for anything.
func (q *MsgRing) Publish() {
	if q.head.Load() != q.chead {
		storeRelease64(q.head, q.chead)
	}
}

// Empty reports whether Peek would find nothing (a pad it would skip counts
// as something) and PeekMail nothing either. Consumer only. Other
// goroutines use Waiting (a hint), or take the consumer's lock first.
func (q *MsgRing) Empty() bool {
	h := q.chead
	return uint32(q.wordAt(h).Load()) != uint32(h)|mrTagBit && q.mail.Load()&mrTagBit == 0
}

// The mailbox: one line beside the ring (in its header block) that holds
// at most one message of up to MailData bytes, outside the ring's order.
// A producer that finds it empty writes its message there instead of into
// the ring's next slot, so that in a round trip, with one message in
// flight each way, every message reuses the same line, where the ring would
// walk a fresh line per message (docs/am.md, "Fourth pass: the ring's
// lines"). Messages in the mailbox are not ordered with the ring's: only
// for a caller whose messages need no order among themselves (AMs).

// ReserveMail claims the mailbox (a CAS of its word from empty to claimed:
// one coherence transaction on a line the consumer cleared last) and
// returns its data, MailData bytes, with whatever an earlier message left
// there; ok == false if another message holds it. Any producer; CommitMail
// must follow promptly.
//
// After a ReserveMail found the mailbox taken, the next mailSkipAfterBusy
// calls in this process return ok == false without touching it: in a flood
// the consumer is behind and the mailbox mostly full, and a failing CAS per
// message would take its line away from the consumer each time (the one-way
// flood measured 22.0-22.4 M msg/s with it, 22.3-24.8 without a mailbox).
// With one message in flight each way the mailbox is always empty and the
// hint costs a load.
func (q *MsgRing) ReserveMail() (data []byte, ok bool) {
	if s := q.mailSkip.Load(); s != 0 {
		q.mailSkip.Store(s - 1)
		return nil, false
	}
	if !q.mail.CompareAndSwap(0, mrMailClaimed) {
		q.mailSkip.Store(mailSkipAfterBusy)
		return nil, false
	}
	return q.b[mrOffMail+mrMsgHeader : mrOffMail+MsgSlotSize : mrOffMail+MsgSlotSize], true
}

// CommitMail publishes the mailbox message ReserveMail claimed, with the
// ordering of Commit (a sequentially consistent store, or a release store
// after SetReleaseCommit; ring the consumer's Bell after it).
func (q *MsgRing) CommitMail() { commitStore(q.mail, mrMailFull, q.relCommit) }

// PeekMail returns the data of the message in the mailbox (MailData bytes;
// the caller decodes its own length), or ok == false if there is none.
// Consumer only; the data stays valid until ReleaseMail.
func (q *MsgRing) PeekMail() (data []byte, ok bool) {
	if q.mail.Load()&mrTagBit == 0 {
		return nil, false
	}
	return q.b[mrOffMail+mrMsgHeader : mrOffMail+MsgSlotSize : mrOffMail+MsgSlotSize], true
}

// ReleaseMail empties the mailbox after a successful PeekMail, with a
// release store: every read of its data is done before a producer claims
// it again. Consumer only.
func (q *MsgRing) ReleaseMail() { storeRelease64(q.mail, 0) }
