// Package memcopy copies bulk payloads that another core reads next: a
// shared-memory pool buffer or broadcast ring that a peer process copies out
// of, a peer's segment that a Long or a put fills for its owner.
//
// copy (runtime.memmove) moves a block with cached AVX stores. When the
// other core reads the block next, every line then travels from this core's
// cache to the other's, and the next copy into the same buffer first takes
// each line back (a read for ownership). Measured on this project's AMD Zen4
// machine with two threads pinned to the two CPUs (BenchmarkMediumPattern,
// BenchmarkLongPattern), writing blocks of 32 KiB and more with
// non-temporal stores, which put the lines in memory without reading them
// and leave them in no core's cache, makes such a hand-off faster; below
// that the cached copy wins. REP MOVSB (ERMS/FSRM, glibc's memcpy for these
// sizes) measured no better than copy at 64 KiB and slower at 1 MiB; it is
// used only by CopyHot, for a source hot in this core's cache of 2-4 KiB,
// where the AM Medium round trip measured it faster than copy.
//
// The non-temporal loop prefetches its source 1 KiB ahead with PREFETCHNTA:
// in gexbench am the 64 KiB Medium and the 32/64 KiB Longs measured 1-9%
// faster, the 32 KiB Medium up to 2% slower. A third pass (docs/am.md,
// "Medium copies, third pass") found nothing faster than copy below 32 KiB
// in the VM's fast mode, where a line moves between the cores in ~30 ns:
// PREFETCHW of the destination, PREFETCHT0 of the source (whole block
// first, or 1 KiB ahead), 256-bit and 512-bit cached loops, all equal or
// slower; 512-bit non-temporal stores equal to 256-bit ones; non-temporal
// stores for only one side of the echo slower than for both. In the slow
// mode (a line from the other core ~150 ns) non-temporal stores win from
// 2-4 KiB, but a copy cannot tell the modes apart, so Threshold stays
// (the smp conduit, which can time both ways when a job starts, chooses
// its own length and copies with CopyNT: docs/am.md, "Medium copies,
// sixth pass"). A fifth pass ("Medium copies, fifth pass"), timing the
// sides apart, found REP MOVSB faster than copy for the side that copies
// its own hot bytes into lines the other core read last, from just above
// 2 KiB to 4 KiB, and not for the side that reads the other core's lines:
// CopyHot.
//
// Non-temporal stores are the wrong choice for a buffer this core itself
// reads next, or rewrites over and over with nobody reading it: then the
// cached copy keeps it in this core's cache, where Copy sends it to memory.
// Callers use Copy only where the other side consumes the bytes.
//
// Copy has copy's semantics: it copies min(len(dst), len(src)) bytes and
// returns that count; overlapping slices are handed to copy. Its stores are
// visible to other cores before any store the caller makes after it (an
// SFENCE ends the non-temporal part), so a payload followed by a release
// store of a commit word is published as with copy. Under the race detector,
// and on other architectures, Copy is copy, so the race detector sees every
// access.
package memcopy

// Threshold is the smallest length Copy writes with non-temporal stores;
// shorter copies are copy.
const Threshold = 32 << 10

// NTMin is the smallest length CopyNT writes with non-temporal stores (the
// loop moves 128-byte blocks after aligning dst, at least 1 KiB of them).
const NTMin = 2 << 10

// HotMin and HotMax bound the lengths CopyHot copies with REP MOVSB: above
// 2 KiB and up to 4 KiB it measured faster than copy, at 2 KiB the same and
// from 6 KiB slower (docs/am.md, "Medium copies, fifth pass").
const (
	HotMin = 2<<10 + 1
	HotMax = 4 << 10
)
