package shm

import (
	"encoding/binary"
	"strconv"
	"sync/atomic"
)

// Ring header: magic and version.
const (
	RingMagic   = 0x51525847 // "GXRQ" little-endian
	RingVersion = 1
)

// Ring layout: byte offsets from the start of the ring's byte range, which is
// 64-byte aligned. See the package documentation for who writes which word.
const (
	ringOffMagic    = 0   // uint32, RingMagic; written last by InitRing
	ringOffVersion  = 4   // uint32, RingVersion
	ringOffNSlots   = 8   // uint32, power of two in [ringMinSlots, ringMaxSlots]
	ringOffSlotSize = 12  // uint32, multiple of 64 in [64, ringMaxSlotSize]
	ringOffTail     = 64  // uint64 atomic, producers (own cache line)
	ringOffHead     = 128 // uint64 atomic, consumer (own cache line)
	ringOffSlots    = 256 // slot 0; 192..255 reserved (zero)

	slotOffSeq  = 0 // uint64 atomic, per-slot sequence word
	slotOffData = 8 // first data byte

	ringAlign       = 64
	ringMinSlots    = 2 // Vyukov's queue needs two slots: seq = pos+1 must not read as "free"
	ringMaxSlots    = 1 << 30
	ringMaxSlotSize = 1 << 31
)

// Ring is a view of a bounded multi-producer single-consumer queue of
// fixed-size slots in shared memory (Dmitry Vyukov's bounded MPMC queue, used
// with one consumer). Any number of producers in any number of processes may
// call TryReserve and Commit concurrently; at most one goroutine in all
// processes may be the consumer (Peek, Release) at a time, and consumers that
// take turns must be ordered by a lock of their own.
//
// A Ring value holds the geometry it validated when it was made: the header
// words are not re-read, so a peer that rewrites them cannot make the view
// index outside its slots.
type Ring struct {
	b        []byte         // the ring's bytes, RingBytes(nslots, slotSize) long
	slots    []byte         // b[ringOffSlots:]
	tail     *atomic.Uint64 // next ticket to reserve
	head     *atomic.Uint64 // next ticket to consume
	mask     uint64         // nslots - 1
	nslots   uint64
	slotSize uint64
	dataSize int // slotSize - slotOffData
}

func checkRingGeometry(nslots, slotSize uint64) error {
	if nslots < ringMinSlots || nslots > ringMaxSlots || nslots&(nslots-1) != 0 {
		return formatErr("ring", "nslots", strconv.FormatUint(nslots, 10)+": not a power of two in [2, 2^30]")
	}
	if slotSize < 64 || slotSize > ringMaxSlotSize || slotSize%64 != 0 {
		return formatErr("ring", "slotSize", strconv.FormatUint(slotSize, 10)+": not a multiple of 64 in [64, 2^31]")
	}
	return nil
}

func ringGeometryArgs(nslots, slotSize int) error {
	if nslots < 0 || slotSize < 0 {
		return formatErr("ring", "nslots/slotSize", "negative")
	}
	return checkRingGeometry(uint64(nslots), uint64(slotSize))
}

// RingBytes returns the number of bytes a ring of nslots slots of slotSize
// bytes occupies (header included). It panics if the geometry is invalid
// (nslots a power of two >= 2, slotSize a multiple of 64 >= 64), as make
// does on a negative length: the arguments are the caller's constants.
func RingBytes(nslots, slotSize int) int {
	if err := ringGeometryArgs(nslots, slotSize); err != nil {
		panic(err)
	}
	return ringOffSlots + nslots*slotSize
}

func checkBase(layout string, b []byte) error {
	if a := addrOf(b) % ringAlign; a != 0 {
		return formatErr(layout, "address", "start is "+strconv.Itoa(int(a))+" bytes past a 64-byte boundary")
	}
	return nil
}

// InitRing formats b as an empty ring of nslots slots of slotSize bytes and
// returns the owner's view. b must be 64-byte aligned and at least
// RingBytes(nslots, slotSize) long; the ring uses that prefix. No other party
// may use b while it is being formatted; the magic word is stored last.
func InitRing(b []byte, nslots, slotSize int) (*Ring, error) {
	if err := ringGeometryArgs(nslots, slotSize); err != nil {
		return nil, err
	}
	if need := ringOffSlots + nslots*slotSize; len(b) < need {
		return nil, formatErr("ring", "length", strconv.Itoa(len(b))+" bytes, need "+strconv.Itoa(need))
	}
	if err := checkBase("ring", b); err != nil {
		return nil, err
	}
	Uint32At(b, ringOffMagic).Store(0)
	binary.LittleEndian.PutUint32(b[ringOffVersion:], RingVersion)
	binary.LittleEndian.PutUint32(b[ringOffNSlots:], uint32(nslots))
	binary.LittleEndian.PutUint32(b[ringOffSlotSize:], uint32(slotSize))
	clear(b[16:ringOffSlots])
	q := newRing(b, uint64(nslots), uint64(slotSize))
	for i := range q.nslots {
		q.seqAt(i).Store(i)
	}
	q.tail.Store(0)
	q.head.Store(0)
	Uint32At(b, ringOffMagic).Store(RingMagic)
	return q, nil
}

// AttachRing returns a view of the ring that a peer formatted at the start of
// b. It validates the magic, version and geometry against len(b) and b's
// alignment; the error names the offending field. Whatever the bytes, it does
// not panic, and neither do the methods of the view it returns.
func AttachRing(b []byte) (*Ring, error) {
	if len(b) < ringOffSlots {
		return nil, formatErr("ring", "length", strconv.Itoa(len(b))+" bytes, less than the "+
			strconv.Itoa(ringOffSlots)+"-byte header")
	}
	if err := checkBase("ring", b); err != nil {
		return nil, err
	}
	if m := Uint32At(b, ringOffMagic).Load(); m != RingMagic {
		return nil, formatErr("ring", "magic", "0x"+strconv.FormatUint(uint64(m), 16)+", want 0x51525847 (GXRQ)")
	}
	if v := binary.LittleEndian.Uint32(b[ringOffVersion:]); v != RingVersion {
		return nil, formatErr("ring", "version", strconv.FormatUint(uint64(v), 10)+", want 1")
	}
	nslots := uint64(binary.LittleEndian.Uint32(b[ringOffNSlots:]))
	slotSize := uint64(binary.LittleEndian.Uint32(b[ringOffSlotSize:]))
	if err := checkRingGeometry(nslots, slotSize); err != nil {
		return nil, err
	}
	if need := ringOffSlots + nslots*slotSize; uint64(len(b)) < need {
		return nil, formatErr("ring", "nslots*slotSize", strconv.FormatUint(nslots, 10)+"*"+
			strconv.FormatUint(slotSize, 10)+" needs "+strconv.FormatUint(need, 10)+" bytes, have "+
			strconv.Itoa(len(b)))
	}
	return newRing(b, nslots, slotSize), nil
}

// newRing builds the view of a validated geometry.
func newRing(b []byte, nslots, slotSize uint64) *Ring {
	n := ringOffSlots + int(nslots*slotSize)
	b = b[:n:n]
	return &Ring{
		b:        b,
		slots:    b[ringOffSlots:],
		tail:     Uint64At(b, ringOffTail),
		head:     Uint64At(b, ringOffHead),
		mask:     nslots - 1,
		nslots:   nslots,
		slotSize: slotSize,
		dataSize: int(slotSize) - slotOffData,
	}
}

// SlotSize returns the usable data bytes per slot: the slot size less the
// 8-byte sequence word.
func (q *Ring) SlotSize() int { return q.dataSize }

// Cap returns the number of slots.
func (q *Ring) Cap() int { return int(q.nslots) }

// TryReserve claims the next free slot for a producer. It returns the slot's
// data (SlotSize() bytes, with whatever an earlier message left there) and the
// ticket to pass to Commit, or ok == false if the ring is full. It never
// waits. A reserved slot blocks the consumer at that position until it is
// committed, so Commit must follow promptly, on every path.
//
// Cost: a load of tail, a load of the slot's seq and a CAS on tail.
func (q *Ring) TryReserve() (data []byte, ticket uint64, ok bool) {
	pos := q.tail.Load()
	for {
		seq := q.seqAt(pos).Load()
		switch dif := int64(seq - pos); {
		case dif == 0: // free for ticket pos
			if q.tail.CompareAndSwap(pos, pos+1) {
				return q.dataAt(pos), pos, true
			}
			pos = q.tail.Load()
		case dif < 0: // still holds the message of ticket pos-nslots: full
			return nil, 0, false
		default: // another producer took ticket pos: tail has moved on
			next := q.tail.Load()
			if next == pos {
				// Impossible unless a peer corrupted the ring; report full
				// rather than spin.
				return nil, 0, false
			}
			pos = next
		}
	}
}

// Commit publishes the slot of ticket: every write to its data made before
// Commit is visible to the consumer that Peeks it. One atomic store (seq =
// ticket+1). Commit does not wake a sleeping consumer: ring the consumer's
// Bell after committing.
func (q *Ring) Commit(ticket uint64) {
	q.seqAt(ticket).Store(ticket + 1)
}

// Peek returns the data of the oldest committed message (SlotSize() bytes; the
// caller decodes its own length and fields), or ok == false if there is none
// yet. Consumer only. The data stays valid, and stays in the ring, until
// Release. Cost: two loads.
func (q *Ring) Peek() (data []byte, ok bool) {
	h := q.head.Load()
	if q.seqAt(h).Load() != h+1 {
		return nil, false
	}
	return q.dataAt(h), true
}

// Release hands the slot returned by the last successful Peek back to the
// producers (seq = head+nslots) and advances head. Consumer only, and only
// after a successful Peek. Cost: two atomic stores.
func (q *Ring) Release() {
	h := q.head.Load()
	q.seqAt(h).Store(h + q.nslots)
	q.head.Store(h + 1)
}

// Empty reports whether Peek would find nothing. Exact for the consumer; a
// snapshot for anyone else.
func (q *Ring) Empty() bool {
	h := q.head.Load()
	return q.seqAt(h).Load() != h+1
}
