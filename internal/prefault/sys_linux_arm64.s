#include "textflag.h"

// func sys3(trap, a1, a2, a3 uintptr) uintptr
TEXT ·sys3(SB), NOSPLIT, $0-40
	MOVD	trap+0(FP), R8
	MOVD	a1+8(FP), R0
	MOVD	a2+16(FP), R1
	MOVD	a3+24(FP), R2
	SVC
	MOVD	R0, r+32(FP)
	RET
