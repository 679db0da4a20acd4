package shm

import (
	"strconv"
	"sync/atomic"
)

// Duo layout: one 64-byte line, an 8-byte word (0: empty; anything else: a
// committed message, the word being the first 8 bytes of the caller's
// encoding) and DuoData bytes of data.
const (
	// DuoBytes is the size of a Duo line.
	DuoBytes = 64
	// DuoData is the data length of a Duo.
	DuoData = DuoBytes - 8
)

// Duo is a view of one cache line shared by two processes, an asker and an
// answerer, that holds one message at a time: the asker's, then the
// answerer's reply written over it, then the asker's next message written
// over that. A round trip through it moves the line back and forth with the
// same bytes written by each side in turn, as a one-word ping-pong does,
// where a request and its reply in two queues move two lines, each written
// on one side and read on the other (docs/am.md, "Fifth pass: one line for
// a round trip").
//
// The caller's protocol says who may write the line when (the word tells
// whose message it holds); a writer writes the data first and the word last
// (Commit), a reader reads the word (Word), then the data.
//
// Whatever a peer writes into the line, a Duo never indexes outside it:
// the caller decodes the data and checks it.
type Duo struct {
	b   []byte
	w   *atomic.Uint64
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
	return Duo{b: l, w: Uint64At(l, 0)}
}

// SetReleaseCommit makes Commit a release store instead of a sequentially
// consistent one, under MsgRing.SetReleaseCommit's rule: only where the
// reader's Bell sleeps with the heavy fence and the writer's process
// registered for it.
func (d *Duo) SetReleaseCommit() { d.rel = true }

// Word returns the line's word: 0 if it is empty.
func (d *Duo) Word() uint64 { return d.w.Load() }

// Line returns the whole line: the word (bytes 0-7, written only through
// Commit and Clear) and the data (bytes 8-63).
func (d *Duo) Line() []byte { return d.b }

// Commit publishes the message whose data the caller wrote: its word w
// (not 0), stored after every earlier store of the caller, with
// MsgRing.Commit's ordering. Ring the reader's Bell after it.
func (d *Duo) Commit(w uint64) { commitStore(d.w, w, d.rel) }

// Clear empties the line with a release store: every read of its data made
// before is done before the other side may write it again.
func (d *Duo) Clear() { storeRelease64(d.w, 0) }

// StoreRelease32 is storeRelease64 for a 32-bit word, for other packages: a
// release store of a word read with atomic loads.
func StoreRelease32(w *atomic.Uint32, v uint32) { storeRelease32(w, v) }
