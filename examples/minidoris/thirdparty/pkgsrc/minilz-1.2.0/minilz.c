/* minilz: a tiny LZ77-style compressor with a 4096-entry hash of 4-byte prefixes. */
#include "minilz.h"

#include <string.h>

#define HASH_BITS 12
#define MIN_MATCH 4
#define MAX_LEN 255

size_t minilz_bound(size_t n) { return n + n / 255 * 2 + 4; }

static uint32_t hash4(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return (v * 2654435761u) >> (32 - HASH_BITS);
}

static int flush_literals(const uint8_t *lit, size_t len, uint8_t *out, size_t cap, size_t *o) {
    while (len > 0) {
        size_t run = len > MAX_LEN ? MAX_LEN : len;
        if (*o + 2 + run > cap) return 0;
        out[(*o)++] = 0;
        out[(*o)++] = (uint8_t)run;
        memcpy(out + *o, lit, run);
        *o += run;
        lit += run;
        len -= run;
    }
    return 1;
}

size_t minilz_compress(const uint8_t *in, size_t n, uint8_t *out, size_t cap) {
    size_t table[1 << HASH_BITS];
    for (size_t i = 0; i < (1 << HASH_BITS); i++) table[i] = (size_t)-1;
    size_t i = 0, lit = 0, o = 0;
    while (i + MIN_MATCH <= n) {
        uint32_t h = hash4(in + i);
        size_t cand = table[h];
        table[h] = i;
        if (cand != (size_t)-1 && i - cand <= 65535 && memcmp(in + cand, in + i, MIN_MATCH) == 0) {
            size_t len = MIN_MATCH;
            while (i + len < n && len < MAX_LEN && in[cand + len] == in[i + len]) len++;
            if (!flush_literals(in + lit, i - lit, out, cap, &o)) return 0;
            if (o + 4 > cap) return 0;
            size_t off = i - cand;
            out[o++] = 1;
            out[o++] = (uint8_t)len;
            out[o++] = (uint8_t)(off & 0xff);
            out[o++] = (uint8_t)(off >> 8);
            i += len;
            lit = i;
        } else {
            i++;
        }
    }
    if (!flush_literals(in + lit, n - lit, out, cap, &o)) return 0;
    return o;
}

size_t minilz_decompress(const uint8_t *in, size_t n, uint8_t *out, size_t cap) {
    size_t i = 0, o = 0;
    while (i < n) {
        if (i + 2 > n) return (size_t)-1;
        uint8_t tag = in[i], len = in[i + 1];
        if (tag == 0) {
            if (i + 2 + len > n || o + len > cap) return (size_t)-1;
            memcpy(out + o, in + i + 2, len);
            o += len;
            i += 2 + len;
        } else if (tag == 1) {
            if (i + 4 > n) return (size_t)-1;
            size_t off = (size_t)in[i + 2] | ((size_t)in[i + 3] << 8);
            if (off == 0 || off > o || o + len > cap) return (size_t)-1;
            for (size_t k = 0; k < len; k++) out[o + k] = out[o - off + k];
            o += len;
            i += 4;
        } else {
            return (size_t)-1;
        }
    }
    return o;
}
