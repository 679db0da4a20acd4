//go:build amd64 && !race

package memcopy

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useNT says whether Copy may use non-temporal stores: VMOVNTDQ on 32-byte
// registers needs AVX.
var useNT = cpu.X86.HasAVX

// ntMove copies n bytes (a multiple of 128, at least 1024) from src to a
// 32-byte aligned dst with AVX loads and non-temporal stores, then SFENCE:
// the stores are visible to other cores before any store that follows the
// call. It prefetches src 1 KiB ahead with PREFETCHNTA: a hand-off's src is
// usually in memory (the peer wrote it with non-temporal stores) and read
// once; the non-temporal hint keeps its lines out of this core's L2 (where
// the peer's next non-temporal writes to the same buffer would have to
// invalidate them: our reading of why NTA measured better than PREFETCHT0,
// which did not help the Medium rows; docs/am.md, "Medium copies, third
// pass").
//
//go:noescape
func ntMove(dst, src unsafe.Pointer, n uintptr)

// repMovsb copies n bytes from src to dst forwards with REP MOVSB (ERMS).
// CopyHot uses it for HotMin to HotMax bytes; the benchmarks measure it at
// every size beside copy and Copy.
//
//go:noescape
func repMovsb(dst, src unsafe.Pointer, n uintptr)

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns
// that count, as copy does. From Threshold bytes on it writes dst with
// non-temporal stores, leaving dst in memory and out of every core's cache.
func Copy(dst, src []byte) int {
	if min(len(dst), len(src)) < Threshold {
		return copy(dst, src)
	}
	return CopyNT(dst, src)
}

// CopyNT is Copy with non-temporal stores from NTMin bytes on, for a
// caller that measured them faster at its lengths (the smp conduit, where
// the host's timing says so: docs/am.md, "Medium copies, sixth pass").
func CopyNT(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < NTMin || !useNT {
		return copy(dst, src)
	}
	d, s := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src))
	if uintptr(d)-uintptr(s) < uintptr(n) || uintptr(s)-uintptr(d) < uintptr(n) {
		return copy(dst, src) // overlapping: memmove's semantics
	}
	head := int(-uintptr(d)) & 31
	body := (n - head) &^ 127
	copy(dst[:head], src[:head])
	ntMove(unsafe.Add(d, head), unsafe.Add(s, head), uintptr(body))
	copy(dst[head+body:n], src[head+body:n])
	return n
}

// useERMS says whether CopyHot may use REP MOVSB (enhanced REP MOVSB).
var useERMS = cpu.X86.HasERMS

// CopyHot is Copy for a source this core has just written or read (a
// request's payload from the sender's own memory) going into a buffer the
// other core read last: from HotMin to HotMax bytes it copies with REP
// MOVSB, which measured faster than memmove's AVX loop there (docs/am.md,
// "Medium copies, fifth pass"); other lengths, overlapping slices and CPUs
// without ERMS take Copy.
func CopyHot(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < HotMin || n > HotMax || !useERMS {
		return Copy(dst, src)
	}
	d, s := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src))
	if uintptr(d)-uintptr(s) < uintptr(n) || uintptr(s)-uintptr(d) < uintptr(n) {
		return copy(dst, src) // overlapping: memmove's semantics
	}
	repMovsb(d, s, uintptr(n))
	return n
}

// copyERMS is Copy's shape around REP MOVSB (for the benchmarks).
func copyERMS(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < 2048 || !cpu.X86.HasERMS {
		return copy(dst, src)
	}
	d, s := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src))
	if uintptr(d)-uintptr(s) < uintptr(n) {
		return copy(dst, src)
	}
	repMovsb(d, s, uintptr(n))
	return n
}
