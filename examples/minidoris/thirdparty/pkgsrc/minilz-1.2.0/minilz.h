/* minilz: a tiny LZ77-style compressor. */
#ifndef MINILZ_H
#define MINILZ_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
/* Worst-case compressed size of n input bytes. */
size_t minilz_bound(size_t n);
/* Compresses n bytes of in into out (cap bytes); returns the size or 0 if out is too small. */
size_t minilz_compress(const uint8_t *in, size_t n, uint8_t *out, size_t cap);
/* Decompresses; returns the size or (size_t)-1 on corrupt input or a too small out. */
size_t minilz_decompress(const uint8_t *in, size_t n, uint8_t *out, size_t cap);
#ifdef __cplusplus
}
#endif
#endif
