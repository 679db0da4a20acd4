// Package gasnet is the GASNet-1 API (GASNet-1 spec v1.8, and the GASNet VIS
// proposal v2.0 for putv/puti/puts) layered on package gex, as GASNet-EX
// keeps it: "gasnet.h, which implements the GASNet-1 APIs in terms of the new
// GASNet-EX interfaces" (GASNet-EX API, "Relationship to GASNet-1 APIs").
//
// One Go function or method per spec function or macro family. The spec's
// process-wide API becomes methods on the *Job that Init returns (no
// package-level mutable state, so several nodes can share a process on the
// loop conduit); calls that take a token (AM replies, AMGetMsgSource) and HSLs
// are plain functions. Errors are Go errors wrapping the spec's codes
// (errors.Is(err, gasnet.ErrNotReady)); every error names the argument and
// the bound. docs/gasnet1.md has the name map and every deviation.
package gasnet

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
)

// Version and configuration constants (GASNet-1 spec, "Compile-time
// constants").
const (
	SpecVersionMajor    = 1 // GASNET_SPEC_VERSION_MAJOR
	SpecVersionMinor    = 8 // GASNET_SPEC_VERSION_MINOR
	ReleaseVersionMajor = 0 // GASNET_RELEASE_VERSION_MAJOR (gexgo's own numbering)
	ReleaseVersionMinor = 1 // GASNET_RELEASE_VERSION_MINOR
	ReleaseVersionPatch = 0 // GASNET_RELEASE_VERSION_PATCH
	// Version is GASNET_VERSION (deprecated): SpecVersionMajor.
	Version = SpecVersionMajor
	// ConfigString is GASNET_CONFIG_STRING: the configuration, comparable
	// as a string.
	ConfigString = "RELEASE=0.1.0,SPEC=1.8,PAR,SEGMENT_FAST,gexgo"
	// MaxNodes is GASNET_MAXNODES.
	MaxNodes = math.MaxUint32 - 1
	// AlignedSegments is GASNET_ALIGNED_SEGMENTS: segments are not at the
	// same address on every node.
	AlignedSegments = 0
	// PageSize is GASNET_PAGESIZE.
	PageSize = gex.PageSize
	// SizeofRegisterValue is SIZEOF_GASNET_REGISTER_VALUE_T.
	SizeofRegisterValue = 8
)

// SegmentConfig names a segment configuration (GASNet-1 spec, "Job Control
// Interface": GASNET_SEGMENT_FAST, _LARGE, _EVERYTHING).
type SegmentConfig int

// Segment configurations.
const (
	SegmentFast       SegmentConfig = iota + 1 // GASNET_SEGMENT_FAST
	SegmentLarge                               // GASNET_SEGMENT_LARGE
	SegmentEverything                          // GASNET_SEGMENT_EVERYTHING
)

// Segment is the configuration gexgo provides: GASNET_SEGMENT_FAST. A segment
// is a shared-memory mapping of at most GetMaxLocalSegmentSize bytes, mapped
// by every neighbourhood peer; only its bytes are remotely accessible.
const Segment = SegmentFast

func (s SegmentConfig) String() string {
	switch s {
	case SegmentFast:
		return "GASNET_SEGMENT_FAST"
	case SegmentLarge:
		return "GASNET_SEGMENT_LARGE"
	case SegmentEverything:
		return "GASNET_SEGMENT_EVERYTHING"
	}
	return "SegmentConfig(?)"
}

// ThreadModel is the threading configuration (GASNET_PAR): any goroutine may
// call any function concurrently.
const ThreadModel = "GASNET_PAR"

// Node is gasnet_node_t, a 0-based node (rank) index.
type Node uint32

// Handler is gasnet_handler_t (interoperable with gex_AM_Index_t).
type Handler = gex.AMIndex

// HandlerArg is gasnet_handlerarg_t (interoperable with gex_AM_Arg_t).
type HandlerArg = gex.AMArg

// Token is gasnet_token_t (interoperable with gex_Token_t).
type Token = gex.Token

// RegisterValue is gasnet_register_value_t.
type RegisterValue = uint64

// Addr is a remote address: the owner's virtual address, as GetSegmentInfo
// reports it.
type Addr = gex.Addr

// HandlerFn is a GASNet-1 AM handler. One signature serves every category:
// buf is nil for a Short; for a Medium it is the payload, valid until the
// handler returns; for a Long it is the payload in this node's segment. args
// holds the 0..16 arguments the sender passed.
type HandlerFn = gex.AMFn

// HandlerEntry is gasnet_handlerentry_t: Index 0 means "don't care" (Attach
// assigns one and writes it back), otherwise it must be in [128, 255].
type HandlerEntry struct {
	Index Handler
	Fn    HandlerFn
	Name  string // optional, used in messages
}

// SegInfo is gasnet_seginfo_t.
type SegInfo struct {
	Addr Addr
	Size uint64
}

// WaitMode is a gasnet_set_waitmode argument.
type WaitMode = gex.WaitMode

// Wait modes (GASNet-1 spec, "gasnet_set_waitmode").
const (
	WaitSpin      = gex.WaitSpin      // GASNET_WAIT_SPIN
	WaitBlock     = gex.WaitBlock     // GASNET_WAIT_BLOCK
	WaitSpinBlock = gex.WaitSpinBlock // GASNET_WAIT_SPINBLOCK
)

// Return codes (GASNet-1 spec, "Errors"), with the values of GASNet's gasnet.h.
const (
	OK                        = int(gex.OK)                 // GASNET_OK
	ErrCodeNotInit            = int(gex.ErrCodeNotInit)     // GASNET_ERR_NOT_INIT
	ErrCodeResource           = int(gex.ErrCodeResource)    // GASNET_ERR_RESOURCE
	ErrCodeBadArg             = int(gex.ErrCodeBadArg)      // GASNET_ERR_BAD_ARG
	ErrCodeNotReady           = int(gex.ErrCodeNotReady)    // GASNET_ERR_NOT_READY
	ErrCodeBarrierMismatch    = int(gex.ErrCodeBarrierMism) // GASNET_ERR_BARRIER_MISMATCH
	firstErrCode, lastErrCode = ErrCodeNotInit, ErrCodeBarrierMismatch
)

// Sentinel errors, one per code, for errors.Is. Every error this package
// returns wraps one of them.
var (
	ErrNotInit         = gex.ErrNotInit
	ErrResource        = gex.ErrResource
	ErrBadArg          = gex.ErrBadArg
	ErrNotReady        = gex.ErrNotReady
	ErrBarrierMismatch = gex.ErrBarrierMismatch
	// ErrRestricted is what a call prohibited in the caller's context
	// returns: inside a handler, holding an HSL, or inside a No-Interrupt
	// Section (it also wraps ErrBadArg).
	ErrRestricted = gex.ErrRestricted
)

var errDescs = [...]string{
	"no error",
	"GASNet message layer not initialized",
	"problem with requested resource",
	"bad argument to GASNet function",
	"non-blocking operation not complete",
	"barrier id's mismatched",
}

// ErrorName implements gasnet_ErrorName: the spec's spelling of a code.
func ErrorName(code int) string { return gex.Code(code).String() }

// ErrorDesc implements gasnet_ErrorDesc: a description of a code.
func ErrorDesc(code int) string {
	switch {
	case code == OK:
		return errDescs[0]
	case code >= firstErrCode && code <= lastErrCode:
		return errDescs[code-firstErrCode+1]
	}
	return "unknown GASNet error code " + ErrorName(code)
}

// ErrorCode maps an error returned by this package (or by gex) to its
// GASNet return code: OK for nil, GASNET_ERR_RESOURCE for an error that
// wraps no code.
func ErrorCode(err error) int {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, ErrBarrierMismatch):
		return ErrCodeBarrierMismatch
	case errors.Is(err, ErrNotReady):
		return ErrCodeNotReady
	case errors.Is(err, ErrNotInit):
		return ErrCodeNotInit
	case errors.Is(err, ErrBadArg):
		return ErrCodeBadArg
	}
	return ErrCodeResource
}

// Error is the error type of this package: which spec function, and what was
// wrong, wrapping a code.
type Error struct {
	Op   string // the spec function, e.g. "gasnet_barrier_wait"
	Code int
	Msg  string
}

func (e *Error) Error() string {
	return "gasnet: " + e.Op + ": " + e.Msg + " (" + ErrorName(e.Code) + ")"
}

// Unwrap makes errors.Is(err, gasnet.ErrBadArg) etc. work.
func (e *Error) Unwrap() error {
	switch e.Code {
	case ErrCodeNotInit:
		return ErrNotInit
	case ErrCodeBadArg:
		return ErrBadArg
	case ErrCodeNotReady:
		return ErrNotReady
	case ErrCodeBarrierMismatch:
		return ErrBarrierMismatch
	}
	return ErrResource
}

func newErr(op string, code int, msg string) error { return &Error{Op: op, Code: code, Msg: msg} }

// Job is one node's view of a GASNet job: what gasnet_init bootstraps. Its
// methods are the GASNet-1 functions; any goroutine may call them.
type Job struct {
	c   *gex.Client
	ep  *gex.EP
	tm  *gex.TM
	seg *gex.Segment

	me, n Node

	attached atomic.Bool
	attachMu sync.Mutex

	// Set by Attach, read-only afterwards.
	handlers []uint64 // node*4 + index/64: bit set if registered there
	mapped   []bool   // node's segment is mapped here
	maxMed   int      // AMMaxMedium
	maxLReq  int      // AMMaxLongRequest
	maxLRep  int      // AMMaxLongReply

	nis     nisSet     // No-Interrupt Sections (nis.go)
	regions regionSet  // goroutines with an access region open
	bar     barrierSet // the split-phase barrier (barrier.go)
}

var initOnce atomic.Bool

// Init implements gasnet_init: it bootstraps this node's part of the job the
// launcher (gexrun, hydra/PMI, or none: a job of one) started, creating the
// gex client with GEX_FLAG_USES_GASNET1. It may be called once per process;
// later calls fail. Between Init and Attach only Mynode, Nodes,
// GetMaxLocalSegmentSize, GetMaxGlobalSegmentSize, Getenv and Exit may be
// called; the rest return an error wrapping ErrNotInit.
func Init() (*Job, error) {
	if !initOnce.CompareAndSwap(false, true) {
		return nil, newErr("gasnet_init", ErrCodeResource, "gasnet_init may only be called once per process")
	}
	c, ep, tm, err := gex.ClientInit("GASNET1", gex.FlagUsesGASNet1)
	if err != nil {
		return nil, err
	}
	return New(c, ep, tm)
}

// New enables the GASNet-1 API on a client created by gex.ClientInit (or
// LoopJob.ClientInit) with gex.FlagUsesGASNet1 - the EX spec's
// "explicitly when a caller passes the GEX_FLAG_USES_GASNET1 flag to
// gex_Client_Init()". ep and tm are the primordial endpoint and team that
// ClientInit returned. Attach follows, as after Init.
func New(c *gex.Client, ep *gex.EP, tm *gex.TM) (*Job, error) {
	const op = "gasnet_init"
	switch {
	case c == nil || ep == nil || tm == nil:
		return nil, newErr(op, ErrCodeBadArg, "client, endpoint and team must all be non-nil")
	case c.QueryFlags()&gex.FlagUsesGASNet1 == 0:
		return nil, newErr(op, ErrCodeBadArg, "the client was not created with gex.FlagUsesGASNet1 (GEX_FLAG_USES_GASNET1)")
	case tm.QueryClient() != c || ep.QueryClient() != c || tm.QueryEP() != ep || ep.QueryIndex() != 0:
		return nil, newErr(op, ErrCodeBadArg, "ep and tm must be the primordial endpoint and team of the client")
	case tm.QuerySize() != c.JobSize():
		return nil, newErr(op, ErrCodeBadArg, fmt.Sprintf("tm must be the primordial team (it has %d of the job's %d ranks)", tm.QuerySize(), c.JobSize()))
	}
	return &Job{c: c, ep: ep, tm: tm, me: Node(tm.QueryRank()), n: Node(tm.QuerySize())}, nil
}

// Mynode implements gasnet_mynode.
func (j *Job) Mynode() Node { return j.me }

// Nodes implements gasnet_nodes.
func (j *Job) Nodes() Node { return j.n }

// GetMaxLocalSegmentSize implements gasnet_getMaxLocalSegmentSize: the largest
// segsize Attach accepts on this node (a multiple of PageSize).
func (j *Job) GetMaxLocalSegmentSize() uint64 { return j.c.MaxLocalSegmentSize() }

// GetMaxGlobalSegmentSize implements gasnet_getMaxGlobalSegmentSize: the
// minimum of GetMaxLocalSegmentSize over the job.
func (j *Job) GetMaxGlobalSegmentSize() uint64 { return j.c.MaxGlobalSegmentSize() }

// Getenv implements gasnet_getenv: the value in the environment the job was
// spawned with (the launcher passes its own environment, plus any variables
// it was asked to set, to every node), and whether it is set.
func (j *Job) Getenv(name string) (string, bool) { return os.LookupEnv(name) }

// Exit implements gasnet_exit: it ends the whole job with code (not a
// collective call; any node may call it at any time after Init). It does not
// return.
func (j *Job) Exit(code int) { j.c.Exit(code) }

// SetWaitmode implements gasnet_set_waitmode: how blocking calls wait (a
// per-node hint).
func (j *Job) SetWaitmode(mode WaitMode) error {
	if mode != WaitSpin && mode != WaitBlock && mode != WaitSpinBlock {
		return newErr("gasnet_set_waitmode", ErrCodeBadArg, "wait mode "+mode.String()+" is not GASNET_WAIT_SPIN, _BLOCK or _SPINBLOCK")
	}
	return j.c.SetWaitMode(mode)
}

// BlockUntil implements GASNET_BLOCKUNTIL(cond): it services the network
// (running handlers) until cond returns true, waiting in the wait mode.
// Prohibited in handlers, while holding an HSL and in a No-Interrupt Section.
func (j *Job) BlockUntil(cond func() bool) error {
	if err := j.ready("GASNET_BLOCKUNTIL"); err != nil {
		return err
	}
	return j.nis.wrap(j.c.BlockUntil(cond))
}

// QueryGexObjects implements gasnet_QueryGexObjects (GASNet-EX, "Hybrid /
// transitional client support"): the client, primordial endpoint and team
// this job runs on, and its segment (nil before Attach or when the job has
// no segments). EX calls on them (atomics, teams, collectives, VIS, AMs to
// handlers registered either way) may be mixed with GASNet-1 calls, under
// the spec's rules (see docs/gasnet1.md).
func (j *Job) QueryGexObjects() (*gex.Client, *gex.EP, *gex.TM, *gex.Segment) {
	return j.c, j.ep, j.tm, j.seg
}

// ready checks that Attach has been called.
func (j *Job) ready(op string) error {
	if !j.attached.Load() {
		return newErr(op, ErrCodeNotInit, "gasnet_attach has not been called")
	}
	return nil
}
