#include "textflag.h"

// func sys3(trap, a1, a2, a3 uintptr) uintptr
TEXT ·sys3(SB), NOSPLIT, $0-40
	MOVQ	trap+0(FP), AX
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	a3+24(FP), DX
	SYSCALL
	MOVQ	AX, r+32(FP)
	RET
