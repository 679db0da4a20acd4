package gex

import (
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/conduit"
)

// Endpoints beyond the primordial one (Memory Kinds, "Endpoints",
// gex_EP_Create): every endpoint has its own AM handler table and its own
// bound segment, and is named across processes by (job rank, endpoint index).
// Every AM carries the index of its destination endpoint and of its sending
// endpoint (conduit.Header.EP, SrcEP); the receiver looks the destination up
// here and refuses an index that names no endpoint of this process.

// EPCapabilities is gex_EP_Capabilities_t: what a new endpoint must support.
type EPCapabilities uint32

// Endpoint capabilities ("GEX_EP_CAPABILITY Constants").
const (
	EPCapabilityRMA  EPCapabilities = 1 << iota // GEX_EP_CAPABILITY_RMA
	EPCapabilityAM                              // GEX_EP_CAPABILITY_AM
	EPCapabilityVIS                             // GEX_EP_CAPABILITY_VIS
	EPCapabilityColl                            // GEX_EP_CAPABILITY_COLL
	EPCapabilityAD                              // GEX_EP_CAPABILITY_AD
	// EPCapabilityAll is GEX_EP_CAPABILITY_ALL.
	EPCapabilityAll = EPCapabilityRMA | EPCapabilityAM | EPCapabilityVIS | EPCapabilityColl | EPCapabilityAD
)

var capNames = [...]string{"RMA", "AM", "VIS", "COLL", "AD"}

// String spells the capabilities as the spec does.
func (c EPCapabilities) String() string {
	if c == 0 {
		return "0"
	}
	s := ""
	for i, n := range capNames {
		if c&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += "GEX_EP_CAPABILITY_" + n
		}
	}
	if c&^EPCapabilityAll != 0 {
		if s != "" {
			s += "|"
		}
		s += "bits(" + itoa(int(c&^EPCapabilityAll)) + ")"
	}
	return s
}

// MaxEPs is the number of endpoints a process may hold per client, the
// primordial one included (endpoint indices are 16 bits on the wire).
const MaxEPs = 1 << 12

// epTable is the client's endpoints by index, for the receive path.
type epTable struct {
	mu  sync.Mutex
	all atomic.Pointer[[]*EP] // index -> endpoint; copy-on-write
}

// EPCreate implements gex_EP_Create: a new endpoint owned by c with at least
// the given capabilities, no bound segment and no team. Indices are assigned
// monotonically from 1 (the spec's candidate (1), "no recycling"), so a
// process that creates its endpoints in the same order as its peers can
// predict their indices. flags must be 0 (gexgo defines no
// GEX_FLAG_HINT_ACCEL flags).
func (c *Client) EPCreate(caps EPCapabilities, flags Flags) (*EP, error) {
	const op = "EPCreate"
	if err := c.checkRestricted(op); err != nil {
		return nil, err
	}
	switch {
	case caps == 0:
		return nil, c.report(badArg(op, "capabilities is 0: request at least one GEX_EP_CAPABILITY_*"))
	case caps&^EPCapabilityAll != 0:
		return nil, c.report(badArg(op, "capabilities %v include bits this implementation does not define", caps))
	case flags != 0:
		return nil, c.report(badArg(op, "flags %v not accepted (must be 0)", flags))
	}
	t := &c.eps
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.all.Load()
	if len(old) >= MaxEPs {
		return nil, c.report(resourceErr(op, "this process already has %d endpoints, the most one client may hold", len(old)))
	}
	ep := &EP{c: c, index: EPIndex(len(old)), caps: caps}
	// The library's handlers (indices below AMIndexBase) serve every
	// endpoint: RMA, atomics, VIS and collectives addressed to it.
	for i := 1; i < AMIndexBase; i++ {
		if e := c.ep.handlers[i].Load(); e != nil {
			ep.handlers[i].Store(e)
		}
	}
	nt := make([]*EP, len(old)+1)
	copy(nt, old)
	nt[len(old)] = ep
	t.all.Store(&nt)
	return ep, nil
}

// epAt returns this process's endpoint of index i, or nil.
func (c *Client) epAt(i uint16) *EP {
	if i == 0 {
		return c.ep
	}
	all := *c.eps.all.Load()
	if int(i) >= len(all) {
		return nil
	}
	return all[i]
}

// needCap checks that ep was created with capability want for op.
func (ep *EP) needCap(op string, want EPCapabilities) error {
	if ep.caps&want == 0 {
		return ep.c.report(badArg(op, "endpoint %d was created without %v (its capabilities: %v)", ep.index, want, ep.caps))
	}
	return nil
}

// QueryCapabilities returns the capabilities ep was created with
// (EPCapabilityAll for the primordial endpoint). The spec has no query yet
// ("Future Directions" 2 of gex_EP_Create).
func (ep *EP) QueryCapabilities() EPCapabilities { return ep.caps }

// targetSeg is the segment of the endpoint that (tm, rank) names (job rank
// j), as this process knows it, and that endpoint's index. Through a TM over
// non-primordial endpoints it first checks that the local endpoint has
// capability need.
func (tm *TM) targetSeg(op string, rank Rank, j int, need EPCapabilities) (conduit.SegInfo, uint16, error) {
	if !tm.epPath {
		return tm.c.cd.Segment(j), 0, nil
	}
	if err := tm.ep.needCap(op, need); err != nil {
		return conduit.SegInfo{}, 0, err
	}
	ep := tm.epOf(rank)
	return tm.c.segOf(j, ep), ep, nil
}
