package tcp

import (
	"bufio"
	"fmt"
	"io"
)

// The transport decodes frames where they lie in its receive buffer
// (parseFrame, rx.go); the tests read whole streams with this reader.

// frameReader decodes frames from a stream. Next reads a header; the payload
// is then read with Payload (into the reader's buffer), ReadPayload (into the
// caller's memory, e.g. straight into a segment for a Long) or skipped by the
// next Next. A frameReader is used by one goroutine at a time.
type frameReader struct {
	r          *bufio.Reader
	maxPayload int
	pending    int    // payload bytes of the current frame not yet consumed
	buf        []byte // payload buffer; grows to the largest payload seen, never beyond maxPayload (or maxCtrlBytes)
}

// newFrameReader returns a reader of frames from r whose AM payloads may be at
// most maxPayload bytes. r must buffer at least frameMaxHead bytes.
func newFrameReader(r *bufio.Reader, maxPayload int) *frameReader {
	if r.Size() < frameMaxHead {
		r = bufio.NewReaderSize(r, frameMaxHead)
	}
	return &frameReader{r: r, maxPayload: max(0, maxPayload)}
}

// Next reads and validates the next frame header into h, first discarding
// any unread payload of the previous frame. At a clean end of stream (between
// frames) it returns io.EOF; a stream cut inside a frame gives
// io.ErrUnexpectedEOF; a malformed header an error wrapping ErrFrame. It does
// not allocate.
func (fr *frameReader) Next(h *frameHeader) error {
	if fr.pending > 0 {
		n, err := fr.r.Discard(fr.pending)
		fr.pending -= n
		if err != nil {
			return unexpected(err)
		}
	}
	s, err := fr.r.Peek(frameFixed)
	if err != nil {
		if err == io.EOF && len(s) == 0 {
			return io.EOF
		}
		if len(s) < frameFixed {
			return unexpected(err)
		}
	}
	hl, err := decodeFixed(s, h, fr.maxPayload)
	if err != nil {
		return err
	}
	s, err = fr.r.Peek(hl)
	if err != nil {
		return unexpected(err)
	}
	decodeArgs(s, h)
	if _, err := fr.r.Discard(hl); err != nil {
		return unexpected(err)
	}
	fr.pending = h.NBytes
	return nil
}

// Payload reads the current frame's payload into the reader's buffer and
// returns it; it is valid until the next call on fr. The buffer grows to the
// payload's length, which Next has checked against the maximum.
func (fr *frameReader) Payload() ([]byte, error) {
	n := fr.pending
	if cap(fr.buf) < n {
		fr.buf = make([]byte, n)
	}
	b := fr.buf[:n]
	if err := fr.ReadPayload(b); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadPayload reads the current frame's payload into dst, which must have
// exactly the payload's length (the caller validated where it goes).
func (fr *frameReader) ReadPayload(dst []byte) error {
	if len(dst) != fr.pending {
		return fmt.Errorf("tcp: ReadPayload into %d bytes, the frame has %d unread payload bytes", len(dst), fr.pending)
	}
	n, err := io.ReadFull(fr.r, dst)
	fr.pending -= n
	if err != nil {
		return unexpected(err)
	}
	return nil
}

// unexpected turns io.EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
