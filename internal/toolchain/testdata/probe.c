/* A probe program for toolchain tests: prints the ISA feature macros the
 * compiler defined for the target, then does a little work worth profiling. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static unsigned hot(const unsigned char *p, size_t n) {
	unsigned h = 2166136261u;
	for (size_t i = 0; i < n; i++) {
		h = (h ^ p[i]) * 16777619u;
	}
	return h;
}

int main(int argc, char **argv) {
#ifdef __ARM_FEATURE_SVE
	puts("feature sve");
#endif
#ifdef __ARM_FEATURE_SVE2
	puts("feature sve2");
#endif
#ifdef __ARM_FEATURE_DOTPROD
	puts("feature dotprod");
#endif
#ifdef __ARM_FEATURE_CRC32
	puts("feature crc");
#endif
#ifdef __ARM_FEATURE_ATOMICS
	puts("feature lse");
#endif
#ifdef __ARM_FEATURE_AES
	puts("feature aes");
#endif
#ifdef __ARM_FEATURE_FP16_VECTOR_ARITHMETIC
	puts("feature fp16");
#endif
#ifdef __ARM_FEATURE_MATMUL_INT8
	puts("feature i8mm");
#endif
#ifdef __ARM_FEATURE_BF16_VECTOR_ARITHMETIC
	puts("feature bf16");
#endif
#ifdef __aarch64__
	puts("arch aarch64");
#endif
#ifdef __x86_64__
	puts("arch x86_64");
#endif
	size_t n = 1 << 16;
	unsigned char *buf = malloc(n);
	for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 7 + argc);
	unsigned h = 0;
	for (int r = 0; r < 50; r++) h ^= hot(buf, n);
	printf("hash %08x\n", h);
	free(buf);
	return strcmp(argv[0], "") == 0;
}
