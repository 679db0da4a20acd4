package tcp

import (
	"io"
	"net"

	"github.com/gexgo/gexgo/internal/conduit"
)

// Default batcher settings.
const (
	// defaultCopyMax: payloads up to this many bytes are copied into the
	// pending buffer next to their header; larger ones are referenced and go
	// out as their own iovec (no copy).
	defaultCopyMax = 1024
	// defaultHighWater: queued bytes above which wouldBlock reports true.
	defaultHighWater = 4 << 20
)

// piece is one iovec of a pending flush: either a range of the batcher's own
// buffer (ref == nil) or a caller's payload referenced in place.
type piece struct {
	start, end int
	ref        []byte
}

// batcher coalesces the frames of many Sends to one peer into one writev:
// headers and small payloads are appended to a pending buffer, large payloads
// are referenced as separate iovecs, and flush writes everything with one
// net.Buffers.WriteTo (writev(2) on a *net.TCPConn).
//
// Concurrency: a batcher is not safe for concurrent use; the conduit guards
// each peer's batcher with that peer's send lock, held across add and flush.
//
// Payload ownership: a payload longer than copyMax is referenced, not copied,
// so the caller must leave it unmodified until the next flush returns (for
// GASNet-EX local completion of an AM payload, Send flushes before returning
// when it added a referenced payload).
type batcher struct {
	buf       []byte  // headers and copied payloads awaiting flush
	pieces    []piece // iovecs in order; the last may be an open range of buf
	iov       [][]byte
	vec       net.Buffers // scratch for WriteTo (kept in the batcher so flush does not allocate)
	refBytes  int         // bytes of referenced payloads awaiting flush
	copyMax   int
	highWater int
	frames    int // frames awaiting flush
}

// newBatcher returns a batcher that copies payloads of at most copyMax bytes
// and reports wouldBlock above highWater queued bytes (<= 0: defaults).
func newBatcher(copyMax, highWater int) *batcher {
	if copyMax <= 0 {
		copyMax = defaultCopyMax
	}
	if highWater <= 0 {
		highWater = defaultHighWater
	}
	return &batcher{buf: make([]byte, 0, 64<<10), copyMax: copyMax, highWater: highWater}
}

// add queues an AM frame: header h and payload. See the type's comment on
// payload ownership. The caller has validated h against the limits.
func (b *batcher) add(h *conduit.Header, payload []byte) {
	b.buf = appendAMHeader(b.buf, h, len(payload))
	b.addPayload(payload)
}

// addControl queues a control frame.
func (b *batcher) addControl(op ctrlOp, value uint64, payload []byte) {
	b.buf = appendControlHeader(b.buf, op, value, len(payload))
	b.addPayload(payload)
}

// addCopy queues an AM frame with its payload copied, whatever its size (the
// caller returns before the frame is written).
func (b *batcher) addCopy(h *conduit.Header, payload []byte) {
	b.buf = appendAMHeader(b.buf, h, len(payload))
	b.frames++
	b.buf = append(b.buf, payload...)
}

func (b *batcher) addPayload(payload []byte) {
	b.frames++
	if len(payload) <= b.copyMax {
		b.buf = append(b.buf, payload...)
		return
	}
	// Close the open range of buf (the header just appended and anything
	// before it not yet in a piece), then reference the payload.
	b.closeRange()
	b.pieces = append(b.pieces, piece{ref: payload})
	b.refBytes += len(payload)
}

// closeRange records buf's bytes not yet covered by a piece as a piece.
func (b *batcher) closeRange() {
	start := 0
	for i := len(b.pieces) - 1; i >= 0; i-- {
		if b.pieces[i].ref == nil {
			start = b.pieces[i].end
			break
		}
	}
	if start < len(b.buf) {
		b.pieces = append(b.pieces, piece{start: start, end: len(b.buf)})
	}
}

// pending returns the number of bytes queued, buffered plus referenced.
func (b *batcher) pending() int {
	return len(b.buf) + b.refBytes
}

// wouldBlock reports whether queueing n more bytes would take the batcher
// above its high-water mark: the Immediate flag's backpressure (Send returns
// conduit.ErrWouldBlock). An empty batcher never blocks, so any single frame
// can be sent.
func (b *batcher) wouldBlock(n int) bool {
	q := b.pending()
	return q > 0 && q+n > b.highWater
}

// empty reports whether nothing is queued.
func (b *batcher) empty() bool { return b.frames == 0 }

// flush writes every queued frame to w in order with one WriteTo (one writev
// when w is a *net.TCPConn and the iovecs fit its limit) and empties the
// batcher, also on error (a failed write means the connection is lost). It
// does not allocate once the batcher's slices have grown. (The transport
// writes the same vectors to its non-blocking socket itself: Transport.write.)
func (b *batcher) flush(w io.Writer) error {
	if b.frames == 0 {
		return nil
	}
	b.vec = b.vectors()
	var err error
	if len(b.vec) == 1 {
		_, err = w.Write(b.vec[0])
	} else {
		_, err = b.vec.WriteTo(w)
	}
	b.reset()
	return err
}

// vectors returns the queued frames as buffers to write in order (valid
// until reset).
func (b *batcher) vectors() [][]byte {
	b.closeRange()
	b.iov = b.iov[:0]
	for _, p := range b.pieces {
		if p.ref != nil {
			b.iov = append(b.iov, p.ref)
		} else {
			b.iov = append(b.iov, b.buf[p.start:p.end])
		}
	}
	return b.iov
}

// reset empties the batcher after its vectors were written (or the
// connection failed).
func (b *batcher) reset() {
	clear(b.iov) // drop references to callers' payloads
	b.iov = b.iov[:0]
	b.vec = nil
	b.buf = b.buf[:0]
	b.pieces = b.pieces[:0]
	b.frames, b.refBytes = 0, 0
}
