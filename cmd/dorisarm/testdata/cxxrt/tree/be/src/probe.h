#pragma once
#include <stdexcept>
#include <string>

// Thrown in libprobe.so, caught in the program: the exception's type
// information and unwinding cross the shared-library boundary.
struct probe_error : std::runtime_error {
  int code;
  probe_error(const std::string& what, int c) : std::runtime_error(what), code(c) {}
};

extern "C" void probe_throw(int kind);
