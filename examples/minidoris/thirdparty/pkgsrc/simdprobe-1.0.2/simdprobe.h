/* simdprobe: sum of a float vector, SVE or scalar. */
#ifndef SIMDPROBE_H
#define SIMDPROBE_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
/* Returns the sum of the first n values of v. */
double simdprobe_sum(const float *v, size_t n);
/* Names the kernel compiled in: "sve" or "scalar". */
const char *simdprobe_kernel(void);
#ifdef __cplusplus
}
#endif
#endif
