// Package ptlnet is the transport under the Portals 4.3 engine (package portals): it owns a
// process's physical identity (Portals 4.3 §3.9, "Process Identification": nid, pid) and moves
// opaque (hdr, payload) messages between authenticated processes, reliably, exactly once and in
// order per (source, destination) pair.
//
// This first version delivers within one process only (messages to oneself and to other Nets
// opened in the same process); the shared-memory and TCP paths follow.
package ptlnet

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// PhysID is a Portals physical process identifier (Portals 4.3 §3.9: nid, pid).
type PhysID struct{ NID, PID uint32 }

// PIDAny is PTL_PID_ANY: let the transport choose a free pid.
const PIDAny = ^uint32(0)

// Peer is the authenticated sender of a message, as the transport established it (never taken
// from the message bytes): the sender's PhysID and its uid (the "protected header" of §2.5/§3.8).
type Peer struct {
	ID  PhysID
	UID uint32
}

// Config selects how the physical NI is opened.
type Config struct {
	PID uint32 // requested pid, or PIDAny
}

var (
	// ErrPIDInUse: the requested pid is held by another live process on this node (PTL_PID_IN_USE).
	ErrPIDInUse = errors.New("ptlnet: pid in use")
	// ErrUnreachable: a destination cannot be reached.
	ErrUnreachable = errors.New("ptlnet: destination unreachable")
	// ErrClosed: the Net has been closed.
	ErrClosed = errors.New("ptlnet: closed")
)

// Handler is called for every message that arrives, with hdr and payload valid only during the
// call. Calls are serialized (never two at once for one Net). The handler may call Send and must
// not block waiting for remote progress.
type Handler func(src Peer, hdr, payload []byte)

// MaxHeaderSize is the largest hdr Send accepts.
const MaxHeaderSize = 256

// Net is one process's physical network interface: it owns the process's PhysID.
type Net struct {
	id  PhysID
	uid uint32
	h   Handler

	mu     sync.Mutex
	queue  []inMsg
	closed bool
	hmu    sync.Mutex // serializes Handler calls
}

type inMsg struct {
	src          Peer
	hdr, payload []byte
}

var (
	procMu   sync.Mutex
	procNets = map[uint32]*Net{}
	nextPID  uint32
)

// Open opens the physical NI (the transport half of PtlNIInit, Portals 4.3 §3.6.1).
func Open(cfg Config, h Handler) (*Net, error) {
	if h == nil {
		return nil, errors.New("ptlnet: Open: nil handler")
	}
	procMu.Lock()
	defer procMu.Unlock()
	pid := cfg.PID
	if pid == PIDAny {
		for procNets[nextPID] != nil {
			nextPID++
		}
		pid = nextPID
	} else if procNets[pid] != nil {
		return nil, fmt.Errorf("%w: pid %d", ErrPIDInUse, pid)
	}
	n := &Net{id: PhysID{NID: 0x7f000001, PID: pid}, uid: uint32(os.Getuid()), h: h}
	procNets[pid] = n
	return n, nil
}

// ID returns the physical ID (PtlGetPhysId, Portals 4.3 §3.9.3).
func (n *Net) ID() PhysID { return n.id }

// UID returns the process's user id (PtlGetUid, Portals 4.3 §3.9.5).
func (n *Net) UID() uint32 { return n.uid }

// MaxHeader is the largest hdr Send accepts (at least 128 bytes).
func (n *Net) MaxHeader() int { return MaxHeaderSize }

// Send delivers one message to dst (the transport under PtlPut/PtlGet/PtlAtomic, Portals 4.3 §3.15).
func (n *Net) Send(dst PhysID, hdr, payload []byte) error {
	if len(hdr) > MaxHeaderSize {
		return fmt.Errorf("ptlnet: Send: header of %d bytes exceeds %d", len(hdr), MaxHeaderSize)
	}
	procMu.Lock()
	d := procNets[dst.PID]
	procMu.Unlock()
	if d == nil || dst.NID != n.id.NID {
		return fmt.Errorf("%w: %v", ErrUnreachable, dst)
	}
	m := inMsg{src: Peer{ID: n.id, UID: n.uid}, hdr: append([]byte(nil), hdr...), payload: append([]byte(nil), payload...)}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return fmt.Errorf("%w: %v", ErrUnreachable, dst)
	}
	d.queue = append(d.queue, m)
	d.mu.Unlock()
	go d.Poll()
	return nil
}

// Poll runs the Handler for messages already arrived, in the caller's goroutine.
func (n *Net) Poll() int {
	if !n.hmu.TryLock() {
		return 0
	}
	defer n.hmu.Unlock()
	c := 0
	for {
		n.mu.Lock()
		if n.closed || len(n.queue) == 0 {
			n.mu.Unlock()
			return c
		}
		m := n.queue[0]
		n.queue = n.queue[1:]
		n.mu.Unlock()
		n.h(m.src, m.hdr, m.payload)
		c++
	}
}

// Close tears the NI down (the transport half of PtlNIFini, Portals 4.3 §3.6.2).
func (n *Net) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	n.closed = true
	n.mu.Unlock()
	n.hmu.Lock()
	n.hmu.Unlock()
	procMu.Lock()
	delete(procNets, n.id.PID)
	procMu.Unlock()
	return nil
}
