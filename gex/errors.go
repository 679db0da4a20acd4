package gex

import (
	"errors"
	"fmt"
)

// Code is a GASNet return code (GASNet-1 spec, "Error codes"; GASNet-EX
// functions that return int use the same codes). Code.String gives the spec's
// spelling.
type Code int

// Return codes. The values follow GASNet's gasnet.h.
const (
	OK                 Code = 0
	ErrCodeNotInit     Code = 10001 // GASNET_ERR_NOT_INIT
	ErrCodeResource    Code = 10002 // GASNET_ERR_RESOURCE
	ErrCodeBadArg      Code = 10003 // GASNET_ERR_BAD_ARG
	ErrCodeNotReady    Code = 10004 // GASNET_ERR_NOT_READY
	ErrCodeBarrierMism Code = 10005 // GASNET_ERR_BARRIER_MISMATCH
)

func (c Code) String() string {
	switch c {
	case OK:
		return "GASNET_OK"
	case ErrCodeNotInit:
		return "GASNET_ERR_NOT_INIT"
	case ErrCodeResource:
		return "GASNET_ERR_RESOURCE"
	case ErrCodeBadArg:
		return "GASNET_ERR_BAD_ARG"
	case ErrCodeNotReady:
		return "GASNET_ERR_NOT_READY"
	case ErrCodeBarrierMism:
		return "GASNET_ERR_BARRIER_MISMATCH"
	}
	return fmt.Sprintf("GASNET_ERR(%d)", int(c))
}

// Sentinel errors, one per spec code, for errors.Is. Every error the library
// returns wraps exactly one of them (or is ErrNoOp).
var (
	ErrNotInit  = &codeError{ErrCodeNotInit}
	ErrResource = &codeError{ErrCodeResource}
	ErrBadArg   = &codeError{ErrCodeBadArg}
	ErrNotReady = &codeError{ErrCodeNotReady}
	// ErrBarrierMismatch is GASNET_ERR_BARRIER_MISMATCH: a GASNet-1 named
	// barrier whose ids did not match (TM.BarrierNamedNB).
	ErrBarrierMismatch = &codeError{ErrCodeBarrierMism}
	// ErrRestricted is returned by a call that the spec prohibits in the
	// caller's context: inside an AM handler, while holding an HSL, or between
	// an AM Prepare and its Commit ("Calls from restricted context"). It wraps
	// ErrBadArg's code family as GASNET_ERR_BAD_ARG is what GASNet's debug
	// build reports for such misuse.
	ErrRestricted = errors.New("gex: call not permitted in restricted context")
)

// ErrNoOp is what an injection with FlagImmediate returns when it would have
// had to wait for resources: nothing was initiated (GASNet-EX "Extended API",
// NOTE 1: the "no op" case, non-zero return / GEX_EVENT_NO_OP).
var ErrNoOp = errors.New("gex: no op: FlagImmediate and resources were not available")

type codeError struct{ code Code }

func (e *codeError) Error() string { return e.code.String() }

// Error is the error type of control paths: which spec function, which
// argument, and why, wrapping a spec code.
type Error struct {
	Op   string // the API name, e.g. "RequestMedium"
	Code Code
	Msg  string // says which argument and which bound
}

func (e *Error) Error() string { return "gex: " + e.Op + ": " + e.Msg + " (" + e.Code.String() + ")" }

// Unwrap makes errors.Is(err, ErrBadArg) etc. work.
func (e *Error) Unwrap() error {
	switch e.Code {
	case ErrCodeNotInit:
		return ErrNotInit
	case ErrCodeResource:
		return ErrResource
	case ErrCodeBadArg:
		return ErrBadArg
	case ErrCodeNotReady:
		return ErrNotReady
	case ErrCodeBarrierMism:
		return ErrBarrierMismatch
	}
	return nil
}

func badArg(op, format string, args ...any) error {
	return &Error{Op: op, Code: ErrCodeBadArg, Msg: fmt.Sprintf(format, args...)}
}

func resourceErr(op, format string, args ...any) error {
	return &Error{Op: op, Code: ErrCodeResource, Msg: fmt.Sprintf(format, args...)}
}

// restrictedError reports a prohibited call; it wraps both ErrRestricted and
// ErrBadArg.
type restrictedError struct {
	op, why string
}

func (e *restrictedError) Error() string {
	return "gex: " + e.op + ": not permitted " + e.why + " (GASNet-EX \"Calls from restricted context\")"
}

func (e *restrictedError) Is(target error) bool {
	return target == ErrRestricted || target == ErrBadArg
}
