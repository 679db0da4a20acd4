package shm

import "errors"

// ErrFormat is the class of every error that reports a shared-memory layout or
// a Desc that fails validation; errors.Is(err, ErrFormat) holds for all of
// them (they are *FormatError values).
var ErrFormat = errors.New("shm: bad layout")

// FormatError reports which field of which layout failed validation and why.
// It is returned by InitRing, AttachRing, InitPool, AttachPool, Desc decoding
// and the allocators; never on a hot path.
type FormatError struct {
	Layout string // "ring", "pool", "desc", "region"
	Field  string // the header field or argument, e.g. "nslots"
	Msg    string // the value and the bound it broke
}

func (e *FormatError) Error() string {
	return "shm: " + e.Layout + " " + e.Field + ": " + e.Msg
}

// Unwrap returns ErrFormat.
func (e *FormatError) Unwrap() error { return ErrFormat }

func formatErr(layout, field, msg string) error {
	return &FormatError{Layout: layout, Field: field, Msg: msg}
}

// Preallocated errors of the pool's receive path (Buf, Free): the index comes
// from a peer and may be anything.
var (
	// ErrBadIndex: a pool buffer index outside [0, NumBufs()).
	ErrBadIndex = errors.New("shm: pool buffer index out of range")
	// ErrNotBusy: Free of a pool buffer that was not allocated (double free).
	ErrNotBusy = errors.New("shm: pool buffer freed while not busy")
)
