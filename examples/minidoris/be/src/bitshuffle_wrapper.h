#pragma once
#include <cstddef>
#include <cstdint>

namespace doris {
// The build's bitshuffle (NEON or scalar, as compiled).
int64_t bitshuffle(const void* in, void* out, size_t size, size_t elem_size);
int64_t bitunshuffle(const void* in, void* out, size_t size, size_t elem_size);
bool bitshuffle_uses_neon();
// Both kernels directly, to compare them; the NEON one returns -13 when not built.
int64_t bitshuffle_scalar(const void* in, void* out, size_t size, size_t elem_size);
int64_t bitshuffle_neon(const void* in, void* out, size_t size, size_t elem_size);
} // namespace doris
