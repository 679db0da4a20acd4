package shm

import (
	"encoding/binary"
	"strconv"
	"sync/atomic"
)

// Pool header: magic and version.
const (
	PoolMagic   = 0x4C505847 // "GXPL" little-endian
	PoolVersion = 1
)

// Pool layout: byte offsets from the start of the pool's byte range, which is
// 64-byte aligned.
const (
	poolOffMagic    = 0  // uint32, PoolMagic; written last by InitPool
	poolOffVersion  = 4  // uint32, PoolVersion
	poolOffNBufs    = 8  // uint32, in [1, poolMaxBufs]
	poolOffBufSize  = 12 // uint32, multiple of 64 in [64, poolMaxBufSize]
	poolOffFlags    = 64 // nbufs flags, one uint32 per 64-byte line: 0 free, 1 busy
	poolFlagStride  = 64
	poolMaxBufs     = 1 << 24
	poolMaxBufSize  = 1 << 31
	poolFlagFree    = 0
	poolFlagBusy    = 1
	poolHeaderBytes = poolOffFlags
)

// Pool is a view of fixed-size buffers in shared memory, each with a busy
// flag. The owner's goroutines allocate (TryAlloc, a CAS 0->1 on the flag) in
// their own region; the peer that received a buffer's index frees it (Free, a
// store of 0) once done with the contents. The flag hand-off orders the
// buffer's contents: writes before the owner publishes the index (through a
// Ring) are seen by the receiver, and the receiver's reads happen before the
// owner's next TryAlloc of the same buffer.
//
// Like Ring, a Pool value keeps the geometry it validated.
type Pool struct {
	b       []byte
	flags   []byte // b[poolOffFlags : poolOffFlags+nbufs*64]
	bufs    []byte // the buffers, nbufs*bufSize bytes
	n       int
	bufSize int
	next    atomic.Uint32 // process-local hint: where TryAlloc starts looking
}

func checkPoolGeometry(nbufs, bufSize uint64) error {
	if nbufs < 1 || nbufs > poolMaxBufs {
		return formatErr("pool", "nbufs", strconv.FormatUint(nbufs, 10)+": not in [1, 2^24]")
	}
	if bufSize < 64 || bufSize > poolMaxBufSize || bufSize%64 != 0 {
		return formatErr("pool", "bufSize", strconv.FormatUint(bufSize, 10)+": not a multiple of 64 in [64, 2^31]")
	}
	return nil
}

func poolGeometryArgs(nbufs, bufSize int) error {
	if nbufs < 0 || bufSize < 0 {
		return formatErr("pool", "nbufs/bufSize", "negative")
	}
	return checkPoolGeometry(uint64(nbufs), uint64(bufSize))
}

func poolBytes(nbufs, bufSize uint64) uint64 {
	return poolHeaderBytes + nbufs*poolFlagStride + nbufs*bufSize
}

// PoolBytes returns the bytes a pool of nbufs buffers of bufSize bytes
// occupies. It panics if the geometry is invalid (nbufs in [1, 2^24], bufSize
// a multiple of 64 >= 64).
func PoolBytes(nbufs, bufSize int) int {
	if err := poolGeometryArgs(nbufs, bufSize); err != nil {
		panic(err)
	}
	return int(poolBytes(uint64(nbufs), uint64(bufSize)))
}

// InitPool formats b as a pool with every buffer free and returns the owner's
// view. b must be 64-byte aligned and at least PoolBytes(nbufs, bufSize)
// long. Buffer contents are left as they are.
func InitPool(b []byte, nbufs, bufSize int) (*Pool, error) {
	if err := poolGeometryArgs(nbufs, bufSize); err != nil {
		return nil, err
	}
	if need := poolBytes(uint64(nbufs), uint64(bufSize)); uint64(len(b)) < need {
		return nil, formatErr("pool", "length", strconv.Itoa(len(b))+" bytes, need "+strconv.FormatUint(need, 10))
	}
	if err := checkBase("pool", b); err != nil {
		return nil, err
	}
	Uint32At(b, poolOffMagic).Store(0)
	binary.LittleEndian.PutUint32(b[poolOffVersion:], PoolVersion)
	binary.LittleEndian.PutUint32(b[poolOffNBufs:], uint32(nbufs))
	binary.LittleEndian.PutUint32(b[poolOffBufSize:], uint32(bufSize))
	clear(b[16:poolOffFlags])
	p := newPool(b, uint64(nbufs), uint64(bufSize))
	clear(p.flags) // every flag poolFlagFree
	Uint32At(b, poolOffMagic).Store(PoolMagic)
	return p, nil
}

// AttachPool returns a view of the pool a peer formatted at the start of b,
// after validating magic, version and geometry against len(b) and alignment.
// Whatever the bytes, it does not panic.
func AttachPool(b []byte) (*Pool, error) {
	if len(b) < poolHeaderBytes {
		return nil, formatErr("pool", "length", strconv.Itoa(len(b))+" bytes, less than the 64-byte header")
	}
	if err := checkBase("pool", b); err != nil {
		return nil, err
	}
	if m := Uint32At(b, poolOffMagic).Load(); m != PoolMagic {
		return nil, formatErr("pool", "magic", "0x"+strconv.FormatUint(uint64(m), 16)+", want 0x4c505847 (GXPL)")
	}
	if v := binary.LittleEndian.Uint32(b[poolOffVersion:]); v != PoolVersion {
		return nil, formatErr("pool", "version", strconv.FormatUint(uint64(v), 10)+", want 1")
	}
	nbufs := uint64(binary.LittleEndian.Uint32(b[poolOffNBufs:]))
	bufSize := uint64(binary.LittleEndian.Uint32(b[poolOffBufSize:]))
	if err := checkPoolGeometry(nbufs, bufSize); err != nil {
		return nil, err
	}
	if need := poolBytes(nbufs, bufSize); uint64(len(b)) < need {
		return nil, formatErr("pool", "nbufs*bufSize", strconv.FormatUint(nbufs, 10)+"*"+
			strconv.FormatUint(bufSize, 10)+" needs "+strconv.FormatUint(need, 10)+" bytes, have "+
			strconv.Itoa(len(b)))
	}
	return newPool(b, nbufs, bufSize), nil
}

func newPool(b []byte, nbufs, bufSize uint64) *Pool {
	n := int(poolBytes(nbufs, bufSize))
	b = b[:n:n]
	bufsOff := poolOffFlags + int(nbufs)*poolFlagStride
	return &Pool{
		b:       b,
		flags:   b[poolOffFlags:bufsOff],
		bufs:    b[bufsOff:],
		n:       int(nbufs),
		bufSize: int(bufSize),
	}
}

// NumBufs returns the number of buffers.
func (p *Pool) NumBufs() int { return p.n }

// BufSize returns the size of each buffer.
func (p *Pool) BufSize() int { return p.bufSize }

// TryAlloc claims a free buffer (CAS of its flag 0 -> 1) and returns its index
// and bytes (BufSize() long), or ok == false if every buffer is busy. Any
// goroutine of the owner's process may call it; it does not wait.
func (p *Pool) TryAlloc() (idx int, buf []byte, ok bool) { return p.tryAlloc(1) }

// TryAllocHot is TryAlloc for a payload that is copied in with cached stores
// and read by the peer right away: the hint stays on the buffer it returns,
// so that with one message in flight (a round trip) every message reuses the
// same buffer, whose lines are still in the sender's and the receiver's
// caches, where TryAlloc's round robin spreads them over all the buffers.
// Measured with gexbench am on this project's Zen4 VM, 4 pairs of runs, fast
// mode: AM Medium round trips of 2, 4, 8 and 16 KiB 14%, 9%, 29% and 13%
// faster; 32 and 64 KiB, copied with non-temporal stores, 8% and 2% slower
// (the stores then invalidate lines the receiver has just read), so those
// keep TryAlloc (docs/am.md, "Medium copies, third pass").
func (p *Pool) TryAllocHot() (idx int, buf []byte, ok bool) { return p.tryAlloc(0) }

// tryAlloc is TryAlloc with the hint moving step buffers past the one taken.
func (p *Pool) tryAlloc(step int) (idx int, buf []byte, ok bool) {
	n := p.n
	i := int(p.next.Load())
	if i >= n {
		i = 0
	}
	// The hinted buffer is usually free (buffers are used round robin, and
	// its consumer freed it several messages ago): CAS it at once, one
	// coherence transaction on a line the consumer wrote last. The others
	// are loaded first, so that a scan over busy buffers does not take
	// their lines away from the consumers.
	if f := p.flagAt(i); f.CompareAndSwap(poolFlagFree, poolFlagBusy) {
		return p.took(i, step)
	}
	for range n - 1 {
		if i++; i == n {
			i = 0
		}
		f := p.flagAt(i)
		if f.Load() == poolFlagFree && f.CompareAndSwap(poolFlagFree, poolFlagBusy) {
			return p.took(i, step)
		}
	}
	return -1, nil, false
}

// took records buffer i as allocated: the hint moves step buffers past it
// (a release store, not an XCHG: it is only a hint) and TryAlloc returns it.
func (p *Pool) took(i, step int) (idx int, buf []byte, ok bool) {
	next := i + step
	if next == p.n {
		next = 0
	}
	storeRelease32(&p.next, uint32(next))
	return i, p.bufAt(i), true
}

// Buf returns the bytes of buffer idx, an index received from a peer:
// ErrBadIndex if it is outside [0, NumBufs()).
func (p *Pool) Buf(idx int) ([]byte, error) {
	if uint(idx) >= uint(p.n) {
		return nil, ErrBadIndex
	}
	return p.bufAt(idx), nil
}

// Free marks buffer idx free again (an atomic swap to 0): every access to its
// bytes must be done. ErrBadIndex if idx is outside [0, NumBufs()); ErrNotBusy
// if the buffer was already free (a double free; it stays free).
// Put frees buffer idx like Free, with a release store instead of an
// atomic swap, and without detecting a double free: the consumer does not
// wait for the line, which the producer last wrote, to come back (a swap
// would, on the consumer's way back to its own sends). Every read of the
// buffer made before Put is done before a producer that allocates it again
// writes to it. idx out of range is ignored.
func (p *Pool) Put(idx int) {
	if uint(idx) < uint(p.n) {
		storeRelease32(p.flagAt(idx), poolFlagFree)
	}
}

func (p *Pool) Free(idx int) error {
	if uint(idx) >= uint(p.n) {
		return ErrBadIndex
	}
	if p.flagAt(idx).Swap(poolFlagFree) == poolFlagFree {
		return ErrNotBusy
	}
	return nil
}
