#include "probe.h"

#include <system_error>
#include <vector>

extern "C" void probe_throw(int kind) {
  if (kind == 0) throw probe_error("from libprobe.so", 42);
  if (kind == 1) {
    std::vector<int> v(2);
    (void)v.at(5);  // std::out_of_range, thrown by the runtime's code
  }
  throw std::system_error(std::make_error_code(std::errc::no_such_file_or_directory), "libprobe.so");
}
