package gex

import (
	"strconv"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/shm"
)

// Memory kinds (Memory Kinds, "Memory Kinds" and "gex_MK_Create"): a kind
// says what memory a segment lives in. The host kind is built in (MKHost);
// the device classes are recognized and refused, since this build has no
// device support. A kind decides how segment memory is allocated, released
// and copied (memKind), so a device kind (CUDA first) plugs in as one more
// implementation.

// MKClass is gex_MK_Class_t.
type MKClass int

// Memory kind classes.
const (
	MKClassHost    MKClass = iota // GEX_MK_CLASS_HOST
	MKClassCUDAUVA                // GEX_MK_CLASS_CUDA_UVA
	MKClassHIP                    // GEX_MK_CLASS_HIP
	MKClassZE                     // GEX_MK_CLASS_ZE
)

func (k MKClass) String() string {
	switch k {
	case MKClassHost:
		return "GEX_MK_CLASS_HOST"
	case MKClassCUDAUVA:
		return "GEX_MK_CLASS_CUDA_UVA"
	case MKClassHIP:
		return "GEX_MK_CLASS_HIP"
	case MKClassZE:
		return "GEX_MK_CLASS_ZE"
	}
	return "MKClass(" + strconv.Itoa(int(k)) + ")"
}

// MKCreateArgs is gex_MK_Create_args_t: the class and, for device classes,
// which device.
type MKCreateArgs struct {
	Flags  Flags
	Class  MKClass
	Device int // CUDA_UVA: gex_CUdevice; HIP: gex_hipDevice; ZE: device index
}

// MK is a memory kind (gex_MK_t).
type MK struct {
	c         *Client // nil for MKHost
	class     MKClass
	kind      memKind
	destroyed atomic.Bool
}

// memKind is what a kind decides about segment memory.
type memKind interface {
	// alloc returns size bytes of segment memory and, where the memory is
	// shared, the region that neighbourhood peers map (nil otherwise).
	alloc(c *Client, size uint64) ([]byte, *shm.Region, error)
	// free releases what alloc returned.
	free(mem []byte, reg *shm.Region) error
	// copy moves n bytes between memory of this kind and host memory
	// (both directions: host memory is directly addressable).
	copy(dst, src []byte)
}

// hostKind is GEX_MK_HOST: shared memory from the conduit's allocator (memfd
// for processes, the job's heap for in-process ranks).
type hostKind struct{}

func (hostKind) alloc(c *Client, size uint64) ([]byte, *shm.Region, error) {
	reg, err := c.allocator().Create("gexgo-seg-"+strconv.Itoa(c.rank), int(size))
	if err != nil {
		return nil, nil, err
	}
	return reg.Bytes()[:size:size], reg, nil
}

func (hostKind) free(_ []byte, reg *shm.Region) error {
	if reg == nil {
		return nil
	}
	return reg.Close()
}

func (hostKind) copy(dst, src []byte) { copyMapped(dst, src) }

// MKHost is GEX_MK_HOST, the kind of ordinary host memory: usable wherever
// a kind is accepted, by any client. Segments made by SegmentAttach have it.
var MKHost = &MK{class: MKClassHost, kind: hostKind{}}

// MKCreate implements gex_MK_Create (non-collective): a kind of the class in
// args. MKClassHost gives a kind equivalent to MKHost. The device classes
// are recognized and refused with GASNET_ERR_BAD_ARG: this build has no
// device support (the spec's GASNET_HAVE_MK_CLASS_* are all undefined but
// HOST). flags must be 0.
func MKCreate(c *Client, args MKCreateArgs, flags Flags) (*MK, error) {
	const op = "MKCreate"
	if c == nil {
		return nil, badArg(op, "client is nil")
	}
	if err := c.checkRestricted(op); err != nil {
		return nil, err
	}
	switch {
	case flags != 0:
		return nil, c.report(badArg(op, "flags %v not accepted (reserved, must be 0)", flags))
	case args.Flags != 0:
		return nil, c.report(badArg(op, "args.Flags %v not accepted (reserved, must be 0)", args.Flags))
	}
	switch args.Class {
	case MKClassHost:
		return &MK{c: c, class: MKClassHost, kind: hostKind{}}, nil
	case MKClassCUDAUVA, MKClassHIP, MKClassZE:
		return nil, c.report(badArg(op, "args.Class %v: this build has no device support (only GEX_MK_CLASS_HOST)", args.Class))
	}
	return nil, c.report(badArg(op, "args.Class %d is not a memory kind class", int(args.Class)))
}

// Destroy implements gex_MK_Destroy. MKHost cannot be destroyed; a kind in
// use by a live segment can not either.
func (mk *MK) Destroy(flags Flags) error {
	const op = "MK.Destroy"
	switch {
	case mk == nil:
		return badArg(op, "mk is nil")
	case mk == MKHost:
		return badArg(op, "GEX_MK_HOST is predefined and cannot be destroyed")
	case flags != 0:
		return mk.c.report(badArg(op, "flags %v not accepted (reserved, must be 0)", flags))
	case mk.destroyed.Load():
		return mk.c.report(badArg(op, "mk was already destroyed"))
	}
	mk.destroyed.Store(true)
	return nil
}

// QueryClass returns the kind's class.
func (mk *MK) QueryClass() MKClass { return mk.class }

// allocator is the conduit's shared-memory allocator (the heap for tests
// that give a conduit without one).
func (c *Client) allocator() shm.Allocator {
	if a, ok := c.cd.(interface{ Allocator() shm.Allocator }); ok && a.Allocator() != nil {
		return a.Allocator()
	}
	return localHeap
}

var localHeap = shm.NewHeap()
