// Package shm provides the shared-memory machinery of the intra-node (smp)
// and in-process (loop) conduits: regions that several processes or
// goroutines map, futexes, a bounded multi-producer single-consumer ring of
// fixed-size slots, a pool of fixed-size buffers and a futex doorbell.
//
// It is Linux only and imports only the standard library and
// golang.org/x/sys/unix. Package unsafe is used only in the *_unsafe.go files
// and in futex_linux.go (where the pointer-to-uintptr conversion must sit in
// the syscall expression). Everything that lives in shared memory is
// addressed by byte offsets (named constants) into a mapping, never by Go
// pointers, and is accessed through sync/atomic overlays (Uint32At, Uint64At).
//
// # Regions
//
// A Region is a mapping; an Allocator creates regions and maps peers' regions
// from their Desc (a fixed 32-byte encoding exchanged by the bootstrap
// all-gather):
//
//   - Memfd: memfd_create(name, MFD_CLOEXEC), fchmod 0600, ftruncate, mmap
//     MAP_SHARED. Peers Open /proc/<pid>/fd/<fd> read-write, check it is a
//     memfd large enough, map it and close the fd. Nothing is created in
//     /dev/shm or any file system, so nothing can survive a crash. Bytes() is
//     page aligned (MemfdAlign).
//   - Heap: Go heap memory for ranks that are goroutines of one process (the
//     loop conduit), so that the race detector sees every access. Bytes() is
//     HeapAlign (64) aligned.
//
// Sizes are rounded up to the page size and regions are zero-filled.
//
// # Ring layout
//
// Every shared layout starts with a magic and a version word. A ring lies in
// a 64-byte aligned byte range (offsets from its start, little-endian):
//
//	0    magic     uint32  RingMagic "GXRQ"          owner, at InitRing (stored last)
//	4    version   uint32  RingVersion = 1          owner, at InitRing
//	8    nslots    uint32  power of two >= 2        owner, at InitRing
//	12   slotSize  uint32  multiple of 64 >= 64     owner, at InitRing
//	64   tail      uint64  next ticket to reserve   producers (CAS); own cache line
//	128  head      uint64  next ticket to consume   the consumer; own cache line
//	192  reserved (zero; keeps slot 0 off head's line pair)
//	256  slots     nslots * slotSize bytes; slot i at 256 + i*slotSize:
//	       0  seq   uint64  sequence word (atomic)   producers and the consumer, by turns
//	       8  data  slotSize-8 bytes                 the producer holding the slot, then the consumer
//
// The ring is Dmitry Vyukov's bounded queue. A message's ticket t (its
// position, a uint64 that never wraps in practice) selects slot t&(nslots-1);
// the slot's seq says whose turn it is:
//
//	seq == t         free for the producer of ticket t
//	seq == t+1       committed: message t is ready for the consumer
//	seq == t+nslots  released: free for the producer of ticket t+nslots
//
// Producer (TryReserve, Commit): load tail; if the slot's seq == tail, CAS
// tail -> tail+1 to own ticket t; write the data; then publish with the store
// seq = t+1 (the data writes happen before it). Full when seq < tail.
// Consumer (Peek, Release): load head; ready when seq == head+1; read the
// data; then seq = head+nslots (the reads happen before the slot is reused)
// and head = head+1. Peek returns the slot's fixed-size data: message framing
// (length, handler, arguments) is the caller's.
//
// The ring has no doorbell words of its own: a producer that may have to
// wake the consumer rings the consumer's Bell after Commit.
//
// Any number of producers in any number of processes may produce at once. At
// most one goroutine in all processes consumes at a time; the ring's owner
// serialises its consumers with a lock of its own.
//
// # MsgRing
//
// MsgRing (msgring.go: the smp conduit's AM rings, ptlnet's transmit rings) has the same roles with
// variable-length messages in 64-byte slots: the header words tail (offset
// 128, producers) and head (offset 256, published by the consumer once per
// batch) on their own 128-byte blocks, slots from offset 384. A message's
// first 8 bytes are its commit word (tag, slot count, flags), stored last,
// sequentially consistent or, between processes registered for membarrier
// (EnableHeavyFence), with a release store (the Bell argument below); producers
// find free slots from a cached head and never read a slot before writing
// it; the consumer clears the first word of a later slot only when it reads
// as next lap's tag. A ring whose producers take turns under a lock of their
// own (ptlnet's, one connection's sends) may reserve with ReserveOne instead:
// the tail advanced with a store rather than a compare-and-swap.
//
// # Pool layout
//
// A pool holds fixed-size buffers for payloads too big for a ring slot:
//
//	0    magic     uint32  PoolMagic "GXPL"          owner, at InitPool (stored last)
//	4    version   uint32  PoolVersion = 1
//	8    nbufs     uint32  in [1, 2^24]
//	12   bufSize   uint32  multiple of 64 >= 64
//	64   flags     nbufs * 64 bytes: buffer i's flag uint32 at 64 + 64*i (0 free, 1 busy)
//	64+64*nbufs    buffers: buffer i at 64 + 64*nbufs + i*bufSize (64-byte aligned)
//
// The sender allocates in its own region (TryAlloc: CAS flag 0 -> 1), writes
// the payload, and sends the buffer index in a ring message (whose Commit
// publishes the payload). The receiver validates the index (Buf), runs the
// handler, then frees the buffer (Free: swap flag to 0), which orders its
// reads before the sender's next TryAlloc of that buffer.
//
// # Bell
//
// A rank sleeps on one futex word for all of its inbound rings. A Bell is 8
// bytes (4-byte aligned, best on its own cache line) in the sleeper's region:
//
//	0  value     uint32  futex word; ringers add 1 when sleepers != 0
//	4  sleepers  uint32  the sleeping rank adds 1 before checking, subtracts 1 after
//
// Publish order: a producer Commits, then Rings the destination's Bell (a
// single load of sleepers when nobody sleeps). The sleeper announces itself
// (sleepers++), loads value, re-checks its rings, and waits on value only if
// they are all empty. With sequentially consistent atomics either the check
// sees the Commit or the Ring sees the sleeper and changes value, so no
// wake-up is lost. With a release-store Commit the sleeper supplies the
// producer's barrier: membarrier(2) MEMBARRIER_CMD_GLOBAL_EXPEDITED between
// announcing itself and re-checking (Bell.WithHeavyFence; the argument is at
// Bell.Sleep).
//
// # Peers
//
// Nothing a peer writes into shared memory makes this package panic or
// access memory outside a view: AttachRing, AttachMsgRing and AttachPool
// validate every header field against the length and alignment of the
// bytes, the views keep the geometry they validated, ring positions are
// masked (a MsgRing slot count that would run past the end is taken as 1),
// and pool indices from peers are range-checked (Buf, Free). A peer that scribbles on the
// shared words can still lose or garble messages; it cannot crash the reader.
package shm
