/* minidoris bitshuffle: core kernels.
 *
 * The instruction set is chosen at compile time: NEON when the compiler
 * targets AArch64 with Advanced SIMD, scalar otherwise.
 */

#include "bitshuffle_core.h"

#include <stdlib.h>
#include <string.h>

#if defined(__ARM_NEON__) || (__ARM_NEON)
#ifdef __aarch64__
#define USEARMNEON
#endif
#endif

#if defined USEARMNEON
#include <arm_neon.h>
#endif

#define CHECK_MULT_EIGHT(n) \
    if ((n) % 8) return -80;

int bshuf_using_NEON(void) {
#ifdef USEARMNEON
    return 1;
#else
    return 0;
#endif
}

/* Byte transpose: tmp[k*size + e] = in[e*elem_size + k]. */
static void trans_byte_elem(const uint8_t *in, uint8_t *tmp, size_t size, size_t elem_size) {
    for (size_t e = 0; e < size; e++) {
        for (size_t k = 0; k < elem_size; k++) {
            tmp[k * size + e] = in[e * elem_size + k];
        }
    }
}

/* Scalar bit transpose of each byte row into eight bit planes. */
static void trans_bit_byte_scal(const uint8_t *rows, uint8_t *out, size_t size, size_t elem_size) {
    size_t nbyte_row = size / 8;
    for (size_t k = 0; k < elem_size; k++) {
        const uint8_t *row = rows + k * size;
        for (size_t j = 0; j < nbyte_row; j++) {
            uint8_t x[8];
            memcpy(x, row + 8 * j, 8);
            for (int b = 0; b < 8; b++) {
                uint8_t v = 0;
                for (int i = 0; i < 8; i++) {
                    v |= (uint8_t)(((x[i] >> b) & 1u) << i);
                }
                out[(k * 8 + b) * nbyte_row + j] = v;
            }
        }
    }
}

int64_t bshuf_trans_bit_elem_scal(const void *in, void *out, size_t size, size_t elem_size) {
    CHECK_MULT_EIGHT(size);
    uint8_t *tmp = malloc(size * elem_size);
    if (tmp == NULL) return -1;
    trans_byte_elem(in, tmp, size, elem_size);
    trans_bit_byte_scal(tmp, out, size, elem_size);
    free(tmp);
    return (int64_t)(size * elem_size);
}

#ifdef USEARMNEON

/* Moves bit b of each of 16 lanes into a 16-bit mask, like SSE's movemask. */
static inline uint16_t neon_movemask_bit(uint8x16_t v, int b) {
    static const int8_t weights[16] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
    uint8x16_t bits = vandq_u8(vshlq_u8(v, vdupq_n_s8((int8_t)-b)), vdupq_n_u8(1));
    uint8x16_t placed = vshlq_u8(bits, vld1q_s8(weights));
    return (uint16_t)(vaddv_u8(vget_low_u8(placed)) | (vaddv_u8(vget_high_u8(placed)) << 8));
}

/* NEON bit transpose of byte rows, 16 elements at a time. */
int64_t bshuf_shuffle_bit_eightelem_NEON(const void *in, void *out, size_t size, size_t elem_size) {
    const uint8_t *rows = in;
    uint8_t *o = out;
    size_t nbyte_row = size / 8;
    for (size_t k = 0; k < elem_size; k++) {
        const uint8_t *row = rows + k * size;
        size_t e = 0;
        for (; e + 16 <= size; e += 16) {
            uint8x16_t v = vld1q_u8(row + e);
            for (int b = 0; b < 8; b++) {
                uint16_t m = neon_movemask_bit(v, b);
                uint8_t *dst = o + (k * 8 + b) * nbyte_row + e / 8;
                dst[0] = (uint8_t)m;
                dst[1] = (uint8_t)(m >> 8);
            }
        }
        for (; e < size; e += 8) {
            for (int b = 0; b < 8; b++) {
                uint8_t v = 0;
                for (int i = 0; i < 8; i++) v |= (uint8_t)(((row[e + i] >> b) & 1u) << i);
                o[(k * 8 + b) * nbyte_row + e / 8] = v;
            }
        }
    }
    return (int64_t)(size * elem_size);
}

int64_t bshuf_trans_bit_elem_NEON(const void *in, void *out, size_t size, size_t elem_size) {
    CHECK_MULT_EIGHT(size);
    uint8_t *tmp = malloc(size * elem_size);
    if (tmp == NULL) return -1;
    trans_byte_elem(in, tmp, size, elem_size);
    int64_t count = bshuf_shuffle_bit_eightelem_NEON(tmp, out, size, elem_size);
    free(tmp);
    return count;
}

#else // #ifdef USEARMNEON

int64_t bshuf_shuffle_bit_eightelem_NEON(const void *in, void *out, size_t size, size_t elem_size) {
    (void)in, (void)out, (void)size, (void)elem_size;
    return -13;
}

int64_t bshuf_trans_bit_elem_NEON(const void *in, void *out, size_t size, size_t elem_size) {
    (void)in, (void)out, (void)size, (void)elem_size;
    return -13;
}

#endif // #ifdef USEARMNEON

int64_t bshuf_trans_bit_elem(const void *in, void *out, size_t size, size_t elem_size) {
#if defined(USEARMNEON)
    return bshuf_trans_bit_elem_NEON(in, out, size, elem_size);
#else
    return bshuf_trans_bit_elem_scal(in, out, size, elem_size);
#endif
}

/* Inverse transform (scalar on every platform). */
int64_t bshuf_untrans_bit_elem(const void *in, void *out, size_t size, size_t elem_size) {
    CHECK_MULT_EIGHT(size);
    const uint8_t *i8 = in;
    uint8_t *o8 = out;
    size_t nbyte_row = size / 8;
    memset(o8, 0, size * elem_size);
    for (size_t k = 0; k < elem_size; k++) {
        for (int b = 0; b < 8; b++) {
            const uint8_t *plane = i8 + (k * 8 + b) * nbyte_row;
            for (size_t e = 0; e < size; e++) {
                uint8_t bit = (plane[e / 8] >> (e % 8)) & 1u;
                o8[e * elem_size + k] |= (uint8_t)(bit << b);
            }
        }
    }
    return (int64_t)(size * elem_size);
}
