//go:build amd64 && !race

#include "textflag.h"

// func prefetchw(p unsafe.Pointer)
// PREFETCHW (AX), spelled in bytes (0F 0D /1, ModRM 0x08): the Go
// assembler has no mnemonic for it. A prefetch never faults.
TEXT ·prefetchw(SB), NOSPLIT, $0-8
	MOVQ	p+0(FP), AX
	BYTE	$0x0F; BYTE $0x0D; BYTE $0x08
	RET
