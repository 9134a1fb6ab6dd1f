// One or more instructions of every extension the classifier knows, plus base
// v8.0 instructions around them. Assembled by the tests with clang-16; the
// oracle for what each word needs is llvm-mc-16.
	.text
	.globl	base_code
	.type	base_code, %function
base_code:
	add	x0, x1, x2
	ldr	x3, [x4, #8]
	fadd	d0, d1, d2
	fcvt	s0, h1
	fcvt	h0, s1
	add	v0.4s, v1.4s, v2.4s
	ldaxr	x0, [x1]
	stlxr	w2, x3, [x4]
	ldxp	x0, x1, [x2]
	pmull	v0.8h, v1.8b, v2.8b
	mrs	x0, midr_el1
	paciasp
	autiasp
	bti	c
	ret
	.size	base_code, .-base_code

	.globl	feature_code
	.type	feature_code, %function
feature_code:
	ldadd	x0, x1, [x2]
	ldaddal	w0, w1, [x2]
	stadd	x0, [x2]
	swp	x0, x1, [x2]
	casal	x0, x1, [x2]
	casb	w0, w1, [x2]
	casp	x0, x1, x2, x3, [x4]
	ldsmaxal	x0, x1, [x2]
	ldapr	x0, [x1]
	ldaprb	w0, [x1]
	ldapur	x0, [x1, #8]
	stlur	x0, [x1, #8]
	crc32b	w0, w1, w2
	crc32cx	w0, w1, x2
	aese	v0.16b, v1.16b
	aesmc	v0.16b, v1.16b
	pmull	v0.1q, v1.1d, v2.1d
	sha256h	q0, q1, v2.4s
	sha1h	s0, s1
	sha512h	q0, q1, v2.2d
	eor3	v0.16b, v1.16b, v2.16b, v3.16b
	rax1	v0.2d, v1.2d, v2.2d
	xar	v0.2d, v1.2d, v2.2d, #3
	sm4e	v0.4s, v1.4s
	sm3ss1	v0.4s, v1.4s, v2.4s, v3.4s
	sqrdmlah	v0.4s, v1.4s, v2.4s
	sqrdmlah	v0.4s, v1.4s, v2.s[1]
	sdot	v0.4s, v1.16b, v2.16b
	udot	v0.2s, v1.8b, v2.4b[1]
	usdot	v0.4s, v1.16b, v2.16b
	smmla	v0.4s, v1.16b, v2.16b
	fcmla	v0.4s, v1.4s, v2.4s, #90
	fcadd	v0.4s, v1.4s, v2.4s, #90
	bfdot	v0.4s, v1.8h, v2.8h
	bfmmla	v0.4s, v1.8h, v2.8h
	bfcvt	h0, s1
	fmlal	v0.4s, v1.4h, v2.4h
	fmlal2	v0.4s, v1.4h, v2.h[3]
	fadd	h0, h1, h2
	fmov	h0, w1
	fmadd	h0, h1, h2, h3
	fadd	v0.8h, v1.8h, v2.8h
	fmla	v0.8h, v1.8h, v2.h[0]
	frint64x	d0, d1
	frint32z	v0.4s, v1.4s
	fjcvtzs	w0, d1
	retaa
	pacia	x0, x1
	braa	x0, x1
	ldraa	x0, [x1]
	pacga	x0, x1, x2
	irg	x0, x1
	stg	x0, [x1]
	ldg	x0, [x1]
	addg	x0, x1, #16, #1
	cfinv
	rmif	x0, #3, #2
	axflag
	mrs	x0, rndr
	sb
	msr	ssbs, #1
	ldlar	x0, [x1]
	dc	cvap, x0
	cpyfp	[x0]!, [x1]!, x2!
	ctz	x0, x1
	wfet	x0
	cntd	x0
	ptrue	p0.s
	ld1b	{z0.b}, p0/z, [x0]
	whilelo	p0.s, x0, x1
	sqrdmlah	z0.s, z1.s, z2.s
	bdep	z0.s, z1.s, z2.s
	aese	z0.b, z0.b, z1.b
	sm4e	z0.s, z0.s, z1.s
	rax1	z0.d, z1.d, z2.d
	fmmla	z0.s, z1.s, z2.s
	fmmla	z0.d, z1.d, z2.d
	rdsvl	x0, #1
	ld1h	{z24.h-z27.h}, pn14/z, [x16, x6, lsl #1]
	pext	p0.h, pn8[0]
	bfadd	z0.h, z1.h, z2.h
	fmla	za.s[w8, 0, vgx2], {z0.s, z1.s}, z2.s
	movaz	z0.s, za0h.s[w12, 0]
	smstart
	ld64b	x0, [x1]
	bc.eq	1f
1:	ret
	.size	feature_code, .-feature_code
