// foo's kernels as profiler device activity (profiler.cpp, profiler_kineto.cpp).
//
// A foo kernel is the native implementation of one ATen op (FOO_IMPL's wrapper, common.h): it
// runs to completion on the calling thread, so its device time is the wall time between its
// start and its end. Only the outermost kernel on a thread is timed (a kernel that calls other
// ops through at:: counts them as its own time), and only while a profiler collects.
#pragma once

#include <cstdint>

namespace foo::prof {

// Start time (ns, c10::getTime) of a kernel when it is the outermost one on this thread and a
// profiler is collecting, else -1. Every call must be paired with kernel_end.
int64_t kernel_begin() noexcept;
// Ends the kernel kernel_begin started; records it (op name without "aten::", device index or
// -1 for the current device) when `start` >= 0.
void kernel_end(int64_t start, const char* op, int device) noexcept;

// Times one native kernel for the scope's lifetime.
class KernelScope {
 public:
  explicit KernelScope(const char* op) noexcept : op_(op), start_(kernel_begin()) {}
  ~KernelScope() { kernel_end(start_, op_, device_); }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
  bool timed() const noexcept { return start_ >= 0; }
  void set_device(int device) noexcept { device_ = device; }

 private:
  const char* op_;
  int64_t start_;
  int device_ = -1;
};

}  // namespace foo::prof
