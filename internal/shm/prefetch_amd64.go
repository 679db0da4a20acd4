//go:build amd64 && !race

package shm

import "unsafe"

// prefetchw asks for the cache line at p in a writable state (PREFETCHW):
// the line's transfer from another core starts now, so that a later store
// or CAS finds it here. It reads and writes nothing.
//
//go:noescape
func prefetchw(p unsafe.Pointer)

// PrefetchPut starts taking buffer idx's flag line into this core's cache,
// ready for the Put that frees the buffer once its contents are read. The
// owner wrote the flag last (TryAlloc's CAS) and touches it again only
// after that Put, so nothing else wants the line meanwhile; without the
// prefetch the Put's store waits in the store buffer for the line, and the
// next locked instruction on this thread (its own next TryAlloc, a ring
// reservation) waits for that store. It changes no memory and never
// faults; idx out of range is ignored. (Measured with PrefetchHot:
// docs/am.md, "Medium copies, fourth pass".)
func (p *Pool) PrefetchPut(idx int) {
	if uint(idx) < uint(p.n) {
		prefetchw(unsafe.Pointer(p.flagAt(idx)))
	}
}

// PrefetchHot starts taking into this core's cache the flag line of the
// buffer TryAllocHot claims first, for a caller that expects to send soon:
// the smp conduit calls it for its pool toward a peer when a pooled
// Medium from that peer arrives in the other class (a request, which the
// handler is likely to answer; a reply, after which the next request
// usually follows). The peer's Put wrote that line last, so the CAS would
// otherwise wait for it. Measured with gexbench am, 4 runs of 10-12
// interleaved pairs, fast mode, with PrefetchPut: the Medium round trip
// 8-13% faster at 2 KiB, 0.3-3% at 4 KiB, other sizes within the noise
// (docs/am.md, "Medium copies, fourth pass"). If the buffer is still busy
// the line only travels early; nothing changes.
func (p *Pool) PrefetchHot() {
	i := int(p.next.Load())
	if i >= p.n {
		i = 0
	}
	prefetchw(unsafe.Pointer(p.flagAt(i)))
}
