//go:build amd64 && !race

#include "textflag.h"

// func repMovsb(dst, src unsafe.Pointer, n uintptr)
TEXT ·repMovsb(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	REP;	MOVSB
	RET

// func ntMove(dst, src unsafe.Pointer, n uintptr)
// dst 32-byte aligned, n a multiple of 128 and at least 1024. Src is
// prefetched with PREFETCHNTA 1 KiB ahead of the loads (the first 1 KiB
// before the loop, then two lines per 128-byte step, none past src's end).
TEXT ·ntMove(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	LEAQ	(SI)(CX*1), R11 // src's end
	LEAQ	1024(SI), R8    // the next line to prefetch
	PREFETCHNTA	0(SI)
	PREFETCHNTA	64(SI)
	PREFETCHNTA	128(SI)
	PREFETCHNTA	192(SI)
	PREFETCHNTA	256(SI)
	PREFETCHNTA	320(SI)
	PREFETCHNTA	384(SI)
	PREFETCHNTA	448(SI)
	PREFETCHNTA	512(SI)
	PREFETCHNTA	576(SI)
	PREFETCHNTA	640(SI)
	PREFETCHNTA	704(SI)
	PREFETCHNTA	768(SI)
	PREFETCHNTA	832(SI)
	PREFETCHNTA	896(SI)
	PREFETCHNTA	960(SI)
loop:
	CMPQ	R8, R11
	JAE	nopf
	PREFETCHNTA	(R8)
	PREFETCHNTA	64(R8)
	ADDQ	$128, R8
nopf:
	VMOVDQU	0(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVDQU	64(SI), Y2
	VMOVDQU	96(SI), Y3
	VMOVNTDQ	Y0, 0(DI)
	VMOVNTDQ	Y1, 32(DI)
	VMOVNTDQ	Y2, 64(DI)
	VMOVNTDQ	Y3, 96(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	SUBQ	$128, CX
	JNZ	loop
	SFENCE
	VZEROUPPER
	RET
