// The C++20 runtime probe: each check prints what it computed; the exit
// status is the number of checks that failed.
#include <atomic>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <fstream>
#include <random>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <unistd.h>

#include "probe.h"
#include "probefmt.h"

static int failed = 0;
static void check(bool ok, const char* what) {
  if (!ok) {
    ++failed;
    std::printf("FAILED: %s\n", what);
  }
}

static std::atomic<int> destroyed{0};
struct PerThread {
  std::string name = "per-thread";  // a member with a destructor of its own
  ~PerThread() { destroyed.fetch_add(1); }
};
thread_local PerThread per_thread;

int main() {
  // std::bit_cast
  auto bits = std::bit_cast<std::uint64_t>(1.5);
  std::printf("bit_cast(1.5) = %016llx\n", static_cast<unsigned long long>(bits));
  check(bits == 0x3ff8000000000000ull, "bit_cast");

  // std::random_device
  std::random_device rd;
  unsigned a = rd(), b = rd(), c = rd();
  std::printf("random_device: %s\n", a != b || b != c ? "three draws differ" : "three equal draws");
  check(a != b || b != c, "random_device");

  // thread_local with a non-trivial destructor, run at each thread's exit
  for (int i = 0; i < 3; ++i) {
    std::thread([] { per_thread.name += "!"; }).join();
  }
  std::printf("thread_local destructors: %d\n", destroyed.load());
  check(destroyed.load() == 3, "thread_local destructors");

  // std::filesystem
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("cxx20-probe-" + std::to_string(getpid()));
  fs::create_directories(dir / "x" / "y");
  std::ofstream(dir / "x" / "f") << "0123456789";
  auto size = fs::file_size(dir / "x" / "f");
  auto removed = fs::remove_all(dir);
  std::printf("filesystem: file_size %ju, removed %ju\n", static_cast<std::uintmax_t>(size), static_cast<std::uintmax_t>(removed));
  check(size == 10 && removed == 4 && !fs::exists(dir), "filesystem");

  // std::shared_mutex: writers and readers at once
  std::shared_mutex mu;
  long value = 0;
  std::atomic<long> seen{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; ++i) {
    ts.emplace_back([&] { for (int j = 0; j < 500; ++j) { std::unique_lock l(mu); ++value; } });
    ts.emplace_back([&] { for (int j = 0; j < 500; ++j) { std::shared_lock l(mu); seen += value >= 0; } });
  }
  for (auto& t : ts) t.join();
  std::printf("shared_mutex: %ld writes, %ld reads\n", value, seen.load());
  check(value == 1000 && seen.load() == 1000, "shared_mutex");

  // exceptions thrown in a shared library, caught here
  int caught = 0;
  try { probe_throw(0); } catch (const probe_error& e) { caught += e.code == 42; }
  try { probe_throw(1); } catch (const std::out_of_range&) { ++caught; }
  try { probe_throw(2); } catch (const std::system_error& e) { caught += e.code() == std::errc::no_such_file_or_directory; }
  std::printf("exceptions from libprobe.so caught: %d of 3\n", caught);
  check(caught == 3, "exceptions across the library boundary");

  // <charconv> floating point, both ways
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, 0.1 + 0.2);
  std::string shortest(buf, end);
  double back = 0;
  std::from_chars(buf, end, back);
  std::printf("to_chars(0.1+0.2) = %s, from_chars gives it back: %s\n", shortest.c_str(), back == 0.1 + 0.2 ? "yes" : "no");
  check(ec == std::errc() && shortest == "0.30000000000000004" && back == 0.1 + 0.2, "charconv");

  // the third-party package's code, compiled against the same runtime
  std::string pf = probe_fmt(1e21);
  std::printf("probefmt(1e21) = %s\n", pf.c_str());
  check(pf == "1e+21", "probefmt");

  std::printf("cxx20-probe: %d failed\n", failed);
  return failed;
}
