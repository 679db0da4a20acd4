#include "textflag.h"

// func hasRDPID() bool
// CPUID leaf 7, subleaf 0: ECX bit 22 is RDPID.
TEXT ·hasRDPID(SB), NOSPLIT, $0-1
	MOVL	$7, AX
	MOVL	$0, CX
	CPUID
	SHRL	$22, CX
	ANDL	$1, CX
	MOVB	CX, ret+0(FP)
	RET

// func rdpid() uint32
// RDPID RAX, spelled in bytes (F3 0F C7 /7, ModRM 0xF8): the Go assembler
// has no mnemonic for it. It reads IA32_TSC_AUX, where Linux keeps
// node<<12 | cpu.
TEXT ·rdpid(SB), NOSPLIT, $0-4
	BYTE	$0xF3; BYTE $0x0F; BYTE $0xC7; BYTE $0xF8
	MOVL	AX, ret+0(FP)
	RET
