/* minidoris bitshuffle: core kernels. */
#ifndef BITSHUFFLE_CORE_H
#define BITSHUFFLE_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BSHUF_VERSION_MAJOR 0
#define BSHUF_VERSION_MINOR 5
#define BSHUF_VERSION_POINT 1

int bshuf_using_NEON(void);
int64_t bshuf_trans_bit_elem(const void *in, void *out, size_t size, size_t elem_size);
int64_t bshuf_untrans_bit_elem(const void *in, void *out, size_t size, size_t elem_size);
int64_t bshuf_trans_bit_elem_scal(const void *in, void *out, size_t size, size_t elem_size);
int64_t bshuf_trans_bit_elem_NEON(const void *in, void *out, size_t size, size_t elem_size);
int64_t bshuf_shuffle_bit_eightelem_NEON(const void *in, void *out, size_t size, size_t elem_size);

#ifdef __cplusplus
}
#endif

#endif
