/* minidoris bitshuffle: public API. */
#ifndef BITSHUFFLE_H
#define BITSHUFFLE_H

#include <stddef.h>
#include <stdint.h>

#include "bitshuffle_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Shuffles size elements of elem_size bytes from in to out in blocks of
 * block_size elements (0: one block). Returns bytes processed or < 0. */
int64_t bshuf_bitshuffle(const void *in, void *out, size_t size, size_t elem_size, size_t block_size);
int64_t bshuf_bitunshuffle(const void *in, void *out, size_t size, size_t elem_size, size_t block_size);

#ifdef __cplusplus
}
#endif

#endif
