/* minidoris bitshuffle: blocked API over the core kernels. */
#include "bitshuffle.h"

#include "iochain.h"

typedef int64_t (*bshuf_kernel)(const void *, void *, size_t, size_t);

static int64_t blocked(bshuf_kernel fn, const void *in, void *out, size_t size, size_t elem_size, size_t block_size) {
    if (block_size == 0) block_size = size;
    if (block_size % 8) return -81;
    ioc_chain c;
    ioc_init(&c, in, out);
    int64_t total = 0;
    for (size_t done = 0; done + block_size <= size; done += block_size) {
        size_t nbytes = block_size * elem_size;
        const void *src = ioc_get_in(&c, nbytes);
        void *dst = ioc_get_out(&c, nbytes);
        int64_t n = fn(src, dst, block_size, elem_size);
        if (n < 0) return n;
        total += n;
    }
    return total;
}

int64_t bshuf_bitshuffle(const void *in, void *out, size_t size, size_t elem_size, size_t block_size) {
    return blocked(bshuf_trans_bit_elem, in, out, size, elem_size, block_size);
}

int64_t bshuf_bitunshuffle(const void *in, void *out, size_t size, size_t elem_size, size_t block_size) {
    return blocked(bshuf_untrans_bit_elem, in, out, size, elem_size, block_size);
}
