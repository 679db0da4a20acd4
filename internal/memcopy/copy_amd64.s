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
// dst 32-byte aligned, n a multiple of 128.
TEXT ·ntMove(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
loop:
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

// PREFETCHW (R8): 0F 0D /1, modrm 00 001 000 with REX.B (the Go assembler
// has no PREFETCHW).
#define PREFETCHW_R8 BYTE $0x41; BYTE $0x0F; BYTE $0x0D; BYTE $0x08

// func pfwMove(dst, src unsafe.Pointer, n uintptr)
// dst 32-byte aligned, n a multiple of 128: PREFETCHW every dst line, then
// copy with cached AVX stores.
TEXT ·pfwMove(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	MOVQ	DI, R8
	MOVQ	CX, R9
pf:
	PREFETCHW_R8
	ADDQ	$64, R8
	SUBQ	$64, R9
	JNZ	pf
loop:
	VMOVDQU	0(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVDQU	64(SI), Y2
	VMOVDQU	96(SI), Y3
	VMOVDQA	Y0, 0(DI)
	VMOVDQA	Y1, 32(DI)
	VMOVDQA	Y2, 64(DI)
	VMOVDQA	Y3, 96(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	SUBQ	$128, CX
	JNZ	loop
	VZEROUPPER
	RET

// func pfsMove(dst, src unsafe.Pointer, n uintptr)
// dst 32-byte aligned, n a multiple of 128: PREFETCHT0 every src line,
// then copy with cached AVX stores.
TEXT ·pfsMove(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	MOVQ	SI, R8
	MOVQ	CX, R9
pf:
	PREFETCHT0	(R8)
	ADDQ	$64, R8
	SUBQ	$64, R9
	JNZ	pf
loop:
	VMOVDQU	0(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVDQU	64(SI), Y2
	VMOVDQU	96(SI), Y3
	VMOVDQA	Y0, 0(DI)
	VMOVDQA	Y1, 32(DI)
	VMOVDQA	Y2, 64(DI)
	VMOVDQA	Y3, 96(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	SUBQ	$128, CX
	JNZ	loop
	VZEROUPPER
	RET

// func pfbMove(dst, src unsafe.Pointer, n uintptr)
// Both: PREFETCHT0 of every src line and PREFETCHW of every dst line,
// interleaved, then the cached copy.
TEXT ·pfbMove(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	MOVQ	DI, R8
	MOVQ	SI, R10
	MOVQ	CX, R9
pf:
	PREFETCHT0	(R10)
	PREFETCHW_R8
	ADDQ	$64, R8
	ADDQ	$64, R10
	SUBQ	$64, R9
	JNZ	pf
loop:
	VMOVDQU	0(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVDQU	64(SI), Y2
	VMOVDQU	96(SI), Y3
	VMOVDQA	Y0, 0(DI)
	VMOVDQA	Y1, 32(DI)
	VMOVDQA	Y2, 64(DI)
	VMOVDQA	Y3, 96(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	SUBQ	$128, CX
	JNZ	loop
	VZEROUPPER
	RET

// func avxMove(dst, src unsafe.Pointer, n uintptr)
// The plain cached AVX copy (the loops above without prefetches).
TEXT ·avxMove(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
loop:
	VMOVDQU	0(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVDQU	64(SI), Y2
	VMOVDQU	96(SI), Y3
	VMOVDQA	Y0, 0(DI)
	VMOVDQA	Y1, 32(DI)
	VMOVDQA	Y2, 64(DI)
	VMOVDQA	Y3, 96(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	SUBQ	$128, CX
	JNZ	loop
	VZEROUPPER
	RET

// func z512Move(dst, src unsafe.Pointer, n uintptr)
// dst 64-byte aligned, n a multiple of 256: whole-line AVX-512 stores.
TEXT ·z512Move(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
loop:
	VMOVDQU64	0(SI), Z0
	VMOVDQU64	64(SI), Z1
	VMOVDQU64	128(SI), Z2
	VMOVDQU64	192(SI), Z3
	VMOVDQA64	Z0, 0(DI)
	VMOVDQA64	Z1, 64(DI)
	VMOVDQA64	Z2, 128(DI)
	VMOVDQA64	Z3, 192(DI)
	ADDQ	$256, SI
	ADDQ	$256, DI
	SUBQ	$256, CX
	JNZ	loop
	VZEROUPPER
	RET

// func pfwDistMove(dst, src unsafe.Pointer, n uintptr)
// dst 32-byte aligned, n a multiple of 128: PREFETCHW of the first 16 dst
// lines, then in the copy loop PREFETCHW two lines 1 KiB ahead (not past
// dst's end).
TEXT ·pfwDistMove(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	LEAQ	(DI)(CX*1), R11 // end of dst
	MOVQ	DI, R8
	MOVQ	$16, R9
pf:
	CMPQ	R8, R11
	JAE	loop
	PREFETCHW_R8
	ADDQ	$64, R8
	DECQ	R9
	JNZ	pf
loop:
	CMPQ	R8, R11
	JAE	nopf
	PREFETCHW_R8
	ADDQ	$64, R8
	PREFETCHW_R8
	ADDQ	$64, R8
nopf:
	VMOVDQU	0(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVDQU	64(SI), Y2
	VMOVDQU	96(SI), Y3
	VMOVDQA	Y0, 0(DI)
	VMOVDQA	Y1, 32(DI)
	VMOVDQA	Y2, 64(DI)
	VMOVDQA	Y3, 96(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	SUBQ	$128, CX
	JNZ	loop
	VZEROUPPER
	RET

// func ntZMove(dst, src unsafe.Pointer, n uintptr)
// dst 64-byte aligned, n a multiple of 256: AVX-512 loads, whole-line
// non-temporal stores, SFENCE.
TEXT ·ntZMove(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
loop:
	VMOVDQU64	0(SI), Z0
	VMOVDQU64	64(SI), Z1
	VMOVDQU64	128(SI), Z2
	VMOVDQU64	192(SI), Z3
	VMOVNTDQ	Z0, 0(DI)
	VMOVNTDQ	Z1, 64(DI)
	VMOVNTDQ	Z2, 128(DI)
	VMOVNTDQ	Z3, 192(DI)
	ADDQ	$256, SI
	ADDQ	$256, DI
	SUBQ	$256, CX
	JNZ	loop
	SFENCE
	VZEROUPPER
	RET

// func ntPfMove(dst, src unsafe.Pointer, n, dist uintptr)
// ntMove with a PREFETCHT0 of the src lines dist bytes ahead (a multiple of
// 128; not past src's end).
TEXT ·ntPfMove(SB), NOSPLIT, $0-32
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	MOVQ	dist+24(FP), R8
	LEAQ	(SI)(CX*1), R11
	ADDQ	SI, R8
loop:
	CMPQ	R8, R11
	JAE	nopf
	PREFETCHT0	(R8)
	PREFETCHT0	64(R8)
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
