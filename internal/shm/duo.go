package shm

import (
	"strconv"
	"sync/atomic"
)

// Duo layout: one 64-byte line, two halves of DuoHalf bytes, each an 8-byte
// word (0: empty; anything else: a committed message, the word being the
// first 8 bytes of the caller's encoding) and DuoData bytes of data.
const (
	// DuoBytes is the size of a Duo line.
	DuoBytes = 64
	// DuoHalf is the size of one half: its word and its data.
	DuoHalf = 32
	// DuoData is the data length of one half.
	DuoData = DuoHalf - 8
)

// The halves of a Duo.
const (
	DuoAsk    = 0 // the asker's half: the message it sends the answerer
	DuoAnswer = 1 // the answerer's half: the message it sends back
)

// Duo is a view of one cache line shared by two processes, an asker and an
// answerer, that holds at most one message each way: the asker's in the
// first half, the answerer's in the second. A round trip through it (the
// asker writes its half, the answerer reads it and writes the other half,
// the asker reads that) moves the one line back and forth, as a one-word
// ping-pong does, where a request and its reply in two queues move two
// lines, each written on one side and read on the other (docs/am.md,
// "Fifth pass: one line for a round trip").
//
// A half is written only while its word is 0 (empty), by its one writer
// (the caller orders its writers), data first and the word last (Commit);
// its reader reads the word (Word), then the data, and empties it (Clear)
// when it no longer needs the data. Who clears, and when, is the caller's
// protocol: it may fold the clear of one half into the commit of the other
// (the stores then travel in one transfer of the line).
//
// Whatever a peer writes into the line, a Duo never indexes outside it:
// the caller decodes the data and checks it.
type Duo struct {
	b   []byte
	w   [2]*atomic.Uint64
	rel bool // commit with a release store (SetReleaseCommit)
}

// DuoAt returns the Duo of b[off:off+DuoBytes]. It panics if the line is
// not inside b or not 64-byte aligned in memory: offsets passed here are
// the caller's layout constants.
func DuoAt(b []byte, off int) Duo {
	if off < 0 || off > len(b)-DuoBytes {
		panic("shm: DuoAt: offset " + strconv.Itoa(off) + " outside a " + strconv.Itoa(len(b)) + "-byte slice")
	}
	l := b[off : off+DuoBytes : off+DuoBytes]
	if addrOf(l)%64 != 0 {
		panic("shm: DuoAt: offset " + strconv.Itoa(off) + " is not 64-byte aligned")
	}
	return Duo{b: l, w: [2]*atomic.Uint64{Uint64At(l, 0), Uint64At(l, DuoHalf)}}
}

// SetReleaseCommit makes Commit a release store instead of a sequentially
// consistent one, under MsgRing.SetReleaseCommit's rule: only where the
// reader's Bell sleeps with the heavy fence and the writer's process
// registered for it.
func (d *Duo) SetReleaseCommit() { d.rel = true }

// Word returns half h's word: 0 if it is empty.
func (d *Duo) Word(h int) uint64 { return d.w[h&1].Load() }

// Data returns half h's data, DuoData bytes (read it after a Word that
// returned a message; write it only while the word is 0).
func (d *Duo) Data(h int) []byte {
	o := (h&1)*DuoHalf + 8
	return d.b[o : o+DuoData : o+DuoData]
}

// Line returns the whole line (the caller's encoding may span a half's word
// and data).
func (d *Duo) Line() []byte { return d.b }

// Commit publishes half h's message: its word w (not 0), stored after every
// earlier store of the caller, with MsgRing.Commit's ordering. Ring the
// reader's Bell after it.
func (d *Duo) Commit(h int, w uint64) { commitStore(d.w[h&1], w, d.rel) }

// Clear empties half h with a release store: every read of its data made
// before is done before its writer may write it again.
func (d *Duo) Clear(h int) { storeRelease64(d.w[h&1], 0) }

// StoreRelease32 is storeRelease64 for a 32-bit word, for other packages: a
// release store of a word read with atomic loads.
func StoreRelease32(w *atomic.Uint32, v uint32) { storeRelease32(w, v) }
