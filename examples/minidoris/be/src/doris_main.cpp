// minidoris BE: a small program with Doris's build interface. It links every
// third-party package and OpenSSL, and has two modes the pipeline uses:
//   --self-test  runs each kernel against an independent reference (exit 0 when all agree)
//   --bench [N]  the PGO training workload
#include <openssl/evp.h>
#include <openssl/opensslv.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bitshuffle_wrapper.h"
#include "gen_cpp/version.h"
#include "minilz.h"
#include "simdprobe.h"

namespace {

std::vector<uint8_t> test_data(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    uint32_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        // Repetitive enough to compress, random enough to exercise every bit.
        v[i] = (i % 64 < 40) ? static_cast<uint8_t>(i / 7) : static_cast<uint8_t>(x >> 24);
    }
    return v;
}

// Reference bit transpose written from the format description, independent of the library.
std::vector<uint8_t> reference_bitshuffle(const std::vector<uint8_t>& in, size_t n, size_t es) {
    std::vector<uint8_t> out(n * es, 0);
    for (size_t e = 0; e < n; e++)
        for (size_t k = 0; k < es; k++)
            for (int b = 0; b < 8; b++)
                if ((in[e * es + k] >> b) & 1) out[(k * 8 + b) * (n / 8) + e / 8] |= uint8_t(1u << (e % 8));
    return out;
}

bool check(bool ok, const char* what, std::string detail = "") {
    std::printf("%-12s %s%s%s\n", what, ok ? "ok" : "FAILED", detail.empty() ? "" : "  ", detail.c_str());
    return ok;
}

bool test_bitshuffle() {
    const size_t n = 1024, es = 4;
    auto in = test_data(n * es, 7);
    std::vector<uint8_t> out(n * es), back(n * es);
    bool ok = doris::bitshuffle(in.data(), out.data(), n, es) == int64_t(n * es);
    ok = ok && out == reference_bitshuffle(in, n, es);
    ok = ok && doris::bitunshuffle(out.data(), back.data(), n, es) == int64_t(n * es) && back == in;
    return check(ok, "bitshuffle", doris::bitshuffle_uses_neon() ? "kernel=neon" : "kernel=scalar");
}

bool test_simdprobe() {
    std::vector<float> v(1000);
    for (size_t i = 0; i < v.size(); i++) v[i] = float(i) * 0.5f;
    double got = simdprobe_sum(v.data(), v.size());
    return check(got == 249750.0, "simdprobe", std::string("kernel=") + simdprobe_kernel());
}

bool test_minilz() {
    auto in = test_data(1 << 16, 11);
    std::vector<uint8_t> c(minilz_bound(in.size())), d(in.size());
    size_t cn = minilz_compress(in.data(), in.size(), c.data(), c.size());
    size_t dn = cn ? minilz_decompress(c.data(), cn, d.data(), d.size()) : 0;
    bool ok = cn > 0 && cn < in.size() && dn == in.size() && d == in;
    char detail[64];
    std::snprintf(detail, sizeof detail, "ratio=%.2f", cn ? double(in.size()) / double(cn) : 0.0);
    return check(ok, "minilz", detail);
}

std::string sha256_hex(const void* data, size_t n) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
    std::string s;
    char buf[3];
    for (unsigned i = 0; i < len; i++) {
        std::snprintf(buf, sizeof buf, "%02x", md[i]);
        s += buf;
    }
    return s;
}

bool test_openssl() {
    // FIPS 180-2 test vector for "abc".
    bool ok = sha256_hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    return check(ok, "openssl", OPENSSL_VERSION_TEXT);
}

int self_test() {
    bool ok = test_bitshuffle();
    ok = test_simdprobe() && ok;
    ok = test_minilz() && ok;
    ok = test_openssl() && ok;
    std::printf("self-test: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

int bench(int rounds) {
    const size_t n = 1 << 14, es = 8;
    auto in = test_data(n * es, 3);
    std::vector<uint8_t> out(n * es), c(minilz_bound(in.size()));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = float(in[i]);
    auto start = std::chrono::steady_clock::now();
    uint64_t acc = 0;
    for (int r = 0; r < rounds; r++) {
        acc += uint64_t(doris::bitshuffle(in.data(), out.data(), n, es));
        acc += minilz_compress(out.data(), out.size(), c.data(), c.size());
        acc += uint64_t(simdprobe_sum(f.data(), f.size()));
        acc += sha256_hex(in.data(), in.size()).size();
        in[size_t(r) % in.size()] ^= uint8_t(acc);
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("bench: %d rounds in %.1f ms (checksum %llu)\n", rounds, ms, static_cast<unsigned long long>(acc));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "--version";
    if (mode == "--self-test") return self_test();
    if (mode == "--bench") return bench(argc > 2 ? std::atoi(argv[2]) : 20);
    if (mode == "--version") {
        std::printf("%s\n", DORIS_BUILD_VERSION);
        return 0;
    }
    std::fprintf(stderr, "usage: doris_be --version | --self-test | --bench [ROUNDS]\n");
    return 2;
}
