/* simdprobe: sum of a float vector, SVE or scalar. */
#include "simdprobe.h"

#ifdef SIMDPROBE_SVE
#include <arm_sve.h>

double simdprobe_sum(const float *v, size_t n) {
    svfloat64_t acc = svdup_f64(0.0);
    for (size_t i = 0; i < n; i += svcntd()) {
        svbool_t pg = svwhilelt_b64((uint64_t)i, (uint64_t)n);
        /* Widen each float to double: load 32-bit lanes into 64-bit containers. */
        svfloat32_t x = svreinterpret_f32_u64(svld1uw_u64(pg, (const uint32_t *)(v + i)));
        acc = svadd_f64_m(pg, acc, svcvt_f64_f32_x(pg, x));
    }
    return svaddv_f64(svptrue_b64(), acc);
}

const char *simdprobe_kernel(void) { return "sve"; }

#else

double simdprobe_sum(const float *v, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) acc += (double)v[i];
    return acc;
}

const char *simdprobe_kernel(void) { return "scalar"; }

#endif
