// minidoris BE: picks the bitshuffle build matching the target, the way Doris's
// bitshuffle_wrapper.cpp does: on aarch64 it calls the *_neon symbols that
// build-thirdparty.sh renamed, elsewhere the default ones.
#include "bitshuffle_wrapper.h"

#if defined(__ARM_NEON) && defined(__aarch64__)
#define bshuf_bitshuffle bshuf_bitshuffle_neon
#define bshuf_bitunshuffle bshuf_bitunshuffle_neon
#define bshuf_using_NEON bshuf_using_NEON_neon
#define bshuf_trans_bit_elem_scal bshuf_trans_bit_elem_scal_neon
#define bshuf_trans_bit_elem_NEON bshuf_trans_bit_elem_NEON_neon
#endif
#include <bitshuffle/bitshuffle.h>

namespace doris {

int64_t bitshuffle(const void* in, void* out, size_t size, size_t elem_size) {
    return bshuf_bitshuffle(in, out, size, elem_size, 0);
}

int64_t bitunshuffle(const void* in, void* out, size_t size, size_t elem_size) {
    return bshuf_bitunshuffle(in, out, size, elem_size, 0);
}

bool bitshuffle_uses_neon() {
    return bshuf_using_NEON() != 0;
}

int64_t bitshuffle_scalar(const void* in, void* out, size_t size, size_t elem_size) {
    return bshuf_trans_bit_elem_scal(in, out, size, elem_size);
}

int64_t bitshuffle_neon(const void* in, void* out, size_t size, size_t elem_size) {
    return bshuf_trans_bit_elem_NEON(in, out, size, elem_size);
}

} // namespace doris
