package portals

// Code is a Portals return code (Portals 4.3 §3.4, Table 3-7). Every error this package
// returns wraps one: test with errors.Is(err, portals.ErrArgInvalid). String gives the
// spec's spelling.
type Code uint8

const (
	codeOK           Code = iota // PTL_OK: never returned as an error
	ErrAborted                   // PTL_ABORTED
	ErrArgInvalid                // PTL_ARG_INVALID
	ErrCTNoneReached             // PTL_CT_NONE_REACHED
	ErrEQDropped                 // PTL_EQ_DROPPED
	ErrEQEmpty                   // PTL_EQ_EMPTY
	ErrFail                      // PTL_FAIL
	ErrIgnored                   // PTL_IGNORED
	ErrInUse                     // PTL_IN_USE
	ErrInterrupted               // PTL_INTERRUPTED (deprecated in 4.3; never returned)
	ErrListTooLong               // PTL_LIST_TOO_LONG
	ErrNoInit                    // PTL_NO_INIT
	ErrNoSpace                   // PTL_NO_SPACE
	ErrPIDInUse                  // PTL_PID_IN_USE
	ErrPTEQNeeded                // PTL_PT_EQ_NEEDED
	ErrPTFull                    // PTL_PT_FULL
	ErrPTInUse                   // PTL_PT_IN_USE
	numCodes
)

var codeNames = [...]string{"PTL_OK", "PTL_ABORTED", "PTL_ARG_INVALID", "PTL_CT_NONE_REACHED", "PTL_EQ_DROPPED",
	"PTL_EQ_EMPTY", "PTL_FAIL", "PTL_IGNORED", "PTL_IN_USE", "PTL_INTERRUPTED", "PTL_LIST_TOO_LONG",
	"PTL_NO_INIT", "PTL_NO_SPACE", "PTL_PID_IN_USE", "PTL_PT_EQ_NEEDED", "PTL_PT_FULL", "PTL_PT_IN_USE"}

func (c Code) String() string { return enumString(int(c), codeNames[:], "ptl_code") }

// Error makes a Code an error by itself (errors.Is(err, ErrArgInvalid) compares codes).
func (c Code) Error() string { return "portals: " + c.String() }

// Error is the error type of this package: the spec's code, the function that returned it
// and what was wrong.
type Error struct {
	Code Code
	Func string // the Portals function, e.g. "PtlPut"
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return "portals: " + e.Func + ": " + e.Code.String()
	}
	return "portals: " + e.Func + ": " + e.Code.String() + ": " + e.Msg
}

// Unwrap returns the Code, so errors.Is(err, ErrArgInvalid) holds.
func (e *Error) Unwrap() error { return e.Code }

func errf(c Code, fn, msg string) error { return &Error{Code: c, Func: fn, Msg: msg} }

// Preallocated errors of the hot paths (no allocation per call).
var (
	errEQEmpty       error = ErrEQEmpty
	errCTNoneReached error = ErrCTNoneReached
	errEQDropped     error = ErrEQDropped
)
