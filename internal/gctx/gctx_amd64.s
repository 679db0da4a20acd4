#include "textflag.h"

// func ID() uintptr
// In the Go internal ABI, R14 holds the current g on amd64. ABI0 functions are
// entered through a wrapper that leaves R14 intact.
TEXT ·ID(SB),NOSPLIT|NOFRAME,$0-8
	MOVQ R14, ret+0(FP)
	RET
