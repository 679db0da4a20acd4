package shm

import (
	"math"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Alignment of Region.Bytes() for each allocator.
const (
	MemfdAlign = 4096 // page aligned (mmap)
	HeapAlign  = 64   // cache-line aligned
)

// Region is one mapping of a shared region: created by an Allocator's Create
// (the owner) or mapped from a peer's Desc by Open. A Region is not safe for
// concurrent Close; its Bytes may be used concurrently through the atomic
// views of this package.
type Region struct {
	b      []byte
	desc   Desc
	fd     int   // memfd owner: the memfd; otherwise -1
	mapped bool  // b is an mmap mapping to munmap on Close
	heap   *Heap // heap owner: the registry to remove ID from on Close
}

// Bytes returns the whole mapping (nil after Close).
func (r *Region) Bytes() []byte { return r.b }

// Desc returns the descriptor peers pass to Open to map this region.
func (r *Region) Desc() Desc { return r.desc }

// Close unmaps the region; for the owner of a memfd it also closes the fd
// (peers' mappings stay valid), for the owner of a heap region it removes the
// region from its Heap (peers' views stay valid). Every view over Bytes() must
// be out of use: touching an unmapped memfd region faults. A second Close
// returns os.ErrClosed.
func (r *Region) Close() error {
	if r.b == nil {
		return os.ErrClosed
	}
	var err error
	if r.mapped {
		if e := unix.Munmap(r.b); e != nil {
			err = os.NewSyscallError("munmap", e)
		}
	}
	if r.fd >= 0 {
		if e := unix.Close(r.fd); e != nil && err == nil {
			err = os.NewSyscallError("close", e)
		}
		r.fd = -1
	}
	if r.heap != nil {
		r.heap.mu.Lock()
		delete(r.heap.m, r.desc.ID)
		r.heap.mu.Unlock()
		r.heap = nil
	}
	r.b = nil
	return err
}

// Allocator creates regions and maps regions created by peers.
type Allocator interface {
	// Create returns a new zero-filled region of size bytes rounded up to
	// the page size.
	Create(name string, size int) (*Region, error)
	// Open maps a peer's region read-write.
	Open(d Desc) (*Region, error)
}

var (
	_ Allocator = Memfd{}
	_ Allocator = (*Heap)(nil)
)

// roundSize rounds size up to the page size.
func roundSize(size int) (int, error) {
	ps := os.Getpagesize()
	if size <= 0 || size > math.MaxInt-ps {
		return 0, formatErr("region", "size", strconv.Itoa(size)+": must be in [1, MaxInt-pagesize]")
	}
	return (size + ps - 1) &^ (ps - 1), nil
}

// Heap allocates regions in Go heap memory, shared by ranks that are
// goroutines of one process (the loop conduit). Use one Heap per in-process
// job: Descs name regions by a key valid only in the Heap that created them.
// A Heap is safe for concurrent use.
type Heap struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64][]byte
}

// NewHeap returns an empty Heap.
func NewHeap() *Heap { return &Heap{m: make(map[uint64][]byte)} }

// Create allocates a zero-filled, HeapAlign-aligned region. name is ignored.
func (h *Heap) Create(name string, size int) (*Region, error) {
	n, err := roundSize(size)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, n+HeapAlign-1)
	off := int(-addrOf(raw) & (HeapAlign - 1))
	b := raw[off : off+n : off+n]
	h.mu.Lock()
	h.next++
	id := h.next
	h.m[id] = b
	h.mu.Unlock()
	return &Region{b: b, desc: Desc{Kind: DescHeap, Size: uint64(n), ID: id}, fd: -1, heap: h}, nil
}

// Open returns a Region over the memory of the region d names, which must
// have been created by this Heap and not yet closed by its owner.
func (h *Heap) Open(d Desc) (*Region, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	if d.Kind != DescHeap {
		return nil, formatErr("desc", "Kind", strconv.Itoa(int(d.Kind))+": Heap.Open needs DescHeap")
	}
	h.mu.Lock()
	b, ok := h.m[d.ID]
	h.mu.Unlock()
	if !ok {
		return nil, formatErr("desc", "ID", strconv.FormatUint(d.ID, 10)+": no such region in this Heap")
	}
	if uint64(len(b)) != d.Size {
		return nil, formatErr("desc", "Size", strconv.FormatUint(d.Size, 10)+": region "+
			strconv.FormatUint(d.ID, 10)+" has "+strconv.Itoa(len(b))+" bytes")
	}
	return &Region{b: b, desc: d, fd: -1}, nil
}
