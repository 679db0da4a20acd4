// Package conduit defines the core transport interface between package gex and
// the ways bytes move between ranks: AM delivery, polling, sleeping, and access
// to peers' segments. Implementations: smp (processes on one host, shared-memory
// queues), loop (ranks as goroutines, same engine on heap memory), and later tcp.
//
// Nothing here knows about handler tables, tokens or events: those live in gex.
// A conduit moves an AM (a Header plus payload) to the destination rank and hands
// it to the Delivery function registered there, inside that rank's Poll.
package conduit

import (
	"errors"
	"time"
)

// MaxArgs is the number of handler arguments an AM can carry (gex_AM_MaxArgs).
const MaxArgs = 16

// Category is the AM category (GASNet-1 core API, "Active Message categories").
type Category uint8

// AM categories.
const (
	Short  Category = 1
	Medium Category = 2
	Long   Category = 3
)

func (c Category) String() string {
	switch c {
	case Short:
		return "Short"
	case Medium:
		return "Medium"
	case Long:
		return "Long"
	}
	return "Category(invalid)"
}

// Header is the fixed part of an AM. It is passed by value so that injection does
// not allocate.
type Header struct {
	Cat     Category
	IsReq   bool
	Handler uint8
	NArgs   uint8
	// Dest is, for a Long, the destination address in the target's bound segment
	// as the target sees it (the owner's address).
	Dest uint64
	// EP is the index of the destination endpoint in the target process and
	// SrcEP that of the sending endpoint (gex_EP_Index_t; 0 is the primordial
	// endpoint). The conduit carries both; the receiver checks EP against its
	// endpoints like any other field.
	EP, SrcEP uint16
	Args      [MaxArgs]int32
}

// Incoming is an AM being delivered. It and Payload are valid only until the
// Delivery function returns.
type Incoming struct {
	Src int // job rank of the sender
	Header
	// Payload is the Medium payload, or for a Long the payload bytes: already in
	// the destination segment when Placed, else bytes the receiver must place at
	// Dest after validating the AM.
	Payload []byte
	Placed  bool
	// G is the gctx.ID of the goroutine delivering the AM, where the
	// conduit has it at hand (smp: its consumer lock holds it), else 0.
	G uintptr
}

// Delivery receives AMs inside Poll. It must not retain in or in.Payload.
type Delivery func(in *Incoming)

// SendFlags modify Send and Prepare.
type SendFlags uint8

// Send flags.
const (
	// Immediate: return ErrWouldBlock instead of waiting for resources.
	Immediate SendFlags = 1 << iota
)

// ErrWouldBlock is returned by Send/Prepare with Immediate when the conduit would
// have to wait for resources (queue space, payload buffers). Nothing was sent.
var ErrWouldBlock = errors.New("conduit: would block for resources")

// Limits are the AM payload limits between this rank and one peer. They are
// symmetric: the peer computes the same values for this rank.
type Limits struct {
	MaxMedium int // largest Medium payload (requests and replies)
	MaxLong   int // largest Long payload (requests and replies)
	// MaxAlloc is the largest least_payload a negotiated-payload Prepare with a
	// conduit-allocated buffer may ask for (either category).
	MaxAlloc int
}

// SegInfo describes a rank's bound segment as seen from this process.
type SegInfo struct {
	Owner uint64 // base address in the owner's address space; 0 = no segment
	Size  uint64
	Local []byte // the segment mapped into this process, or nil if not mapped
}

// Topology is where every job rank lives. Host and Nbrhd hold, per job rank, the
// index of its host and of its neighbourhood (the set of processes whose segments
// are cross-mapped; GASNet's PSHM "supernode"). Both index sets are dense from 0,
// numbered in order of their lowest member.
type Topology struct {
	Host  []int
	Nbrhd []int
	// MaxSeg is, per job rank, the largest segment size that rank accepts
	// (gasnet_getMaxLocalSegmentSize on that rank).
	MaxSeg []uint64
}

// Count returns the number of distinct indices in of (max+1).
func Count(of []int) int {
	n := 0
	for _, v := range of {
		if v+1 > n {
			n = v + 1
		}
	}
	return n
}

// Prepared is a reserved injection for the negotiated-payload AM path: Buf is
// where the payload goes (in shared memory where the conduit supports it), and
// the rest is conduit-private.
type Prepared struct {
	Buf   []byte
	Dst   int
	IsReq bool
	priv  [4]uint64
}

// Priv gives conduit implementations access to their private words.
func (p *Prepared) Priv() *[4]uint64 { return &p.priv }

// Waiter is implemented by a conduit that serves a library wait better by
// sleeping briefly in the kernel while the bytes it waits for arrive (the
// tcp transport while a large Long arrives). The wait modes
// (gasnet_set_waitmode, spec 3.6.2.1) decide who may call it: a wait in the
// block or spin-block mode ("yield CPU resources ... while waiting") may; a
// wait in the spin mode ("contend aggressively for CPU resources") and the
// user's AMPoll call Poll, which never sleeps.
type Waiter interface {
	// PollWait is Poll that may sleep for a bounded time (the tcp
	// transport: 2 ms at most) until arrived bytes let it deliver.
	PollWait(repliesOnly bool) int
}

// Conduit is a transport for one rank. Methods are safe for concurrent use
// unless noted. Collective methods (AttachSegment, Barrier) must be called by
// every rank in the same order.
type Conduit interface {
	Rank() int
	Size() int
	Topology() *Topology
	// Limits returns the AM payload limits between this rank and peer.
	Limits(peer int) Limits

	// SetDelivery registers the function that receives AMs. Called once, before
	// the first Poll.
	SetDelivery(d Delivery)

	// Send injects an AM to dst. For a Long, the conduit places payload at
	// h.Dest in dst's segment (directly where it is mapped) before dst's Delivery
	// sees it; the caller has checked the bounds. While waiting for resources a
	// request Send polls all inbound traffic and a reply Send (h.IsReq false)
	// polls only inbound replies, so floods cannot deadlock. With Immediate it
	// returns ErrWouldBlock instead of waiting.
	Send(dst int, h Header, payload []byte, flags SendFlags) error

	// Prepare reserves resources for an AM to dst of at least least and at most
	// most payload bytes and returns a buffer of a length in [least, most] to
	// fill; Commit injects it. Between the two the caller must not communicate.
	Prepare(dst int, isReq bool, long bool, least, most int, flags SendFlags) (Prepared, error)
	// Commit sends a prepared AM with the first nbytes of p.Buf as payload.
	Commit(p *Prepared, h Header, nbytes int) error

	// Poll delivers pending AMs (replies first) and returns how many it delivered.
	// If repliesOnly, request traffic is not touched. Poll never blocks: if
	// another goroutine is polling the same queue it returns 0. It never
	// sleeps either (the user's AMPoll, and waits in the spin wait mode, call
	// it); a library wait that may sleep calls Waiter.PollWait, if the
	// conduit has it.
	Poll(repliesOnly bool) int
	// Sleep blocks the calling goroutine until an AM may have arrived for this
	// rank, or timeout passes (<= 0: no limit). Spurious returns are allowed.
	Sleep(timeout time.Duration)

	// AttachSegment allocates this rank's segment of size bytes and exchanges
	// segment information with every rank (collective, with a barrier). A rank
	// that has already failed its own checks passes size 0 so that the others
	// do not wait for it; then every rank gets an error naming the failed ranks.
	AttachSegment(size uint64) error
	// Segment returns rank's segment as seen from here.
	Segment(rank int) SegInfo

	// Barrier is an out-of-band barrier over all ranks (used at init).
	Barrier() error
	// Exit ends the job with code on every rank (gasnet_exit). Does not return.
	Exit(code int)
	// Abort ends the job because of a fatal error on this rank. Does not return.
	Abort(msg string)
	// OnExit registers fn to run when the job ends under this rank.
	OnExit(fn func())
	// Close releases the conduit's resources.
	Close() error
}
